# ferry's helper on a host reached over SSH: a fixed script, sent with
# every command as `sh -c SCRIPT ferry-ssh OP ARG...`, each argument
# quoted by the driver. Nothing of the description is ever part of the
# script: names, versions, argv and environment arrive as arguments.
#
# DIR is ferry's directory on the host:
#   DIR/artifacts/SHA256       an artifact, copied and checked (0755)
#   DIR/artifacts/SHA256.part  a copy under way (resumed from its size)
#   DIR/members/NAME/          the member's working directory, and:
#     pid starttime            its process (and the kernel's start time
#                              of that pid, so a reused pid is not it)
#     version sha256 spec since  what ferry started it on, and when
#     exit stopped             how its last instance ended
#     output.log output.log.1  the output of this instance, the one before
#   DIR/hosts/HOST/            where a host's commands run (FERRY_HOST), and
#     KEY/pid starttime exit output.log  a long one (bg) run in its own session
#
# Exit statuses the driver reads: 0 done; 3 (custom status) not
# running; 70 an error (said on stderr); 71 the artifact is not on the
# host; 72 its checksum is not what it must be; 73 no such output;
# 74 the partial copy is not as long as the driver thought; 75 the copy
# ended short.
set -u
umask 022
PATH=$PATH:/usr/sbin:/sbin:/usr/bin:/bin
die() { printf 'ferry-ssh: %s\n' "$*" >&2; exit 70; }
fail() { _c=$1; shift; printf 'ferry-ssh: %s\n' "$*" >&2; exit "$_c"; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found on this host ($2)"; }

# The status of members is asked at every tick: what it runs uses the
# shell's builtins only (read, set, printf), no process per member.

# procstart PID sets _st to the kernel's start time of the process
# (field 22 of /proc/PID/stat), or fails if no such live process.
procstart() {
	_st=
	[ -r "/proc/$1/stat" ] || return 1
	IFS= read -r _l <"/proc/$1/stat" || return 1
	_r=${_l##*) }
	set -f
	# shellcheck disable=SC2086
	set -- $_r
	set +f
	[ "$#" -ge 20 ] || return 1
	case $1 in Z | X | x) return 1 ;; esac
	_st=${20}
}

# first FILE sets _v to the file's first line ("" without one).
first() {
	_v=
	if [ -s "$1" ]; then IFS= read -r _v <"$1" || true; fi
}

# running MD: the member's process, as recorded, runs (_p its pid).
running() {
	first "$1/pid"
	_p=$_v
	first "$1/starttime"
	[ -n "$_p" ] && [ -n "$_v" ] && procstart "$_p" && [ "$_st" = "$_v" ]
}

# adopted PIDFILE: a live process is named by the pid file (a member
# ferry did not start); _a is its pid.
adopted() {
	_a=
	[ -n "$1" ] || return 1
	first "$1"
	_a=${_v%%[!0-9]*}
	[ -n "$_a" ] && procstart "$_a"
}

# report MD NAME ADOPT prints the member's status line:
# member<TAB>NAME<TAB>STATE<TAB>PID<TAB>SINCE<TAB>VERSION<TAB>SHA256<TAB>DETAIL
report() {
	_md=$1
	first "$_md/version"
	_ver=$_v
	first "$_md/sha256"
	_sha=$_v
	first "$_md/since"
	_t=$_v
	if running "$_md"; then
		printf 'member\t%s\trunning\t%s\t%s\t%s\t%s\t-\n' "$2" "$_p" "${_t:--}" "${_ver:--}" "${_sha:--}"
		return
	fi
	if [ ! -s "$_md/pid" ] && adopted "$3"; then
		printf 'member\t%s\tadopted\t%s\t-\t-\t-\tfound by its pid file\n' "$2" "$_a"
		return
	fi
	if [ -z "$_ver" ]; then
		printf 'member\t%s\tnone\t0\t-\t-\t-\tnever started by ferry\n' "$2"
		return
	fi
	_d="not running"
	if [ -e "$_md/stopped" ]; then
		_d="stopped by ferry"
	else
		first "$_md/exit"
		case $_v in
		'') ;;
		*[!0-9]*) _d="exited" ;;
		*) if [ "$_v" -gt 128 ]; then _d="killed by signal $((_v - 128))"; else _d="exited with status $_v"; fi ;;
		esac
	fi
	printf 'member\t%s\tdown\t0\t%s\t%s\t%s\t%s\n' "$2" "${_t:--}" "$_ver" "${_sha:--}" "$_d"
}

