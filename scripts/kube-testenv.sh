#!/usr/bin/env bash
# A real Kubernetes control plane on loopback, for ferry's Kubernetes tests.
#
#   scripts/kube-testenv.sh build       build (once, cached) etcd, kube-apiserver,
#                                       kube-controller-manager, kube-scheduler, kubectl, kwok
#   scripts/kube-testenv.sh build etcd  build etcd alone (what etcdtest's tests need: the
#                                       end-to-end package starts on it before the rest is built)
#   scripts/kube-testenv.sh start DIR   start them on free loopback ports; writes DIR/kubeconfig,
#                                       DIR/pids, DIR/*.log; returns when /readyz is ok. kwok
#                                       serves pods' output (kubectl logs [--previous]) from
#                                       DIR/kwok-logs (see kwok_logs)
#   scripts/kube-testenv.sh stop DIR    stop what `start DIR` started
#   scripts/kube-testenv.sh env         print the bin dir
#
# Everything is built from Go modules (tools/kubeenv, tools/kubeenv/etcd, kwok's own);
# the only things needed beyond Go are bash, openssl and curl.
# Cache: ${FERRY_CACHE:-$HOME/.cache/ferry}/kube/<version>/bin.
set -euo pipefail

KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.6.8
KWOK_VERSION=v0.8.0
KUBE_MAJOR=1
KUBE_MINOR=37

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${FERRY_CACHE:-$HOME/.cache/ferry}
BIN=$CACHE/kube/$KUBE_VERSION/bin
READY_TIMEOUT=${FERRY_KUBE_READY_TIMEOUT:-120}

die() { echo "kube-testenv: $*" >&2; exit 1; }
log() { echo "kube-testenv: $*" >&2; }

# ---------------------------------------------------------------- build

