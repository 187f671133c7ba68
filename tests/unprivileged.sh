#!/bin/sh
# Runs the isolation and limits suites again as an unprivileged user made for
# the purpose.
#
# Most users of sbx are not root, and bubblewrap behaves differently for them
# (an unprivileged user namespace, no capabilities to drop).  As root, this
# makes a system user, copies the suite and the library where that user can
# read them (relocate.sh), prepares a setuid-root copy of id(1) for the
# no_new_privs test, and runs the suite through setpriv.  The user, its stub
# directory and the copy are removed on the way out.  Not root: there is
# nobody to switch to, and tests/sandboxed.sh already ran unprivileged, so
# this skips (77).
set -eu
. "$(dirname "$0")/relocate.sh"

[ "$(id -u)" -eq 0 ] || { echo "not root: tests/sandboxed.sh was the unprivileged run"; exit 77; }
command -v useradd >/dev/null && command -v setpriv >/dev/null ||
	{ echo "useradd or setpriv missing"; exit 99; }

user="sbxtest$$"
dir=""
cleanup() {
	# bwrap's stub for hidden files lives in /tmp for a user without
	# XDG_RUNTIME_DIR (lib/backend_bwrap.c).
	# Whatever still runs as the user made here is ours to end, by pid.
	if [ -n "${uid:-}" ]; then
		for pid in $(ps -u "$uid" -o pid= 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
		rm -rf "/tmp/sbx-stub-$uid"
		# What a failed test of that user left in /var/tmp is ours too.
		find /var/tmp -maxdepth 1 -user "$uid" -exec rm -rf {} + 2>/dev/null || true
	fi
	userdel -f "$user" 2>/dev/null || true
	[ -z "$dir" ] || rm -rf "$dir"
}
trap cleanup EXIT INT TERM

# Users left by a run that was killed: only ours, only when their run is gone.
for stale in $(getent passwd | cut -d: -f1 | grep '^sbxtest[0-9]*$' || true); do
	kill -0 "${stale#sbxtest}" 2>/dev/null || userdel -f "$stale" 2>/dev/null || true
done

relocate
useradd --system --no-create-home --home-dir "$dir/home" --shell /usr/sbin/nologin "$user"
uid=$(id -u "$user")
gid=$(id -g "$user")
mkdir "$dir/home"
chown "$user:" "$dir/home"
cp /usr/bin/id "$dir/suid-id"
chmod 4755 "$dir/suid-id"

cd "$dir"
SBX_TEST_SETUID_ID="$dir/suid-id" HOME_FOR_SUITE="$dir/home" \
	run_all setpriv --reuid="$uid" --regid="$gid" --clear-groups --reset-env
