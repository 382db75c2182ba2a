#!/usr/bin/env bash
# The simulator at scale: `ferry simulate` of a 10,002-member
# description (internal/substrate/sim/testdata/large.yaml, three components on six
# hosts in three zones, scaled to 3,334 members each: sim.Scale), the
# real engine and state machine on a virtual clock. Issue #18 wants it
# under 60 s on this machine. It prints the command's wall time, its CPU
# time and peak memory, and the load average before and after: on two
# cores that others share, the wall time exceeds the CPU time by what
# the others took. FERRY_BENCH_K members per component (default 3334),
# FERRY_BENCH_SEED the seed (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
k=${FERRY_BENCH_K:-3334}
seed=${FERRY_BENCH_SEED:-1}
go build -trimpath -o bin/ferry ./cmd/ferry
out=$(mktemp)
times=$(mktemp)
trap 'rm -f "$out" "$times"' EXIT
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?"; }
before=$(loadavg)
start=$(date +%s.%N)
if [[ -x /usr/bin/time ]]; then
	/usr/bin/time -f '%U %S %M' -o "$times" bin/ferry simulate -f internal/substrate/sim/testdata/large.yaml --to 2.0.0 \
		--members-per-component "$k" --seed "$seed" >"$out"
else
	bin/ferry simulate -f internal/substrate/sim/testdata/large.yaml --to 2.0.0 --members-per-component "$k" --seed "$seed" >"$out"
	echo "? ? ?" >"$times"
fi
end=$(date +%s.%N)
after=$(loadavg)
read -r user sys rss <"$times"
grep -E '^(simulation:|ended )' "$out"
if grep -q ' broken' "$out"; then
	grep -A10 '^invariants:' "$out"
fi
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
verdict=$(awk -v w="$wall" 'BEGIN { print (w < 60 ? "under 60 s" : "NOT under 60 s") }')
rssmb="?"
[[ $rss != "?" ]] && rssmb=$((rss / 1024))
printf 'ferry simulate, %s members per component, seed %s: %s s wall (%s), %s s user + %s s sys, peak %s MB; load average %s before, %s after\n' \
	"$k" "$seed" "$wall" "$verdict" "$user" "$sys" "$rssmb" "$before" "$after"
