#!/bin/sh
# The fabsock launcher: --help documents every option and variable, --version,
# bad options give one error line and exit 2, --env prints export lines that
# evaluate to a working preload, LD_PRELOAD is appended to (not clobbered,
# never doubled), the exit status and signals pass through (exec), options
# reach the library, and the preload really loads (the info line).
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup launcher
fsk_need_preload
L=$FSK_LAUNCHER
T=$fsk_tmp
fails=0
bad() { echo "not ok: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# ---- --help mentions every option and environment variable
timeout 10 "$L" --help >"$T/help" 2>"$T/help.err" || bad "--help exit status"
[ -s "$T/help.err" ] && bad "--help wrote to stderr"
for w in --profile --provider --rules --config --log --log-file --default \
	--spin-us --app-id --disable --env --help --version \
	FABSOCK_PROFILE FABSOCK_PROVIDERS FABSOCK_RULES FABSOCK_CONFIG FABSOCK_LOG \
	FABSOCK_LOG_FILE FABSOCK_DEFAULT FABSOCK_SPIN_US FABSOCK_APPLICATION_ID \
	FABSOCK_DISABLE LD_PRELOAD FI_PROVIDER_PATH FABSOCK_LIB \
	latency throughput balanced error warn info debug accel kernel \
	tcp_server tcp_client udp_receiver udp_sender udp_connect; do
	grep -q -- "$w" "$T/help" || bad "--help does not mention $w"
done
ok "--help ($(wc -l <"$T/help") lines)"
v=$(timeout 10 "$L" --version) || bad "--version exit status"
echo "$v" | grep -Eq '^fabsock \(libfabsock\) [0-9]+\.[0-9]+\.[0-9]+$' ||
	bad "--version printed '$v'"

# ---- usage errors: one line on stderr, nothing on stdout, exit 2
usage_error() {
	timeout 10 "$L" "$@" >"$T/u.out" 2>"$T/u.err"
	rc=$?
	[ $rc = 2 ] || bad "'$*': exit $rc, want 2"
	[ -s "$T/u.out" ] && bad "'$*': wrote to stdout"
	[ "$(wc -l <"$T/u.err")" = 1 ] || bad "'$*': want one stderr line, got: $(cat "$T/u.err")"
	grep -q '^fabsock: ' "$T/u.err" || bad "'$*': error line lacks the 'fabsock: ' prefix"
}
usage_error --bogus -- true
usage_error -x true
usage_error --profile
usage_error --profile fast -- true
usage_error --log loud -- true
usage_error --default maybe -- true
usage_error --spin-us 12x -- true
usage_error --env=1
usage_error --help=yes
usage_error --env -- true
usage_error
usage_error --log info
ok "usage errors exit 2 with one line"

# ---- the command runs with exec: exit status, arguments, stdin pass through
timeout 10 "$L" -- sh -c 'exit 42'
rc=$?
[ $rc = 42 ] || bad "exit status: got $rc, want 42"
out=$(timeout 10 "$L" -- printf '%s|' 'a b' '' "c'd" '$HOME')
[ "$out" = "a b||c'd|\$HOME|" ] || bad "arguments mangled: $out"
out=$(echo piped | timeout 10 "$L" cat)
[ "$out" = piped ] || bad "stdin or command without -- : got '$out'"
# exec: the launcher's pid becomes the command's pid.
out=$("$L" -- sh -c 'echo $$' & echo "launcher=$!"; wait)
cpid=$(echo "$out" | grep -v launcher=)
lpid=$(echo "$out" | sed -n 's/^launcher=//p')
[ -n "$cpid" ] && [ "$cpid" = "$lpid" ] || bad "not exec'd: launcher pid $lpid, command pid $cpid"
# A signal reaches the command and its death by that signal is reported.
timeout -s TERM 1 "$L" -- sleep 30
rc=$?
[ $rc = 124 ] || bad "signal: timeout reported $rc, want 124"
timeout 10 "$L" -- sh -c 'kill -USR1 $$'
rc=$?
[ $rc = 138 ] || bad "death by SIGUSR1: exit $rc, want 138"
timeout 10 "$L" -- /nonexistent/program 2>"$T/nx.err"
rc=$?
[ $rc = 127 ] || bad "missing command: exit $rc, want 127"
ok "exec, status, arguments, signals"

# ---- the preload really loads, options reach the library
timeout 10 "$L" --log info --log-file "$T/info.log" -p latency --spin-us 7 \
	--provider tcp,shm --default kernel -- true || bad "launch of true"
fsk_assert_loaded "$T/info.log" "true under the launcher"
grep -q 'profile latency' "$T/info.log" || bad "--profile not seen by the library: $(cat "$T/info.log")"
grep -q 'spin 7 us' "$T/info.log" || bad "--spin-us not seen by the library"
grep -q 'providers tcp,shm' "$T/info.log" || bad "--provider not seen by the library"
grep -q 'default kernel' "$T/info.log" || bad "--default not seen by the library"
# Logs never go to stdout: with --log debug and no log file, stdout is the
# program's alone.
out=$(timeout 10 "$L" --log debug -- sh -c 'echo only-this' 2>"$T/dbg.err")
[ "$out" = only-this ] || bad "library wrote to stdout: '$out'"
grep -q 'info: libfabsock' "$T/dbg.err" || bad "--log debug: no log on stderr"
ok "preload loaded, options passed"

# ---- LD_PRELOAD: appended, never clobbered, never doubled
fake="$T/libnothing.so"
: >"$T/empty.c"
if ${CC:-cc} -shared -fPIC -o "$fake" "$T/empty.c" 2>/dev/null; then
	pre=$(LD_PRELOAD="$fake" timeout 10 "$L" -- sh -c 'echo "$LD_PRELOAD"')
	case $pre in
	"$fake":*libfabsock.so) ;;
	*"$fake"*libfabsock.so) ;;
	*) bad "existing LD_PRELOAD not kept before libfabsock: $pre" ;;
	esac
	# Nested launch: still one libfabsock.
	pre=$(LD_PRELOAD="$fake" timeout 10 "$L" -- "$L" -- sh -c 'echo "$LD_PRELOAD"')
	n=$(echo "$pre" | tr ': ' '\n\n' | grep -c 'libfabsock\.so$')
	[ "$n" = 1 ] || bad "nested launcher: $n copies of libfabsock in $pre"
	echo "$pre" | grep -q "$fake" || bad "nested launcher dropped $fake"
