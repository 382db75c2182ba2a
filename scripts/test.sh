#!/usr/bin/env bash
# The test command of the README and of CI: vet, every test, and again
# under the race detector the pure packages and those that start
# goroutines (their end-to-end tests, internal/testenv/e2e and internal/testenv/realsys,
# run without it). Needs Go and bash; what
# else the tests use (Debian packages, binaries built from Go modules)
# the scripts below install or build, idempotently, and cache.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || { echo "test.sh: Go is required (https://go.dev/dl)"; exit 1; }
# Chromium for the browser tests, openssl, curl and flock (installed
# once, from Debian's packages); without Chromium the browser tests skip
# and say so.
bash scripts/deps.sh || echo "test.sh: scripts/deps.sh failed; the browser tests will skip"
# The Kubernetes control plane of the kube tests (kube-apiserver,
# controller-manager, scheduler, etcd, kwok), built from Go modules into
# ~/.cache/ferry once (about 9 minutes cold on 2 cores, then cached).
# FERRY_KUBE=0 skips those tests (they say so).
if [[ ${FERRY_KUBE:-1} == 1 ]]; then
	bash scripts/kube-testenv.sh build
	export FERRY_KUBE=1
fi
# A real Prometheus for the Prometheus signal's tests, built from its Go
# module once (about 2 minutes cold); FERRY_PROM=0 skips those tests.
if [[ ${FERRY_PROM:-1} == 1 ]]; then
	bash scripts/prometheus.sh >/dev/null
	export FERRY_PROM=1
fi
# The real clustered systems of internal/testenv/realsys's tests (etcd 3.5 and 3.6,
# nats-server 2.10 and 2.11, their own clients as load tools; HAProxy from
# Debian), built from their Go modules once and cached (cold: see
# tools/realsys/README.md). FERRY_REALSYS=0 skips those tests.
if [[ ${FERRY_REALSYS:-1} == 1 ]]; then
	bash scripts/realsys.sh build
	export FERRY_REALSYS=1
fi
# Each part's wall time is printed (what a cold or a warm run spends
# where), on stderr so that the go test output stays as it is.
lap() { echo "test.sh: $1 took $((SECONDS - ${2})) s" >&2; }
echo "test.sh: set-up took ${SECONDS} s" >&2
t=$SECONDS
t0=$SECONDS
go vet ./...
# The simulator's proof of issue #18: 300 seeds of a 1,000-member
# description through the real engine, every invariant checked (the race
# run below keeps its default 6). The end-to-end package alone takes
# about 25 minutes, its tests one after another and mostly waiting on
# the processes they run, hence the timeout. It starts first, beside the
# other packages: left to go test's order it began 15 minutes into a cold
# run and ran on alone at the end. (Split into two shards beside the
# other packages it finished sooner, but the four streams loaded the 2
# cores to 36 and timed tests failed: this is two.)
e2e=./internal/testenv/e2e
e2e_log=$(mktemp)
trap 'rm -f "$e2e_log"' EXIT
go test -count=1 -timeout 45m "$e2e" >"$e2e_log" 2>&1 &
e2e_pid=$!
rest=0
FERRY_SIM_SEEDS=${FERRY_SIM_SEEDS:-300} go test -count=1 -timeout 45m $(go list ./... | grep -vx "github.com/ferry-upgrade/ferry/${e2e#./}") || rest=$?
lap "vet and every test but the end-to-end package" "$t"
t=$SECONDS
# The race detector, while the end-to-end package still runs (it takes
# longer than the other packages; after it, the race run added 8 to 13
# minutes to a run): the pure packages, then the engine and the
# simulator that drives it, the agent, the server, the etcd store (its client keeps leases alive), the Kubernetes controller and driver
# (FERRY_KUBE=1; the driver's informers run beside its calls), the process and ssh drivers,
# the traffic generator and the proof session, where the goroutines are;
# and the extension example, an upgrade through the real engine (2 s);
# and the rehearsal's control (its handler and clients).
# Warm, on 2 cores at low load: 5 min 44 s (2026-11-25, 96b0f6a; 10.6
# min with other work at load 15). The controller's two whole scenarios
# (TestRookExample, TestControllerFirst: minutes each) run in the plain
# run only; the controller's other tests drive the same goroutines.
race=0
go test -count=1 -race -timeout 20m -skip '^(TestRookExample|TestControllerFirst)$' ./internal/core/upgrade/ ./internal/core/plan/ ./internal/core/config/ ./internal/run/health/ ./internal/run/store/ ./internal/run/store/etcdstore/ ./internal/core/strategy/ \
	./internal/run/engine/ ./internal/substrate/sim/ ./internal/substrate/agent/... ./internal/surface/server/ ./internal/surface/controller/ ./internal/substrate/kubernetes/ ./internal/substrate/process/ ./internal/substrate/ssh/ ./internal/proof/traffic/ \
	./internal/proof/ ./internal/proof/cpuburn/ ./internal/testenv/extension/ ./internal/surface/rehearse/ || race=$?
lap "the race detector run" "$t"
e2e_rc=0
wait "$e2e_pid" || e2e_rc=$?
cat "$e2e_log"
lap "vet and every test, the race run and the end-to-end package" "$t0"
if ((rest != 0 || e2e_rc != 0 || race != 0)); then
	echo "test.sh: tests failed (the end-to-end package: exit $e2e_rc; the others: exit $rest; the race run: exit $race)" >&2
	exit 1
fi
