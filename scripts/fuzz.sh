#!/usr/bin/env bash
# Every fuzz target of the repository, each for FUZZTIME (default 30s),
# one after the other (CI runs their seed corpora only, in plain go
# test). The targets are found in the test files, so a new one is
# fuzzed without touching this script. A crash stops the run: its
# input is in the package's testdata/fuzz/<target>/, to be kept as a
# regression seed once fixed. The summary gives each target's
# executions.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
while read -r file; do
	dir=$(dirname "$file")
	for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //'); do
		echo "== $dir $target ($FUZZTIME)"
		log=$(mktemp)
		if ! go test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" "./$dir/" 2>&1 | tee "$log" | grep -v '^fuzz: elapsed' ; then
			:
		fi
		last=$(grep '^fuzz: elapsed' "$log" | tail -1 || true)
		if grep -q '^ok' "$log"; then
			printf '%-22s %-22s ok    %s\n' "$dir" "$target" "${last#fuzz: }" >>"$summary"
			rm -f "$log"
		else
			printf '%-22s %-22s FAIL  %s\n' "$dir" "$target" "${last#fuzz: }" >>"$summary"
			cat "$summary"
			echo "fuzz: $target in $dir failed; the failing input is under $dir/testdata/fuzz/$target/ (log: $log)" >&2
			exit 1
		fi
	done
done < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' internal examples | sort)
cat "$summary"
