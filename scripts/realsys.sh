#!/usr/bin/env bash
# Real clustered systems for ferry's tests, built once from their Go modules
# (through the Go module proxy) and cached:
#
#   scripts/realsys.sh build   build what is missing: etcd at two releases with a
#                              documented rolling upgrade between them (N, N+1), etcdctl,
#                              nats-server at two such releases, rqlited at two releases
#                              (see below), and install HAProxy from Debian's packages if
#                              it is missing
#   scripts/realsys.sh env     print shell assignments for the binaries
#                              (eval "$(scripts/realsys.sh env)")
#
# etcd N is the last v3.5 patch (the 3.5 -> 3.6 guide wants every member on a
# recent 3.5 patch first), N+1 is v3.6.8, the etcd the Kubernetes tests run.
# Each is its own module under tools/realsys/ (etcd pins its own modules with
# replace directives). rqlite is tried with `go install`; the module proxy this
# machine reaches refuses github.com/rqlite/rqlite (403), and then build says so
# and goes on without it.
#
# nats-server (JetStream's raft clusters) stands in for rqlite as the second
# clustered system: NATS documents rolling upgrades one node at a time (lame-duck
# mode, then /healthz), and v2.10 -> v2.11 is a supported one.
#
# Cache: ${FERRY_CACHE:-$HOME/.cache/ferry}/realsys/<system>-<version>/bin. A
# lock makes parallel callers build once; a binary built already is reused.
set -euo pipefail

ETCD_N=v3.5.35
ETCD_N1=v3.6.8
NATS_N=v2.10.27
NATS_N1=v2.11.17
RQLITE_N=${FERRY_RQLITE_N:-v9.1.1}
RQLITE_N1=${FERRY_RQLITE_N1:-v9.1.2}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${FERRY_CACHE:-$HOME/.cache/ferry}/realsys

die() { echo "realsys: $*" >&2; exit 1; }
log() { echo "realsys: $*" >&2; }

