#!/bin/sh
# hostcmd.sh STATE OP [HOST] [ARG]: the hosts' own commands of the
# StarlingX-shaped example, as ferry runs them (an argv: over SSH on the
# host for lock, unlock, reinstall and migrate; on ferry's machine for
# capacity, config, activate and complete). STATE is a directory every
# host and ferry share: lb (the balancer's admin URL), coord/HOST (the
# controller's coord address), load/HOST (the load a host runs),
# data/HOST/VERSION (its platform data per load), locked/HOST, config
# (present while configuration changes are refused), commands.log.
set -eu
# A lock or unlock, once begun, runs to its end like one of sysinv's host
# actions: it ignores ferry's SIGTERM, and ferry waits for it, within
# the command's timeout.
case ${2:-} in lock | unlock) trap '' TERM ;; esac
state=$1 op=$2 host=${3:-} arg=${4:-}
lb=$(cat "$state/lb")
set -- ${SSH_CONNECTION:-none none none}
printf '%s %s %s on %s\n' "$op" "${host:--}" "${arg:--}" "$3" >>"$state/commands.log"

# A host's lock and unlock never run at once: an unlock waits for a lock
# still running (as StarlingX's sysinv takes one host action at a time).
# ferry itself stops a lock it cancels (an abort) on the host, its whole
# process group, before it makes the lock's undo (the ssh driver's
# hostkill), but a lock ignores it (above).
case $op in
lock | unlock)
	exec 9>>"$state/host-$host.lock"
	flock 9 ;;
esac

role() { curl -fsS --max-time 2 "http://$1/role" 2>/dev/null | grep -q '"role":"active"'; }

case $op in
lock)
	# The active controller cannot be locked (sysinv refuses it): ferry
	# swacts away from it first.
	if [ -f "$state/coord/$host" ] && role "$(cat "$state/coord/$host")"; then
		echo "$host is the active controller: it cannot be locked; swact first" >&2; exit 1
	fi
	curl -fsS -X POST "$lb/admin/hosts/$host/lock?timeout=10s" >/dev/null
	mkdir -p "$state/locked" && : >"$state/locked/$host" ;;
unlock)
	curl -fsS -X POST "$lb/admin/hosts/$host/unlock" >/dev/null
	rm -f "$state/locked/$host" ;;
reinstall)
	# The load installed: the host's platform data of that load begins.
	mkdir -p "$state/load" "$state/data/$host/$arg"
	echo "$arg" >"$state/load/$host" ;;
migrate)
	# The data of every other load on the host copied into this load's.
	for d in "$state/data/$host"/*; do
		[ "$(basename "$d")" = "$arg" ] && continue
		cp -R "$d/." "$state/data/$host/$arg/"
	done ;;
capacity)
	# A worker leaves rotation only if another stays (the storage hosts'
	# budget is their stage's max_unavailable: 50%).
	case $host in
	worker-*)
		curl -fsS "$lb/admin/hosts/$host/capacity?min_hosts=1" >/dev/null || {
			echo "the balancer: no worker would be left in rotation" >&2; exit 1; } ;;
	esac ;;
config)
	case $host in
	lock) : >"$state/config" ;;
	unlock) rm -f "$state/config" ;;
	change) [ ! -e "$state/config" ] || { echo "configuration changes are refused during an upgrade" >&2; exit 1; } ;;
	esac ;;
activate)
	for f in "$state"/load/*; do
		[ "$(cat "$f")" = "$host" ] || { echo "$(basename "$f") runs $(cat "$f"), not $host" >&2; exit 1; }
	done
	echo "$host" >"$state/activated" ;;
complete)
	# The previous load's data removed from every host.
	for d in "$state"/data/*/*; do
		[ "$(basename "$d")" = "$host" ] || rm -rf "$d"
	done ;;
*) echo "hostcmd.sh: unknown operation $op" >&2; exit 2 ;;
esac
