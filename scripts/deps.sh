#!/usr/bin/env bash
# Installs what some tests need beyond Go, from Debian's packages, only
# when it is missing: Chromium for the dashboard's browser test
# (internal/server, chromedp) and the impact report's (internal/impact),
# which skip themselves without it.
# Idempotent: a second run installs nothing.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then
	echo "deps.sh: nothing to install (chromium: $(command -v chromium))"
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps.sh: ${need[*]} missing and no apt-get here; the browser test will skip" >&2
	exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" fonts-liberation >/dev/null
echo "deps.sh: installed ${need[*]}"
