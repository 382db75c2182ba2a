#!/bin/sh
# kubehost.sh OP [ARG...]: the hosts' own commands of StarlingX's
# Kubernetes upgrade, as ferry runs them (an argv, never a shell line),
# for the repository's test control plane, where kwok stands in for the
# kubelets: a node's "kubelet" is its reported kubelet version, which
# this script sets as a host's `kubeadm upgrade node` and kubelet
# restart would. On a real StarlingX host, OP kubelet would be sysinv's
# kube-host-upgrade kubelet (its puppet manifest), OP networking its
# upgrade-networking playbook. kubectl and $KUBECONFIG come from ferry's
# environment.
#
#   init VERSION              every node reports kubelet vVERSION
#   kubelet                   FERRY_NODE's kubelet upgraded to
#                             FERRY_VERSION (ferry's NodePool runs it
#                             once the node is cordoned and drained); a
#                             file state/fail/NODE makes it fail with
#                             the file's words (a failure to inject,
#                             then to fix)
#   networking VERSION        the networking plugin (calico-node) on the
#                             image that goes with Kubernetes VERSION
#   app-supports APP VERSION  the application's own answer: does it run
#                             on Kubernetes VERSION
#   apps lock|unlock          application changes refused while the
#                             upgrade runs (state/apps.locked), and
#                             allowed again
#
# Each kubelet and networking command is logged to state/kubehost.log.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
state=${KUBEHOST_STATE:-$here/state}
mkdir -p "$state"
op=${1:-}
log() { echo "$(date -u +%H:%M:%S) $*" >>"$state/kubehost.log"; }

kubelet_version() {
	kubectl patch node "$1" --subresource=status --type=merge \
		-p "{\"status\":{\"nodeInfo\":{\"kubeletVersion\":\"v$2\"}}}" >/dev/null
}

case $op in
init)
	for n in $(kubectl get nodes -l personality -o name); do
		kubelet_version "${n#node/}" "$2"
	done ;;
kubelet)
	node=${FERRY_NODE:?} version=${FERRY_VERSION:?}
	if [ -f "$state/fail/$node" ]; then
		log "kubelet $node $version failed"
		echo "kubeadm upgrade node on $node: $(cat "$state/fail/$node")" >&2
		exit 1
	fi
	kubelet_version "$node" "$version"
	log "kubelet $node $version ok" ;;
networking)
	# The plugin's release that goes with each Kubernetes minor version.
	case $2 in
	1.37.*) calico=v3.28.2 ;;
	1.38.*) calico=v3.29.1 ;;
	*) echo "no networking release known for Kubernetes $2" >&2; exit 1 ;;
	esac
	kubectl -n kube-system set image daemonset/calico-node calico-node="registry.local/calico-node:$calico" >/dev/null
	log "networking $2 calico-node $calico"
	echo "calico-node $calico" ;;
app-supports)
	# platform-integ-apps runs on 1.37 and 1.38, not yet on 1.39.
	case $2:$3 in
	platform-integ-apps:1.37.* | platform-integ-apps:1.38.*) echo "$2 supports $3" ;;
	*) echo "$2 does not support Kubernetes $3" >&2; exit 1 ;;
	esac ;;
apps)
	case $2 in
	lock) : >"$state/apps.locked" ;;
	unlock) rm -f "$state/apps.locked" ;;
	esac ;;
*)
	echo "usage: kubehost.sh init VERSION | kubelet | networking VERSION | app-supports APP VERSION | apps lock|unlock" >&2
	exit 2 ;;
esac
