#!/usr/bin/env bash
# Installs what the tests need beyond Go, from Debian's packages, only
# when it is missing: Chromium for the dashboard's browser test
# (internal/surface/server, chromedp) and the impact report's (internal/proof/impact),
# which skip themselves without it; openssl, curl and flock for the
# Kubernetes test environment (scripts/kube-testenv.sh) and flock for
# scripts/realsys.sh (HAProxy is installed by realsys.sh itself);
# iproute2 and openssh-server for the SSH substrate's tests, whose hosts
# are network namespaces each running its own sshd (internal/testenv/sshtest;
# they skip without them, or without the privilege to make namespaces).
# Idempotent: a second run installs nothing.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v flock >/dev/null 2>&1 || need+=(util-linux)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || need+=(iproute2)
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
if [ ${#need[@]} -eq 0 ]; then
	echo "deps.sh: nothing to install (chromium, openssl, curl, flock, ip, sshd: present)"
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps.sh: ${need[*]} missing and no apt-get here: install them (without chromium the browser tests skip)" >&2
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
