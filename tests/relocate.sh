# Sourced by tests/sandboxed.sh and tests/unprivileged.sh.
#
# The isolation and limits suites run their own binary inside the sandbox as
# the probe, and /tmp is a private tmpfs there: a build tree under /tmp (a CI
# clone, say) would be invisible.  So the suites and the library are copied to
# a fresh directory under /var/tmp, readable by everyone, and run from there.
# relocate sets $dir; the caller removes it.

relocate() {
	builddir=$(pwd)
	dir=$(mktemp -d /var/tmp/sbx-suites.XXXXXX)
	chmod 755 "$dir"
	cp "$builddir/tests/check_isolation" "$builddir/tests/check_limits" "$builddir/tests/check_session" "$dir/"
	cp -P "$builddir"/lib/.libs/libsbx.so* "$dir/"
	# The suites' own temporary directories go here (SBX_TEST_TMPDIR), so
	# that removing $dir removes what a failed test left, for any user.
	mkdir "$dir/tmp"
	chmod 1777 "$dir/tmp"
}

# run_suite SUITE [COMMAND...]: runs the copied SUITE with the environment it
# needs, behind COMMAND (a setpriv command line, say), under $TEST_WRAPPER
# (valgrind, say) when make check was given one.  Fails when the suite does.
run_suite() {
	suite=$1
	shift
	"$@" env LD_LIBRARY_PATH="$dir" ${SBX_TEST_SETUID_ID:+SBX_TEST_SETUID_ID="$SBX_TEST_SETUID_ID"} \
		${SBX_TEST_BACKEND:+SBX_TEST_BACKEND="$SBX_TEST_BACKEND"} \
		SBX_TEST_TMPDIR="$dir/tmp" \
		${HOME_FOR_SUITE:+HOME="$HOME_FOR_SUITE"} \
		${CK_DEFAULT_TIMEOUT:+CK_DEFAULT_TIMEOUT="$CK_DEFAULT_TIMEOUT"} \
		${CK_TIMEOUT_MULTIPLIER:+CK_TIMEOUT_MULTIPLIER="$CK_TIMEOUT_MULTIPLIER"} \
		${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"} \
		PATH=/usr/local/bin:/usr/bin:/bin \
		${TEST_WRAPPER:-} "$dir/$suite"
}

# Every suite whose probes run in a sandbox, on every backend that isolates
# or limits: the isolation suite on bwrap, the session suite (which loops
# over both itself), the limits suite on bwrap and on passthrough.
# Arguments as for run_suite.
run_all() {
	status=0
	run_suite check_isolation "$@" || status=1
	run_suite check_session "$@" || status=1
	SBX_TEST_BACKEND=bwrap run_suite check_limits "$@" || status=1
	SBX_TEST_BACKEND=passthrough run_suite check_limits "$@" || status=1
	return $status
}
