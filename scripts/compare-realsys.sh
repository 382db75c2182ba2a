#!/usr/bin/env bash
# The same-run comparison of the README: each real system (etcd 3.5 → 3.6,
# NATS 2.10 → 2.11) upgraded by ferry and by a naive rolling restart (stop,
# start, wait for health, fixed settle) on fresh clusters under the same
# load of its own client; prints requests, failed, lost, p99 and wall time
# as a Markdown table, and exits 1 when ferry failed more requests than the
# naive loop or took more than 1.2 times its time (ferry's soak = the
# naive settle).
#
#   scripts/compare-realsys.sh [-settle 2s] [-rate 100] [-runs 1] [-systems etcd,nats]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/realsys.sh build
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/ferry" ./cmd/ferry
go run ./internal/testenv/realsys/compare -ferry "$bin/ferry" "$@"
