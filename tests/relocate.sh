# Sourced by tests/isolation.sh and tests/unprivileged.sh.
#
# The isolation suite runs its own binary inside the sandbox as the probe,
# and /tmp is a private tmpfs there: a build tree under /tmp (a CI clone,
# say) would be invisible.  So the suite and the library are copied to a
# fresh directory under /var/tmp, readable by everyone, and run from there.
# relocate sets $dir; the caller removes it.

relocate() {
	builddir=$(pwd)
	dir=$(mktemp -d /var/tmp/sbx-isolation.XXXXXX)
	chmod 755 "$dir"
	cp "$builddir/tests/check_isolation" "$dir/"
	cp -P "$builddir"/lib/.libs/libsbx.so* "$dir/"
}

# Runs the copied suite with the environment it needs, under $TEST_WRAPPER
# (valgrind, say) when make check was given one.  Arguments go before the
# suite, e.g. a setpriv command line.
run_suite() {
	"$@" env LD_LIBRARY_PATH="$dir" ${SBX_TEST_SETUID_ID:+SBX_TEST_SETUID_ID="$SBX_TEST_SETUID_ID"} \
		${HOME_FOR_SUITE:+HOME="$HOME_FOR_SUITE"} \
		${CK_DEFAULT_TIMEOUT:+CK_DEFAULT_TIMEOUT="$CK_DEFAULT_TIMEOUT"} \
		${CK_TIMEOUT_MULTIPLIER:+CK_TIMEOUT_MULTIPLIER="$CK_TIMEOUT_MULTIPLIER"} \
		${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"} \
		PATH=/usr/local/bin:/usr/bin:/bin \
		${TEST_WRAPPER:-} "$dir/check_isolation"
}