else
	bad "cannot build a dummy shared object with ${CC:-cc}"
fi
ok "LD_PRELOAD composition"

# ---- the launcher's helpers never run preloaded: with libfabsock already
# in LD_PRELOAD (a nested launch), only the launcher's shell and the command
# it becomes load it (two 'active' lines, one pid: exec keeps it), and
# --env runs nothing preloaded at all. (env, not the shell, sets LD_PRELOAD
# so that timeout itself runs without it.)
timeout 10 env LD_PRELOAD="$FSK_LIBRARY" FABSOCK_LOG=info FABSOCK_LOG_FILE="$T/nested.log" \
	"$L" -- true || bad "nested launch failed"
n=$(grep -c 'info: libfabsock .* active' "$T/nested.log")
p=$(sed -n 's/^fabsock\[\([0-9]*\)\]: info: libfabsock .* active.*/\1/p' "$T/nested.log" | sort -u | wc -l)
[ "$n" = 2 ] && [ "$p" = 1 ] ||
	bad "nested launch: $n loads in $p processes, want 2 in 1 (shell, then the command): $(cat "$T/nested.log")"
timeout 10 env LD_PRELOAD="$FSK_LIBRARY" "$L" --env --log info >/dev/null 2>"$T/envq.err"
[ -s "$T/envq.err" ] && bad "--env ran preloaded helpers: $(cat "$T/envq.err")"
ok "helpers run without the preload"

# ---- --env: export lines that evaluate (in a clean sh) to the same setup
timeout 10 "$L" --env --log info --log-file "$T/env.log" --rules "use kernel tcp_client *:22; use accel tcp_server *:*" \
	--app-id "it's" >"$T/env" || bad "--env exit status"
grep -v '^export [A-Z_][A-Z0-9_]*=' "$T/env" && bad "--env printed a non-export line"
for v in LD_PRELOAD FI_PROVIDER_PATH FABSOCK_LOG FABSOCK_LOG_FILE FABSOCK_RULES FABSOCK_APPLICATION_ID; do
	grep -q "^export $v=" "$T/env" || bad "--env lacks $v"