lock() {
	need flock "util-linux"
	exec 9>"$1"
	flock -w 120 9 || die "could not lock $1 within 120 s"
}

size() { if [ -e "$1" ]; then wc -c <"$1" | tr -d ' '; else echo 0; fi; }

sum() { _x=$(sha256sum <"$1") || return 1; printf '%s\n' "${_x%% *}"; }

# stopit MD TIMEOUT_MS SIGNAL PID: the signal, then SIGKILL after the
# timeout, until the process is gone.
stopit() {
	kill -s "$3" "$4" 2>/dev/null || true
	_i=0
	_n=$(($2 / 50))
	while procstart "$4"; do
		if [ "$_i" -ge "$_n" ]; then
			kill -s KILL "$4" 2>/dev/null || true
			_n=$((_n + 200))
		fi
		sleep 0.05
		_i=$((_i + 1))
		[ "$_i" -lt $((_n + 400)) ] || die "process $4 does not stop"
	done
}

# reaped MD waits (a second at most) for the wrapper of a process that
# is gone to write its exit status: a later instance's must not be
# overwritten by it.
reaped() {
	_i=0
	while [ ! -e "$1/exit" ] && [ "$_i" -lt 40 ]; do
		sleep 0.025
		_i=$((_i + 1))
	done
}

# detach MD WHAT PROGRAM ARG... runs the program in a session of its own
# (it outlives the connection and ferry), its output appended to
# MD/output.log: setsid -f, forked in the foreground (an asynchronous list
# would start it with SIGINT and SIGQUIT ignored); a wrapper records the
# pid before the exec, then the exit status. It returns once the pid and
# its kernel start time are recorded.
detach() {
	_dm=$1 _what=$2
	shift 2
	setsid -f sh -c 'm=$1; shift
sh -c '\''printf "%s\n" "$$" >"$0/pid.tmp" && mv -f "$0/pid.tmp" "$0/pid" && exec "$@"'\'' "$m" "$@"
printf "%s\n" "$?" >"$m/exit"' "ferry-$_what" "$_dm" "$@" </dev/null >>"$_dm/output.log" 2>&1 9>&-
	_i=0
	while [ ! -s "$_dm/pid" ]; do
		_i=$((_i + 1))
		[ "$_i" -le 200 ] || die "the $_what did not start within 10 s"
		sleep 0.05
	done
	first "$_dm/pid"
	if procstart "$_v"; then printf '%s\n' "$_st" >"$_dm/starttime"; fi
}

op=${1:-}
[ "$#" -gt 0 ] && shift
case $op in
status) # DIR [NAME ADOPTPIDFILE]...
	d=$1; shift
	while [ "$#" -ge 2 ]; do
		report "$d/members/$1" "$1" "$2"
		shift 2
	done
	;;
have) # DIR SHA: "have", or "part N" (the bytes of a copy under way)
	a=$1/artifacts/$2
	if [ -f "$a" ]; then echo have; else echo "part $(size "$a.part")"; fi
	;;
