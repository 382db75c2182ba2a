# ferry's two entry points: `make demo` and `make test`. Everything they
# need beyond Go itself is built from this repository into bin/.
GO      ?= go
BIN     := bin
FLAGS   := -trimpath
SAMPLE  := ./examples/sample/cmd/sample

.PHONY: faults all build sample demo test test-short bench bench-sim bench-kube fuzz vet clean

all: build

build:
	$(GO) build $(FLAGS) -o $(BIN)/ferry ./cmd/ferry

# Releases 1.0.0 and 2.0.0 of the sample cluster: one source, two
# binaries, the version set at build time.
sample:
	$(GO) build $(FLAGS) -ldflags "-X main.version=1.0.0" -o $(BIN)/sample-1.0.0 $(SAMPLE)
	$(GO) build $(FLAGS) -ldflags "-X main.version=2.0.0" -o $(BIN)/sample-2.0.0 $(SAMPLE)

# The embedded default: sample cluster at 1.0.0, traffic, upgrade to 2.0.0, report.
demo: build sample
	$(BIN)/ferry demo --artifacts $(BIN) --report $(BIN)/demo-report.json

# The whole suite: vet, then every test (real processes, a real raft
# cluster), the pure packages and those with goroutines (engine, agent,
# server, controller, process driver, traffic, proof) under the race
# detector too.
test:
	bash scripts/test.sh

test-short:
	$(GO) test -short -count=1 ./...

# Benchmarks: the planner, the state machine, the engine's own overhead per step.
bench:
	bash scripts/bench.sh

# ferry simulate on a 10,002-member description: its wall time (issue
# #18 wants it under 60 s), CPU time, peak memory and the load average.
bench-sim:
	bash scripts/bench-sim.sh

# ferry against Kubernetes' own DaemonSet RollingUpdate on 1,000 kwok
# nodes, same max unavailable, timed in the same run, ferry's memory.
bench-kube:
	bash scripts/kube-testenv.sh build
	FERRY_KUBE=1 $(GO) test ./internal/testenv/kubebench/ -run '^$$' -bench DaemonSet -benchtime 1x -timeout 30m -v

# A longer fault-injection run: ferry killed with SIGKILL in storms
# (each process lives 0.3 to 4s) for at least 100 kills of upgrades back
# and forth (CI runs 20), then away past a member's deadline: SIGKILLed
# for 40s, and SIGSTOPped for 40s (FERRY_KILL_AWAY pairs). Every
# upgrade must complete. FERRY_KILL_SEED=N replays a run.
# Then the highly available servers: three 'ferry server' processes on a
# real three-member etcd, the leader SIGKILLed 100 times (CI: 20) at
# seeded moments of upgrades back and forth (FERRY_HA_SEED=N replays).
faults:
	FERRY_KILL_POINTS=$${FERRY_KILL_POINTS:-100} FERRY_KILL_AWAY=$${FERRY_KILL_AWAY:-1} $(GO) test -count=1 -timeout 60m -run TestKillNineResumes -v ./internal/testenv/e2e/
	FERRY_HA_KILLS=$${FERRY_HA_KILLS:-100} $(GO) test -count=1 -timeout 60m -run TestHAServersSurviveLeaderKills -v ./internal/testenv/e2e/

# Every fuzz target (the description and traffic parsers, templates,
# versions, the API's and the agent's request bodies, JSON path
# matching, Prometheus answers, load signatures and public keys), FUZZTIME each (default 30s); CI runs
# their seed corpora only, as plain go test does.
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

clean:
	rm -rf $(BIN)
