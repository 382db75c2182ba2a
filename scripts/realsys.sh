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
#   scripts/realsys.sh example etcd|nats|sample-haproxy [cluster.yaml|haproxy.cfg]
#                              print examples/SYSTEM/FILE.tmpl with its
#                              placeholders filled in: the built binaries' paths and
#                              sha256, the agent's address, the ports and the data
#                              directory (each overridable by an environment variable
#                              of its name: AGENT=127.0.0.1:7201 DATA=/srv/etcd ...)
#
# It also builds the load tools of the tests and comparisons, each its own
# module under tools/realsys/ (the systems' own clients: etcd's clientv3,
# nats.go), into ${FERRY_CACHE:-$HOME/.cache/ferry}/realsys/tools/bin.
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

# build_tool NAME: a load tool from its module under tools/realsys/NAME,
# rebuilt when its source is newer than the binary.
build_tool() {
	local name=$1 bin=$CACHE/tools/bin mod=$ROOT/tools/realsys/$1
	mkdir -p "$bin"
	if [[ -x $bin/$name && -z $(find "$mod" -newer "$bin/$name" -type f 2>/dev/null) ]]; then
		return 0
	fi
	local t0=$SECONDS
	log "building $name"
	(cd "$mod" && CGO_ENABLED=0 go build -trimpath -o "$bin/.$name.tmp" .) || die "building $name failed"
	mv -f "$bin/.$name.tmp" "$bin/$name"
	log "$name in $bin ($((SECONDS - t0)) s)"
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
	build_tool etcdload
	build_tool natsload
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
	echo "ETCDLOAD=$CACHE/tools/bin/etcdload"
	echo "NATSLOAD=$CACHE/tools/bin/natsload"
	if command -v haproxy >/dev/null; then echo "HAPROXY=$(command -v haproxy)"; fi
}

# example SYSTEM [FILE]: the example's FILE (default cluster.yaml; the
# HAProxy example also has haproxy.cfg), placeholders filled in. Only
# ${NAME} placeholders are replaced: the {{...}} templates (and their $i,
# $m) are ferry's.
example() {
	local sys=${1-} file=${2:-cluster.yaml} tmpl
	tmpl=$ROOT/examples/$sys/$file.tmpl
	[[ -n $sys && -f $tmpl ]] || die "usage: $0 example etcd|nats|sample-haproxy [cluster.yaml|haproxy.cfg]"
	local -A v=(
		[AGENT]=${AGENT:-127.0.0.1:7101}
		[TOKEN_FILE]=${TOKEN_FILE:-agent/token}
		[DATA]=${DATA:-$PWD/data}
		[SOAK]=${SOAK:-2s}
		[EXTRA_RELEASES]=${EXTRA_RELEASES:-}
	)
	local n n1 np n1p i
	case $sys in
	etcd)
		n=${ETCD_N#v} n1=${ETCD_N1#v}
		np=$CACHE/etcd-$ETCD_N/bin/etcd n1p=$CACHE/etcd-$ETCD_N1/bin/etcd
		for i in 1 2 3; do
			local cv=E$i pv=E${i}_PEER
			v[E$i]=${!cv:-127.0.0.1:2${i}379}
			v[E${i}_PEER]=${!pv:-127.0.0.1:2${i}380}
		done
		;;
	nats)
		n=${NATS_N#v} n1=${NATS_N1#v}
		np=$CACHE/nats-$NATS_N/bin/nats-server n1p=$CACHE/nats-$NATS_N1/bin/nats-server
		for i in 1 2 3; do
			local hv=N${i}_HTTP cv=N${i}_CLIENT rv=N${i}_ROUTE
			v[N${i}_HTTP]=${!hv:-127.0.0.1:2${i}822}
			v[N${i}_CLIENT]=${!cv:-127.0.0.1:2${i}422}
			v[N${i}_ROUTE]=${!rv:-127.0.0.1:2${i}248}
		done
		;;
	sample-haproxy)
		# The sample's releases, as `make sample` builds them.
		n=1.0.0 n1=2.0.0 np=$ROOT/bin/sample-1.0.0 n1p=$ROOT/bin/sample-2.0.0
		for i in 1 2 3; do
			local kv=KV$i rv=KV${i}_RAFT
			v[KV$i]=${!kv:-127.0.0.1:2${i}101}
			v[KV${i}_RAFT]=${!rv:-127.0.0.1:2${i}102}
		done
		for i in 1 2 3 4; do
			local av=API$i
			v[API$i]=${!av:-127.0.0.1:2${i}201}
		done
		v[HAPROXY_FRONTEND]=${HAPROXY_FRONTEND:-127.0.0.1:20080}
		v[HAPROXY_STATS]=${HAPROXY_STATS:-127.0.0.1:20081}
		;;
	*) die "no example for $sys (etcd, nats, sample-haproxy)" ;;
	esac
	if [[ $file == cluster.yaml ]]; then
		[[ -x $np && -x $n1p ]] || die "$sys $n and $n1 are not built: run $0 build (the sample: make sample)"
		v[N_VERSION]=$n
		v[N1_VERSION]=$n1
		v[N_PATH]=$np
		v[N1_PATH]=$n1p
		v[N_SHA256]=$(sha256sum "$np" | cut -d' ' -f1)
		v[N1_SHA256]=$(sha256sum "$n1p" | cut -d' ' -f1)
	fi
	local text k
	text=$(<"$tmpl")
	for k in "${!v[@]}"; do
		text=${text//"\${$k}"/"${v[$k]}"}
	done
	if [[ $text =~ \$\{[A-Z0-9_]+\} ]]; then
		die "examples/$sys/$file.tmpl: ${BASH_REMATCH[0]} is not filled in"
	fi
	printf '%s\n' "$text"
}

case ${1-} in
build) build ;;
env) env_ ;;
example) example "${2-}" "${3-}" ;;
*)
	echo "usage: $0 build | env | example etcd|nats|sample-haproxy [cluster.yaml|haproxy.cfg]" >&2
	exit 2
	;;
esac