put) # DIR SHA OFFSET SIZE < the artifact from OFFSET
	mkdir -p "$1/artifacts" || die "cannot make $1/artifacts"
	a=$1/artifacts/$2
	lock "$a.lock"
	if [ -f "$a" ]; then cat >/dev/null; echo have; exit 0; fi
	n=$(size "$a.part")
	[ "$n" = "$3" ] || fail 74 "the partial copy has $n bytes, not $3"
	cat >>"$a.part" || die "writing $a.part"
	n=$(size "$a.part")
	[ "$n" -lt "$4" ] && fail 75 "the copy ended at $n of $4 bytes"
	[ "$n" -gt "$4" ] && { rm -f "$a.part"; die "the copy has $n bytes, more than $4: removed"; }
	got=$(sum "$a.part") || die "sha256sum not found on this host (coreutils)"
	if [ "$got" != "$2" ]; then
		rm -f "$a.part"
		fail 72 "the copy's sha256 is $got, not $2: removed"
	fi
	chmod 0755 "$a.part" && mv -f "$a.part" "$a" || die "cannot move $a.part into place"
	echo have
	;;
start) # DIR NAME VERSION SHA SPEC STOP_MS SIGNAL ADOPTPIDFILE NENV K=V... -- ARG...
	d=$1 name=$2 ver=$3 sha=$4 spec=$5 stopms=$6 sig=$7 adopt=$8 nenv=$9
	shift 9
	md=$d/members/$name
	mkdir -p "$md" || die "cannot make $md"
	lock "$md/lock"
	a=$d/artifacts/$sha
	first "$md/spec"
	had=$_v
	if running "$md" && [ "$had" = "$spec" ]; then
		report "$md" "$name" "$adopt"
		exit 0
	fi
	[ -f "$a" ] || fail 71 "artifact $sha is not on this host"
	got=$(sum "$a") || die "sha256sum not found on this host (coreutils)"
	if [ "$got" != "$sha" ]; then
		rm -f "$a"
		fail 72 "the artifact's sha256 on the host is $got, not $sha: removed"
	fi
	if running "$md"; then
		stopit "$md" "$stopms" "$sig" "$_p"
		reaped "$md"
	elif [ ! -s "$md/pid" ] && adopted "$adopt"; then
		stopit "$md" "$stopms" "$sig" "$_a"
	fi
	need setsid "util-linux"
	[ -f "$md/output.log" ] && mv -f "$md/output.log" "$md/output.log.1"
	rm -f "$md/pid" "$md/starttime" "$md/exit" "$md/stopped"
	printf '%s\n' "$ver" >"$md/version"
	printf '%s\n' "$sha" >"$md/sha256"
	printf '%s\n' "$spec" >"$md/spec"
	(
		i=0
		while [ "$i" -lt "$nenv" ]; do
			case $1 in [A-Za-z_]*=*) export "$1" ;; *) die "bad environment entry" ;; esac
			shift
			i=$((i + 1))
		done
		[ "${1:-}" = "--" ] || die "no -- before the member's arguments"
		shift
		cd "$md" || die "cannot enter $md"
		detach "$md" member "$a" "$@"
	) || exit $?
	t=$(date +%s%N)
	case $t in *N) t=$(($(date +%s) * 1000000000)) ;; esac
	printf '%s\n' "$t" >"$md/since"
	report "$md" "$name" "$adopt"
	;;
stop) # DIR NAME STOP_MS SIGNAL ADOPTPIDFILE
	md=$1/members/$2
	mkdir -p "$md" || die "cannot make $md"
	lock "$md/lock"
	if running "$md"; then
		: >"$md/stopped"
		stopit "$md" "$3" "$4" "$_p"
		reaped "$md"
	elif [ ! -s "$md/pid" ] && adopted "$5"; then
		stopit "$md" "$3" "$4" "$_a"
	fi
	report "$md" "$2" "$5"
	;;
logs) # DIR NAME PREVIOUS LINES
	f=$1/members/$2/output.log
	[ "$3" = true ] && f=$f.1
	[ -f "$f" ] || fail 73 "no output of $2${3#false}"
	tail -n "$4" "$f"
	;;