done
got=$(env -i PATH="$PATH" sh -c '. "$1" && printf "%s\n" "$FABSOCK_RULES" "$FABSOCK_APPLICATION_ID"' sh "$T/env")
want=$(printf '%s\n' "use kernel tcp_client *:22; use accel tcp_server *:*" "it's")
[ "$got" = "$want" ] || bad "--env quoting: got '$got'"
# Relative --log-file and --config names are made absolute.
(cd "$T" && timeout 10 "$L" --env --log-file rel.log --config sub/r.conf) >"$T/env3"
grep -qx "export FABSOCK_LOG_FILE='$T/rel.log'" "$T/env3" || bad "--log-file not made absolute: $(cat "$T/env3")"
grep -qx "export FABSOCK_CONFIG='$T/sub/r.conf'" "$T/env3" || bad "--config not made absolute"
# Inherited FABSOCK_* variables are printed too; options win over them.
FABSOCK_SPIN_US=33 FABSOCK_PROFILE=latency timeout 10 "$L" --env -p throughput >"$T/env2"
grep -qx "export FABSOCK_SPIN_US='33'" "$T/env2" || bad "--env dropped inherited FABSOCK_SPIN_US"
grep -qx "export FABSOCK_PROFILE='throughput'" "$T/env2" || bad "--env: option did not win over FABSOCK_PROFILE"
[ "$(grep -c '^export FABSOCK_PROFILE=' "$T/env2")" = 1 ] || bad "--env printed FABSOCK_PROFILE twice"
# eval it and run a program: the library is loaded from the printed path.
env -i PATH="$PATH" sh -c 'eval "$(cat "$1")" && exec true' sh "$T/env" ||
	bad "program under --env failed"
fsk_assert_loaded "$T/env.log" "a program run with --env's exports"
lib=$(sed -n "s/^export LD_PRELOAD='\(.*\)'$/\1/p" "$T/env" | tr ':' '\n' | tail -n 1)
[ "$lib" = "$(cd "$top_builddir/src/.libs" && pwd -P)/libfabsock.so" ] ||
	bad "--env in a build tree preloads '$lib', not the build tree's library"
ok "--env"

# ---- outside a build tree: the configured libdir, or FABSOCK_LIB
mkdir "$T/bin"
cp "$L" "$T/bin/fabsock"
grep -q "^fsk_libdir='/" "$T/bin/fabsock" || bad "launcher has no absolute configured libdir"
FABSOCK_LIB=/nonexistent/libfabsock.so timeout 10 "$T/bin/fabsock" -- true 2>"$T/nolib.err"
rc=$?
[ $rc = 127 ] || bad "missing library: exit $rc, want 127"
[ "$(wc -l <"$T/nolib.err")" = 1 ] || bad "missing library: want one error line: $(cat "$T/nolib.err")"
FABSOCK_LIB="$FSK_LIBRARY" timeout 10 "$T/bin/fabsock" --log info --log-file "$T/reloc.log" -- true ||
	bad "relocated launcher with FABSOCK_LIB failed"
fsk_assert_loaded "$T/reloc.log" "a program under a relocated launcher"
ok "relocated launcher"
# A symlink to the build tree's launcher still finds the build tree.
mkdir "$T/link"
ln -s "$L" "$T/link/fabsock"
pre=$(timeout 10 "$T/link/fabsock" --env | sed -n "s/^export LD_PRELOAD='\(.*\)'$/\1/p" | tr ':' '\n' | tail -n 1)
[ "$pre" = "$(cd "$top_builddir/src/.libs" && pwd -P)/libfabsock.so" ] ||
	bad "symlinked launcher preloads '$pre', not the build tree's library"
ok "symlinked launcher"

# ---- a sanitizer build: the runtimes come first, found by ldd
if [ -n "$(fsk_asan_runtime)" ]; then
	pre=$(timeout 10 "$L" --env | sed -n "s/^export LD_PRELOAD='\(.*\)'$/\1/p")
	case $pre in
	*libasan.so*libfabsock.so) ;;
	*) bad "sanitizer build: LD_PRELOAD lacks libasan first: $pre" ;;
	esac
fi

[ $fails = 0 ] || fsk_fail "$fails launcher checks failed"
echo "PASS: launcher"
