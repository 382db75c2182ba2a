#!/usr/bin/env bash
# Benchmarks: Go benchmarks of the planner, the state machine and the
# store (the write-before-act cost), then one demo run whose report
# gives the engine's own overhead per step (the time from a member
# passing its health gate, the end of its soak, to the engine's next
# action) and the pace: the upgrade's wall time against the lower bound
# of its plan under its policy, and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run='^$' -bench=. -benchmem ./internal/core/plan/ ./internal/core/upgrade/ ./internal/run/store/
make -s build sample
bin/ferry demo --artifacts bin --report bin/bench-report.json | grep -E '^(engine overhead|pace|requests during|upgrade) ' 
echo "full report: bin/bench-report.json"