record) # DIR NAME VERSION SHA SPEC: a member started by the description's own command
	md=$1/members/$2
	mkdir -p "$md" || die "cannot make $md"
	printf '%s\n' "$3" >"$md/version"
	printf '%s\n' "$4" >"$md/sha256"
	printf '%s\n' "$5" >"$md/spec"
	rm -f "$md/stopped" "$md/exit"
	t=$(date +%s%N)
	case $t in *N) t=$(($(date +%s) * 1000000000)) ;; esac
	printf '%s\n' "$t" >"$md/since"
	;;
exec) # DIR NAME VERSION SHA VERIFY LINES PREVIOUS -- ARGV: the description's own command
	d=$1 name=$2
	md=$d/members/$name
	mkdir -p "$md" || die "cannot make $md"
	if [ "$5" = 1 ]; then
		[ -f "$d/artifacts/$4" ] || fail 71 "artifact $4 is not on this host"
		got=$(sum "$d/artifacts/$4") || die "sha256sum not found on this host (coreutils)"
		[ "$got" = "$4" ] || { rm -f "$d/artifacts/$4"; fail 72 "the artifact's sha256 on the host is $got, not $4: removed"; }
	fi
	export FERRY_MEMBER="$name" FERRY_DIR="$md" FERRY_VERSION="$3" FERRY_SHA256="$4" \
		FERRY_ARTIFACT="$d/artifacts/$4" FERRY_LINES="$6" FERRY_PREVIOUS="$7"
	shift 7
	[ "${1:-}" = "--" ] || die "no -- before the command"
	shift
	cd "$md" || die "cannot enter $md"
	exec "$@"
	;;
host) # DIR HOST KEY -- ARGV: a command of the description about a host (its lock, unlock, migration)
	# It runs beside this shell, its output in files shown when it ends,
	# so that a session closed under it (ferry gave up on it) neither
	# stops it half way by a broken pipe nor leaves it unknown: its pid is
	# in run/KEY.pid and KEY in its environment, for hostkill.
	hd=$1/hosts/$2 key=$3
	export FERRY_HOST="$2"
	shift 3
	[ "${1:-}" = "--" ] || die "no -- before the command"
	shift
	case $key in '' | *[!A-Za-z0-9._-]*) die "bad key" ;; esac
	mkdir -p "$hd/run" || die "cannot make $hd/run"
	cd "$hd" || die "cannot enter $hd"
	FERRY_HOST_COMMAND=$key "$@" </dev/null >"run/$key.out" 2>"run/$key.err" &
	c=$!
	echo "$c" >"run/$key.pid" || die "cannot write $hd/run/$key.pid"
	wait "$c"
	s=$?
	cat "run/$key.out"
	cat "run/$key.err" >&2
	rm -f "run/$key.out" "run/$key.err" "run/$key.pid"
	exit "$s"
	;;
hostkill) # DIR HOST KEY GRACE_MS: stops host command KEY, which ferry gave up
	# on (an abort), with its process group: SIGTERM, GRACE_MS to end (a
	# command that must not stop half way ignores it and ends in that
	# time), then SIGKILL; answers once it is gone: "stopped", or "none"
	# when it had ended. The group is signalled only while the command
	# still carries KEY in its environment (a pid reused since is someone
	# else's).
	hd=$1/hosts/$2 key=$3 grace=$4
	case $grace in '' | *[!0-9]*) die "bad grace" ;; esac
	case $key in '' | *[!A-Za-z0-9._-]*) die "bad key" ;; esac
	f=$hd/run/$key.pid
	if [ ! -r "$f" ]; then echo none; exit 0; fi
	read -r pid <"$f" || die "cannot read $f"
	case $pid in '' | *[!0-9]*) die "bad pid in $f" ;; esac
	if ! tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "FERRY_HOST_COMMAND=$key"; then
		echo none
		exit 0
	fi
	# The group: the third field after the command's name in its stat.
	st=$(cat "/proc/$pid/stat" 2>/dev/null) || { echo none; exit 0; }
	set -- ${st##*) }
	pg=$3
	case $pg in '' | *[!0-9]*) die "bad process group of $pid" ;; esac
	kill -s TERM -- "-$pg" 2>/dev/null || true
	i=0 n=$((grace / 100))
	while kill -0 "$pid" 2>/dev/null && [ $i -lt $n ]; do sleep 0.1; i=$((i + 1)); done
	kill -s KILL -- "-$pg" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null && [ $i -lt $((n + 20)) ]; do sleep 0.1; i=$((i + 1)); done
	echo stopped
	;;
