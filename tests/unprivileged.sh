#!/bin/sh
# Runs the isolation suite again as an unprivileged user made for the purpose.
#
# Most users of sbx are not root, and bubblewrap behaves differently for them
# (an unprivileged user namespace, no capabilities to drop).  As root, this
# makes a system user, copies the suite and the library to a directory that
# user can read (the build tree may sit under a private home), prepares a
# setuid-root copy of id(1) for the no_new_privs test, and runs the suite
# through setpriv.  The user and the directory are removed on the way out.
# Not root: there is nobody to switch to, and the suite's ordinary run is
# already unprivileged, so this skips (77).
set -eu

[ "$(id -u)" -eq 0 ] || { echo "not root: the ordinary run is the unprivileged one"; exit 77; }
command -v useradd >/dev/null && command -v setpriv >/dev/null ||
	{ echo "useradd or setpriv missing"; exit 99; }

builddir=$(pwd)
user="sbxtest$$"
dir=$(mktemp -d /var/tmp/sbx-unprivileged.XXXXXX)

cleanup() {
	# The stub bwrap binds over hidden files lives in /tmp for a user
	# without XDG_RUNTIME_DIR (lib/backend_bwrap.c).
	[ -z "${uid:-}" ] || rm -rf "/tmp/sbx-stub-$uid"
	userdel "$user" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

# Users left by a run that was killed: only ours, only when their run is gone.
for stale in $(getent passwd | cut -d: -f1 | grep '^sbxtest[0-9]*$' || true); do
	pid=${stale#sbxtest}
	kill -0 "$pid" 2>/dev/null || userdel "$stale" 2>/dev/null || true
done

useradd --system --no-create-home --home-dir "$dir/home" --shell /usr/sbin/nologin "$user"
uid=$(id -u "$user")
mkdir "$dir/home"
chown "$user:" "$dir/home"
chmod 755 "$dir"
cp "$builddir/tests/check_isolation" "$dir/"
cp -P "$builddir"/lib/.libs/libsbx.so* "$dir/"
cp /usr/bin/id "$dir/suid-id"
chmod 4755 "$dir/suid-id"

gid=$(id -g "$user")
cd "$dir"
# The suite's Check variables pass through; everything else is fresh.
setpriv --reuid="$uid" --regid="$gid" --clear-groups --reset-env \
	env HOME="$dir/home" LD_LIBRARY_PATH="$dir" SBX_TEST_SETUID_ID="$dir/suid-id" \
	${CK_DEFAULT_TIMEOUT:+CK_DEFAULT_TIMEOUT="$CK_DEFAULT_TIMEOUT"} \
	${CK_TIMEOUT_MULTIPLIER:+CK_TIMEOUT_MULTIPLIER="$CK_TIMEOUT_MULTIPLIER"} \
	${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"} \
	./check_isolation