build() {
	command -v go >/dev/null || die "Go is required"
	mkdir -p "$BIN"
	# One build at a time per cache (parallel test packages may all ask).
	exec 9>"$BIN/.build.lock"
	flock 9

	local t0=$SECONDS
	local tmp
	tmp=$(mktemp -d "$BIN/.tmp.XXXXXX")
	trap 'rm -rf "$tmp"' RETURN

	# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl: one `go build`
	# (shared action graph, both cores busy), each installed atomically.
	local -a pkgs=()
	local b only=${1-}
	[[ -z $only || $only == etcd ]] || die "build: unknown part $only (etcd, or nothing for all)"
	for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
		[[ -z $only ]] || break
		[[ -x $BIN/$b ]] || pkgs+=("k8s.io/kubernetes/cmd/$b")
	done
	if ((${#pkgs[@]})); then
		log "building ${pkgs[*]##*/} $KUBE_VERSION (a cold build takes ~9 min on 2 cores)"
		local ld="-s -w"
		local v
		for v in client-go/pkg/version component-base/version; do
			ld+=" -X k8s.io/$v.gitVersion=$KUBE_VERSION -X k8s.io/$v.gitMajor=$KUBE_MAJOR"
			ld+=" -X k8s.io/$v.gitMinor=$KUBE_MINOR -X k8s.io/$v.gitTreeState=clean"
		done
		(cd "$ROOT/tools/kubeenv" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$tmp/" "${pkgs[@]}")
		for b in "${pkgs[@]##*/}"; do mv -f "$tmp/$b" "$BIN/$b"; done
	fi

	if [[ ! -x $BIN/etcd ]]; then
		log "building etcd $ETCD_VERSION"
		(cd "$ROOT/tools/kubeenv/etcd" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
		mv -f "$tmp/etcd" "$BIN/etcd"
	fi

	if [[ -z $only && ! -x $BIN/kwok ]]; then
		log "installing kwok $KWOK_VERSION"
		(cd "$tmp" && GOBIN=$tmp CGO_ENABLED=0 go install -trimpath "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
		mv -f "$tmp/kwok" "$BIN/kwok"
	fi

	log "binaries in $BIN ($((SECONDS - t0)) s)"
	echo "$BIN"
}

# ---------------------------------------------------------------- start

# PORT=<a loopback TCP port no socket uses now>, outside the kernel's
# ephemeral range (outgoing connections take theirs from it, and a port one
# of them holds cannot be bound), and not handed out already in this run.
declare -A USED_PORTS=()
PORT=
free_port() {
	if ((${#USED_PORTS[@]} == 0)); then
		local sl local_addr rest
		while read -r sl local_addr rest; do
			[[ $local_addr == *:* ]] && USED_PORTS[$((16#${local_addr##*:}))]=1
		done < <(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null)
	fi
	local eph_lo=32768 eph_hi=60999 lo hi
	read -r eph_lo eph_hi </proc/sys/net/ipv4/ip_local_port_range || true
	if ((eph_lo - 10000 >= 4000)); then lo=10000 hi=$eph_lo; else lo=$((eph_hi + 1)) hi=65536; fi
	local i
	for ((i = 0; i < 1000; i++)); do
		PORT=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo)))
		[[ -n ${USED_PORTS[$PORT]-} ]] && continue
		USED_PORTS[$PORT]=1
		return
	done
	die "no free port found in $lo-$((hi - 1))"
}

# KWOK_DIR=<kwok's module in the module cache>: its stages and CRDs are read
# from there at set-up time, not copied into the repository.
KWOK_DIR=
kwok_dir() {
	[[ -n $KWOK_DIR ]] && return
	KWOK_DIR=$(cd / && GOFLAGS= go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -n $KWOK_DIR && -d $KWOK_DIR/kustomize/stage && -d $KWOK_DIR/kustomize/crd/bases ]] ||
		die "kwok $KWOK_VERSION stages and CRDs not found in the module cache"
}

# kwok's lifecycle stages, read from kwok's module in the module cache.
kwok_stages() {
	kwok_dir
	local dir=$KWOK_DIR
	local f first=1
	for f in "$dir"/kustomize/stage/node/fast/*.yaml "$dir"/kustomize/stage/node/heartbeat-with-lease/*.yaml \
		"$dir"/kustomize/stage/pod/fast/*.yaml; do
		[[ $(basename "$f") == kustomization.yaml ]] && continue
		((first)) || echo "---"
		first=0
		if [[ $(basename "$f") == pod-ready.yaml ]]; then
			# A stand-in for a bad release: a pod with a container whose
			# image contains "never-ready" is never made Running and Ready.
			awk '{ print } /^    matchExpressions:$/ && !done { print "    - key: '"'"'.spec.containers.[] | select( .image | contains(\"never-ready\") ) | .image'"'"'"; print "      operator: '"'"'DoesNotExist'"'"'"; done = 1 }' "$f"
		else
			cat "$f"
		fi
	done
	# ferry's own stage: the kubelet's part of an in-place image change (a
	# DaemonSet with update: in-place). A running pod whose container's
	# image in its spec is not the one its status shows has that container
	# restarted: its status takes the new image, a new container ID, one
	# restart (the kubelet counts it; kwok's pods start with none) and Ready
	# again now. An image containing "never-ready" is never started, as in
	# pod-ready: the old container keeps running.
	cat <<'STAGE'
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-container-image-changed
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.spec.containers.[] as $c | .status.containerStatuses.[] | select( .name == $c.name and .image != $c.image ) | .name'
      operator: 'Exists'
    - key: '.spec.containers.[] | select( .image | contains("never-ready") ) | .image'
      operator: 'DoesNotExist'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        containerID: {{ printf "kwok://%v" $now | Quote }}
        ready: true
        restartCount: 1
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
STAGE
}

# Output for kwok's pods, which run no containers: kwok's kubelet-like server
# (--server-address, the port each node's daemonEndpoints names) answers the
# API server's pods/log requests from files named by Logs (one pod) and
# ClusterLogs (every pod) objects, in the CRI log format. A default
# ClusterLogs gives every pod two stand-in lines of current and of previous
# output; a test gives a pod its own with a Logs object (kubetest's
# Env.SetPodLogs). kwok watches both kinds (--enable-crds), so their CRDs,
# from kwok's module, are applied before kwok starts.
kwok_logs() {
	kwok_dir
	"$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" apply \
		-f "$KWOK_DIR/kustomize/crd/bases/kwok.x-k8s.io_logs.yaml" \
		-f "$KWOK_DIR/kustomize/crd/bases/kwok.x-k8s.io_clusterlogs.yaml" >/dev/null
	"$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" wait --for=condition=Established --timeout=60s \
		crd/logs.kwok.x-k8s.io crd/clusterlogs.kwok.x-k8s.io >/dev/null
	mkdir -p "$DIR/kwok-logs"
	local ts which
	ts=$(date -u +%Y-%m-%dT%H:%M:%S.000000000Z)
	for which in current previous; do
		printf '%s stdout F %s\n' "$ts" "kwok stand-in output (scripts/kube-testenv.sh): kwok's pods run no containers" \
			"$ts" "kwok stand-in output: $which instance" >"$DIR/kwok-logs/$which.log"
	done
	"$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" apply -f - >/dev/null <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: kube-testenv-default
spec:
  logs:
  - logsFile: $DIR/kwok-logs/current.log
    previousLogsFile: $DIR/kwok-logs/previous.log
EOF
}

spawn() { # spawn NAME CMD... : runs in the background, own session, log in DIR/NAME.log
	local name=$1
	shift
	setsid "$@" >"$DIR/$name.log" 2>&1 </dev/null &
	echo "$name $!" >>"$DIR/pids"
}

wait_for() { # wait_for WHAT DEADLINE CMD...
	local what=$1 deadline=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			log "timed out waiting for $what; logs in $DIR"
			stop_dir
			exit 1
		fi
		check_alive
		sleep 0.2
	done
}

check_alive() {
	local name pid
	while read -r name pid; do
		[[ $name == watchdog ]] && continue
		if ! kill -0 "$pid" 2>/dev/null; then
			log "$name exited early; last lines of $DIR/$name.log:"
			tail -n 20 "$DIR/$name.log" >&2 || true
			stop_dir
			exit 3
		fi
	done <"$DIR/pids"
}

start() {
	[[ -n ${DIR-} ]] || die "usage: $0 start DIR"
	for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do
		[[ -x $BIN/$b ]] || die "$BIN/$b missing: run '$0 build' first"
	done
	command -v openssl >/dev/null || die "openssl is required (service account key)"
	command -v curl >/dev/null || die "curl is required (readiness check)"
	mkdir -p "$DIR"
	DIR=$(cd "$DIR" && pwd)
	[[ ! -s $DIR/pids ]] || die "$DIR/pids exists: already started? ('$0 stop $DIR' first)"
	umask 077
	# A component that exits early (most likely: a port taken between the
	# pick and the bind by someone else) makes start try again, with new ports.
	local attempt rc
	for attempt in 1 2 3; do
		set +e
		(
			set -e
			start_once
		)
		rc=$?
		set -e
		((rc == 3 && attempt < 3)) || return "$rc"
		log "attempt $attempt failed; trying again with other ports"
		rm -rf "$DIR/etcd-data" "$DIR/certs"
	done
}

start_once() {
	: >"$DIR/pids"
	# If the caller dies without stopping us (a test binary killed at its
	# timeout), a watchdog stops the control plane.
	if [[ -n ${FERRY_KUBE_WATCH_PID-} ]]; then
		spawn watchdog bash "$0" watch "$DIR" "$FERRY_KUBE_WATCH_PID"
	fi
	local t0=$SECONDS deadline=$((SECONDS + READY_TIMEOUT))

	local etcd_port etcd_peer api_port kcm_port sched_port kwok_port
	free_port && etcd_port=$PORT
	free_port && etcd_peer=$PORT
	free_port && api_port=$PORT
	free_port && kcm_port=$PORT
	free_port && sched_port=$PORT
	free_port && kwok_port=$PORT

	# Credentials: one admin token (system:masters), a service account key pair.
	local token
	token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	echo "$token,ferry-admin,ferry-admin,system:masters" >"$DIR/tokens.csv"
	# Two operators with no rights of their own (tests grant them some):
	# what a test needs to tell one authenticated user from another.
	local user user_token
	declare -A user_tokens=()
	for user in alice bob; do
		user_token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
		user_tokens[$user]=$user_token
		echo "$user_token,$user,$user,ferry-operators" >>"$DIR/tokens.csv"
	done
	chmod 0600 "$DIR/tokens.csv"
	openssl genrsa -out "$DIR/sa.key" 2048 2>/dev/null
	openssl rsa -in "$DIR/sa.key" -pubout -out "$DIR/sa.pub" 2>/dev/null
	mkdir -p "$DIR/certs" "$DIR/etcd-data"

	spawn etcd "$BIN/etcd" --name=ferry --data-dir="$DIR/etcd-data" \
		--listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
		--listen-peer-urls="http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer" \
		--initial-cluster="ferry=http://127.0.0.1:$etcd_peer" --listen-metrics-urls="" \
		--unsafe-no-fsync --quota-backend-bytes=4294967296 --log-level=warn

	wait_for etcd "$deadline" curl -fsS "http://127.0.0.1:$etcd_port/health"

	# Without the node lifecycle controller and the admission plugin that
	# taints new nodes not-ready, kwok's nodes and their pods are Ready at
	# once and stay so. With it, a loaded machine (a CI run beside other
	# work) delays kwok's node leases past the grace period: the controller
	# marks a node NotReady and every pod on it not Ready, which the tests
	# would count as pods ferry took down. No test is about node lifecycle.
	# FERRY_KUBE_SCALE=1 (a thousand fake nodes) raises the API server's
	# limits on requests in flight too.
	local controllers='*,-nodeipam,-nodelifecycle' apiserver_flags=(--disable-admission-plugins=TaintNodesByCondition)
	if [[ ${FERRY_KUBE_SCALE:-} == 1 ]]; then
		apiserver_flags+=(--max-requests-inflight=2000 --max-mutating-requests-inflight=1000)
	fi
	# FERRY_KUBE_KCM_QPS=N gives the controller manager's client N
	# requests a second (burst N) instead of its default 20 (burst 30),
	# as Kubernetes' own scalability jobs run it for large clusters.
	local kcm_flags=()
	if [[ -n ${FERRY_KUBE_KCM_QPS:-} ]]; then
		[[ $FERRY_KUBE_KCM_QPS =~ ^[1-9][0-9]{0,4}$ ]] || die "FERRY_KUBE_KCM_QPS=$FERRY_KUBE_KCM_QPS: want a whole number of requests a second, 1 to 99999"
		kcm_flags+=(--kube-api-qps="$FERRY_KUBE_KCM_QPS" --kube-api-burst="$FERRY_KUBE_KCM_QPS")
	fi
	spawn kube-apiserver "$BIN/kube-apiserver" \
		--etcd-servers="http://127.0.0.1:$etcd_port" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
		--cert-dir="$DIR/certs" \
		--token-auth-file="$DIR/tokens.csv" --authorization-mode=RBAC \
		--service-account-key-file="$DIR/sa.pub" --service-account-signing-key-file="$DIR/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-cluster-ip-range=10.96.0.0/16 \
		--allow-privileged=true \
		--endpoint-reconciler-type=none \
		"${apiserver_flags[@]}"

	# The serving certificate the apiserver generated (its CA is in the same file).
	wait_for "kube-apiserver certificate" "$deadline" test -s "$DIR/certs/apiserver.crt"
	local ca
	ca=$(base64 -w0 <"$DIR/certs/apiserver.crt")
	cat >"$DIR/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ferry
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $ca
users:
- name: ferry-admin
  user:
    token: $token
contexts:
- name: ferry
  context:
    cluster: ferry
    user: ferry-admin
current-context: ferry
EOF
	chmod 0600 "$DIR/kubeconfig"
	for user in alice bob; do
		sed -e "s/^    token: .*/    token: ${user_tokens[$user]}/" -e "s/ferry-admin/$user/" "$DIR/kubeconfig" >"$DIR/kubeconfig-$user"
		chmod 0600 "$DIR/kubeconfig-$user"
	done

	wait_for "kube-apiserver /readyz" "$deadline" \
		curl -fsS --cacert "$DIR/certs/apiserver.crt" -H "Authorization: Bearer $token" \
		"https://127.0.0.1:$api_port/readyz"

	spawn kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig="$DIR/kubeconfig" --authentication-kubeconfig="$DIR/kubeconfig" \
		--authorization-kubeconfig="$DIR/kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$kcm_port" --cert-dir="$DIR/certs" \
		--service-account-private-key-file="$DIR/sa.key" --use-service-account-credentials=false \
		--controllers="$controllers" --leader-elect=false "${kcm_flags[@]}"
	echo "$kcm_port" >"$DIR/kcm-port"

	spawn kube-scheduler "$BIN/kube-scheduler" \
		--kubeconfig="$DIR/kubeconfig" --authentication-kubeconfig="$DIR/kubeconfig" \
		--authorization-kubeconfig="$DIR/kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$sched_port" --cert-dir="$DIR/certs" \
		--leader-elect=false

	kwok_stages >"$DIR/kwok.yaml"
	kwok_logs
	mkdir -p "$DIR/kwok-home" # so that a ~/.kwok/kwok.yaml is not read
	spawn kwok env KWOK_WORKDIR="$DIR/kwok-home" "$BIN/kwok" --kubeconfig="$DIR/kubeconfig" --config="$DIR/kwok.yaml" \
		--enable-crds=Logs,ClusterLogs \
		--manage-all-nodes=false \
		--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
		--node-ip=127.0.0.1 --node-port="$kwok_port" --server-address="127.0.0.1:$kwok_port" \
		--cidr=10.0.0.1/16 \
		--node-lease-duration-seconds=40

	# Ready: the apiserver says so and the controllers are up (the default
	# service account appears once the controller-manager runs).
	wait_for "kube-apiserver /readyz" "$deadline" \
		curl -fsS --cacert "$DIR/certs/apiserver.crt" -H "Authorization: Bearer $token" \
		"https://127.0.0.1:$api_port/readyz"
	wait_for "the default service account" "$deadline" \
		"$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" get serviceaccount default -n default
	check_alive
	log "ready in $((SECONDS - t0)) s: KUBECONFIG=$DIR/kubeconfig"
}

# ---------------------------------------------------------------- stop

stop_dir() {
	[[ -f $DIR/pids ]] || return 0
	local name pid
	local -a pids=() etcd=()
	while read -r name pid; do
		[[ $pid == "$$" ]] && continue # a watchdog does not stop itself
		if [[ $name == etcd ]]; then etcd+=("$pid"); else pids+=("$pid"); fi
	done <"$DIR/pids"
	# The state is throw-away: a short grace period, then SIGKILL. etcd last,
	# so that the others do not hang on it. Each was started with setsid, so
	# its pid is also its process group.
	term_wait 1 "${pids[@]}"
	term_wait 2 "${etcd[@]}"
	rm -f "$DIR/pids"
}

term_wait() { # term_wait SECONDS PID...
	local grace=$1 pid
	shift
	for pid; do kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true; done
	local deadline=$((SECONDS + grace))
	for pid; do
		while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	done
}

case ${1-} in
build) build "${2-}" ;;
start)
	DIR=${2-}
	start
	;;
stop)
	DIR=${2-}
	[[ -n $DIR ]] || die "usage: $0 stop DIR"
	stop_dir
	;;
env) echo "$BIN" ;;
watch) # watch DIR PID: internal, started by start
	DIR=$2
	while kill -0 "$3" 2>/dev/null && [[ -f $DIR/pids ]]; do sleep 1; done
	stop_dir
	;;
*)
	echo "usage: $0 build | start DIR | stop DIR | env" >&2
	exit 2
	;;
esac