# build_etcd VERSION MODULE-DIR: etcd (and etcdctl when the module has it).
build_etcd() {
	local version=$1 mod=$2 bin=$CACHE/etcd-$1/bin
	mkdir -p "$bin"
	local -a pkgs=()
	[[ -x $bin/etcd ]] || pkgs+=(go.etcd.io/etcd/server/v3)
	if grep -q 'go.etcd.io/etcd/etcdctl/v3$' "$mod/go.mod" && [[ ! -x $bin/etcdctl ]]; then
		pkgs+=(go.etcd.io/etcd/etcdctl/v3)
	fi
	((${#pkgs[@]})) || return 0
	log "building etcd $version (${pkgs[*]})"
	local t0=$SECONDS tmp
	tmp=$(mktemp -d "$bin/.tmp.XXXXXX")
	# One `go build` per binary: -o DIR names a binary after its package's
	# last element, and both would be named v3.
	local p name
	for p in "${pkgs[@]}"; do
		case $p in
		*/server/v3) name=etcd ;;
		*/etcdctl/v3) name=etcdctl ;;
		esac
		if ! (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/$name" "$p"); then
			rm -rf "$tmp"
			die "building $p $version failed"
		fi
		mv -f "$tmp/$name" "$bin/$name"
	done
	rm -rf "$tmp"
	log "etcd $version in $bin ($((SECONDS - t0)) s)"
}

# build_rqlite VERSION: rqlited, which needs cgo (SQLite) and so gcc.
build_rqlite() {
	local version=$1 bin=$CACHE/rqlite-$1/bin
	[[ -x $bin/rqlited ]] && return 0
	# A refusal is remembered for a day, so that a warm build asks nobody.
	if [[ -n $(find "$bin/.refused" -mmin -1440 2>/dev/null) ]]; then
		log "rqlite $version: refused by the Go module proxy earlier today; skipped (rm $bin/.refused to try again)"
		return 1
	fi
	command -v gcc >/dev/null || { log "rqlite $version: gcc is required (cgo), skipped"; return 1; }
	mkdir -p "$bin"
	local major=${version%%.*} tmp out t0=$SECONDS
	tmp=$(mktemp -d "$bin/.tmp.XXXXXX")
	log "building rqlited $version"
	if ! out=$(cd "$tmp" && GOBIN=$tmp CGO_ENABLED=1 go install -trimpath \
		"github.com/rqlite/rqlite/$major/cmd/rqlited@$version" 2>&1); then
		rm -rf "$tmp"
		if grep -q '403 Forbidden' <<<"$out"; then
			: >"$bin/.refused"
			log "rqlite $version: the Go module proxy refuses github.com/rqlite/rqlite/$major (403 Forbidden); skipped"
		else
			log "rqlite $version: build failed, skipped:"
			echo "$out" | tail -n 20 >&2
		fi
		return 1
	fi
	mv -f "$tmp/rqlited" "$bin/rqlited"
	rm -rf "$tmp"
	log "rqlited $version in $bin ($((SECONDS - t0)) s)"
}

# build_nats VERSION: nats-server, a main package at its module's root.
build_nats() {
	local version=$1 bin=$CACHE/nats-$1/bin
	[[ -x $bin/nats-server ]] && return 0
	mkdir -p "$bin"
	local tmp t0=$SECONDS
	tmp=$(mktemp -d "$bin/.tmp.XXXXXX")
	log "building nats-server $version"
	if ! (cd "$tmp" && GOBIN=$tmp CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
		"github.com/nats-io/nats-server/v2@$version"); then
		rm -rf "$tmp"
		die "building nats-server $version failed"
	fi
	mv -f "$tmp/nats-server" "$bin/nats-server"
	rm -rf "$tmp"
	log "nats-server $version in $bin ($((SECONDS - t0)) s)"
}

haproxy_install() {
	command -v haproxy >/dev/null && return 0
	command -v apt-get >/dev/null || { log "haproxy missing and no apt-get here"; return 1; }
	local sudo=
	[[ $(id -u) -eq 0 ]] || sudo=sudo
	log "installing haproxy from Debian's packages"
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends haproxy >/dev/null ||
		{ $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends haproxy >/dev/null; }
	# The package starts a system-wide haproxy on its default configuration;
	# the tests run their own.
	if command -v systemctl >/dev/null && systemctl is-active --quiet haproxy 2>/dev/null; then
		$sudo systemctl stop haproxy || true
	fi
}

build() {
	command -v go >/dev/null || die "Go is required"
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.build.lock"
	flock 9
	local t0=$SECONDS
	build_etcd "$ETCD_N" "$ROOT/tools/realsys/etcd35"
	build_etcd "$ETCD_N1" "$ROOT/tools/realsys/etcd36"
	build_nats "$NATS_N"
	build_nats "$NATS_N1"
	build_rqlite "$RQLITE_N" || true
	build_rqlite "$RQLITE_N1" || true
	haproxy_install || true
	log "done ($((SECONDS - t0)) s)"
}

env_() {
	echo "ETCD_N_VERSION=$ETCD_N"
	echo "ETCD_N=$CACHE/etcd-$ETCD_N/bin/etcd"
	echo "ETCD_N1_VERSION=$ETCD_N1"
	echo "ETCD_N1=$CACHE/etcd-$ETCD_N1/bin/etcd"
	echo "ETCDCTL=$CACHE/etcd-$ETCD_N1/bin/etcdctl"
	echo "NATS_N_VERSION=$NATS_N"
	echo "NATS_N=$CACHE/nats-$NATS_N/bin/nats-server"
	echo "NATS_N1_VERSION=$NATS_N1"
	echo "NATS_N1=$CACHE/nats-$NATS_N1/bin/nats-server"
	local v
	for v in N N1; do
		local ver_var=RQLITE_$v
		local ver=${!ver_var} b
		b=$CACHE/rqlite-$ver/bin/rqlited
		if [[ -x $b ]]; then
			echo "RQLITE_${v}_VERSION=$ver"
			echo "RQLITED_$v=$b"
		fi
	done
	if command -v haproxy >/dev/null; then echo "HAPROXY=$(command -v haproxy)"; fi
}

case ${1-} in
build) build ;;
env) env_ ;;
*)
	echo "usage: $0 build | env" >&2
	exit 2
	;;
esac