bg) # DIR HOST KEY MODE -- ARGV: a host's long command (its reinstall) in a
	# session of its own, so that it outlives the connection (the host may
	# stop answering while it runs): MODE start starts it unless it runs or
	# ended well; MODE poll only says. Answers "running", "exit N" (and the
	# output's last lines), "gone" (no status: the host restarted under it)
	# or "none".
	hd=$1/hosts/$2 key=$3 mode=$4
	export FERRY_HOST="$2"
	shift 4
	[ "${1:-}" = "--" ] || die "no -- before the command"
	shift
	case $key in '' | *[!A-Za-z0-9._-]*) die "bad key" ;; esac
	md=$hd/$key
	mkdir -p "$md" || die "cannot make $md"
	lock "$md/lock"
	if running "$md"; then echo running; exit 0; fi
	[ -s "$md/pid" ] && reaped "$md"
	first "$md/exit"
	if [ -n "$_v" ] && { [ "$mode" = poll ] || [ "$_v" = 0 ]; }; then
		printf 'exit %s\n' "$_v"
		tail -n 20 "$md/output.log" 2>/dev/null
		exit 0
	fi
	if [ "$mode" = poll ]; then
		if [ -s "$md/pid" ]; then echo gone; else echo none; fi
		exit 0
	fi
	need setsid "util-linux"
	rm -f "$md/pid" "$md/starttime" "$md/exit" "$md/output.log"
	cd "$hd" || die "cannot enter $hd"
	detach "$md" command "$@"
	echo running
	;;
bempty) # BACKUPDIR: a backup's directory made empty (its parents made), mode 0700
	case $1 in /?*) ;; *) die "bad backup directory $1" ;; esac
	rm -rf -- "$1" && mkdir -p -- "$1" && chmod 700 -- "$1" || die "cannot make $1 empty"
	;;
bsums) # BACKUPDIR [SKIP]: sha256sum's lines of every regular file under it,
	# paths relative to it, in path order, SKIP left out; anything but a
	# file or a directory is refused
	need sha256sum coreutils
	cd -- "$1" || die "cannot enter $1"
	odd=$(find . ! -type f ! -type d -print | head -n 1)
	[ -z "$odd" ] || die "${odd#./} in $1 is neither a file nor a directory"
	find . -type f -print | LC_ALL=C sort | while IFS= read -r f; do
		f=${f#./}
		[ "$f" = "${2:-}" ] && continue
		s=$(sha256sum -- "$f") || exit 70
		printf '%s  %s\n' "${s%% *}" "$f"
	done || die "cannot checksum the files of $1"
	;;
bread) # PATH: a regular file's content
	[ -f "$1" ] && [ ! -L "$1" ] || die "$1 is not a regular file"
	cat -- "$1" || die "cannot read $1"
	;;
bprune) # DIR KEEP: the newest KEEP directories in DIR kept (by modification
	# time), the others removed and each printed
	case $2 in '' | *[!0-9]*) die "bad keep" ;; esac
	[ -d "$1" ] || exit 0
	cd -- "$1" || die "cannot enter $1"
	n=0
	for d in $(ls -1t); do
		[ -d "$d" ] && [ ! -L "$d" ] || continue
		n=$((n + 1))
		[ "$n" -le "$2" ] && continue
		rm -rf -- "$d" || die "cannot remove $1/$d"
		printf '%s/%s\n' "$1" "$d"
	done
	;;
*) die "unknown operation ${op:-(none)}" ;;
esac
