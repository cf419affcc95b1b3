#!/bin/sh
# The Debian packages, end to end (make check-deb; ./quickstart check): build
# them with dpkg-buildpackage in a copy of the source tree, lintian must
# report no error, install them with apt-get, then, with the installed files
# only (no build tree on any path), tests/pkg/deb_run.sh runs a sockperf
# ping-pong pair under /usr/bin/fabsock over shm and fi_pingpong -p dpdk over
# a net_memif pair with the installed provider. Last, purge the packages:
# none of the files they installed may remain, nor anything the runs left in
# /dev/shm or /run/fabsock (the runs get private ones: a mount namespace).
# Needs root (it installs packages); it refuses to run, SKIP, when one of the
# packages is already installed, so it never removes a user's installation.
. "${top_srcdir:?run from make check-deb or set top_srcdir}/tests/lib/common.sh"
pkgs="libfabsock0 libfabsock-dev fabsock libfabric1-dpdk"

[ "$(id -u)" = 0 ] || fsk_skip "installing packages needs root"
fsk_need_cmd dpkg-buildpackage dpkg-checkbuilddeps dpkg-parsechangelog dh lintian apt-get dpkg-query sockperf fi_pingpong fi_info ss
for p in $pkgs; do
	if dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed\|config-files'; then
		fsk_skip "$p is already installed here: this test installs and purges it"
	fi
done

fsk_setup pkg-deb
T=$fsk_tmp
installed=0
# Whatever happens, a package this test installed does not stay.
purge() {
	[ "$installed" = 1 ] || return 0
	installed=0
	# shellcheck disable=SC2086 # the package list
	DEBIAN_FRONTEND=noninteractive timeout 300 apt-get purge -y -q $pkgs >"$T/purge.log" 2>&1 ||
		{ cat "$T/purge.log"; echo "FAIL: apt-get purge"; return 1; }
}
fsk_exit_hook=purge
t0=$(date +%s)
step() { fsk_note "$(( $(date +%s) - t0 )) s: $*"; }

# ---- a copy of the tree: the files git knows (tracked and new), or all
# files but build products when it is not a git checkout.
src="$T/libfabsock"
mkdir -p "$src"
if git -C "$top_srcdir" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$top_srcdir" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 -r sh -c 'for f; do [ ! -e "$f" ] || printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf -) | tar -C "$src" -xf - || fsk_fail "copying the tree"
else
	tar -C "$top_srcdir" --exclude='./build*' --exclude=./autom4te.cache \
		--exclude=config.status --exclude=config.log -cf - . | tar -C "$src" -xf - ||
		fsk_fail "copying the tree"
fi
[ -f "$src/debian/control" ] || fsk_fail "no debian/control in the copy of $top_srcdir"
# a native package: debian/changelog carries configure.ac's version
dv=$(cd "$src" && dpkg-parsechangelog -S Version) || fsk_fail "dpkg-parsechangelog"
av=$(sed -n 's/^AC_INIT(\[libfabsock\], *\[\([^]]*\)\].*/\1/p' "$src/configure.ac")
[ "$dv" = "$av" ] || fsk_fail "debian/changelog is at version $dv, configure.ac at ${av:-?}: add a changelog entry (dch -v $av)"
missing=$(cd "$src" && dpkg-checkbuilddeps 2>&1) ||
	fsk_skip "the package build's dependencies are not installed (apt-get build-dep ./): $missing"

# ---- build, without the test suite; lintian
step "dpkg-buildpackage -b -us -uc"
(cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=2" timeout 1200 \
	dpkg-buildpackage -b -us -uc) >"$T/build.log" 2>&1 ||
	{ tail -n 40 "$T/build.log"; fsk_fail "dpkg-buildpackage failed (log above)"; }
changes=$(ls "$T"/libfabsock_*.changes 2>/dev/null | head -n 1)
[ -n "$changes" ] || fsk_fail "dpkg-buildpackage made no .changes file"
for p in $pkgs; do
	ls "$T/${p}"_*.deb >/dev/null 2>&1 || fsk_fail "package $p was not built"
done
step "lintian"
timeout 600 lintian --fail-on error "$changes" >"$T/lintian.log" 2>&1
lrc=$?
grep -v '^running with root privileges' "$T/lintian.log"
[ "$lrc" = 0 ] && ! grep -q '^E: ' "$T/lintian.log" || fsk_fail "lintian reports errors (above)"

# ---- install
step "apt-get install"
debs=""
for p in $pkgs; do debs="$debs $(ls "$T/${p}"_*.deb)"; done
installed=1
# shellcheck disable=SC2086 # the list of .deb files (no spaces: our names)
DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q --no-install-recommends $debs \
	>"$T/install.log" 2>&1 || { tail -n 30 "$T/install.log"; fsk_fail "apt-get install of the packages"; }
for p in $pkgs; do
	dpkg-query -L "$p" >>"$T/files" || fsk_fail "dpkg-query -L $p"
done
step "installed: $(wc -l <"$T/files") paths"

# ---- the runs, with the installed files only
step "runs under the installed launcher and provider"
run="$top_srcdir/tests/pkg/deb_run.sh"
if unshare -m true 2>/dev/null; then
	# private /dev/shm and /run/fabsock: what is left in them is the runs'
	timeout 300 unshare -m sh "$run" private "$T/run" || fsk_fail "runs with the installed packages"
else
	fsk_note "no mount namespace here: /dev/shm and /run/fabsock are checked for files newer than the runs' start"
	timeout 300 sh "$run" shared "$T/run" || fsk_fail "runs with the installed packages"
fi

# ---- purge: nothing of the packages remains
step "apt-get purge"
purge || fsk_fail "apt-get purge of the packages"
left=0
while IFS= read -r f; do
	[ -n "$f" ] && [ "$f" != /. ] || continue
	[ -e "$f" ] || [ -L "$f" ] || continue
	# a directory other packages also use stays (e.g. /usr/lib/<triplet>)
	if [ -d "$f" ] && [ ! -L "$f" ] && dpkg-query -S "$f" >/dev/null 2>&1; then
		continue
	fi
	echo "left after purge: $f"
	left=$((left + 1))
done <"$T/files"
[ "$left" = 0 ] || fsk_fail "$left path(s) of the packages left after apt-get purge"
for p in $pkgs; do
	! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'installed\|config-files' ||
		fsk_fail "$p still known to dpkg after the purge"
done
step "purged, nothing left"
echo "PASS: packages built (lintian: no error), installed, sockperf accelerated over shm by /usr/bin/fabsock, fi_pingpong -p dpdk over net_memif with the installed provider, purged without leftovers"
