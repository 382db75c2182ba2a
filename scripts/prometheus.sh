#!/usr/bin/env bash
# Builds Prometheus from its Go module, once, into ~/.cache/ferry/prometheus,
# for the tests of ferry's Prometheus signal (internal/proof/prom). Prints the
# binary's path. Idempotent: a cached binary is reused. Built without the
# service discoveries (remove_all_sd): the tests scrape a static target, and
# some discovery modules are not served by the module proxy.
set -euo pipefail
VERSION=${FERRY_PROMETHEUS_VERSION:-v0.316.0}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ferry/prometheus/$VERSION
BIN=$CACHE/bin/prometheus
if [[ -x $BIN ]]; then
	echo "$BIN"
	exit 0
fi
mkdir -p "$CACHE/bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "prometheus.sh: building Prometheus $VERSION (a few minutes, once)" >&2
(cd "$tmp" && GOBIN=$tmp CGO_ENABLED=0 GOFLAGS=-mod=mod go install -trimpath -tags remove_all_sd "github.com/prometheus/prometheus/cmd/prometheus@$VERSION") >&2
mv -f "$tmp/prometheus" "$BIN"
echo "$BIN"
