# serve.mk -- `sbx serve`: the wire protocol (included by Makefile.am).
sbx_serve_sources = src/serve.c src/serve.h src/serve_conn.c src/serve_job.c \
	src/serve_result.c src/wire.c src/wire.h

# check_wire: the decoder, the frames and the result map, as units.  Its
# malloc, calloc and realloc are wrapped so a test can count what decoding
# one frame allocated.
check_PROGRAMS += tests/check_wire tests/check_serve fuzz/replay
tests_check_wire_SOURCES = tests/check_wire.c tests/packjson.c tests/packjson.h src/wire.c src/wire.h src/serve_result.c \
	src/serve.h src/json.c src/cli.h
tests_check_wire_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src
tests_check_wire_CFLAGS = $(sbx_test_cflags) $(JANSSON_CFLAGS) $(MSGPACK_CFLAGS)
tests_check_wire_LDFLAGS = $(sbx_test_link) \
	-Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc
tests_check_wire_LDADD = $(sbx_test_ldadd) $(JANSSON_LIBS) $(MSGPACK_LIBS)

# check_serve: `sbx serve` from outside, through its socket and its stdio,
# including the Python and Node example clients.
tests_check_serve_SOURCES = tests/check_serve.c tests/packjson.c tests/packjson.h
tests_check_serve_CFLAGS = $(sbx_test_cflags) $(JANSSON_CFLAGS) $(MSGPACK_CFLAGS) \
	-DSBX_TOP_SRCDIR='"$(abs_top_srcdir)"' -DSBX_NODE_TESTS=$(NODE_TESTS)
tests_check_serve_LDFLAGS = $(sbx_test_link)
tests_check_serve_LDADD = $(sbx_test_ldadd) $(JANSSON_LIBS) $(MSGPACK_LIBS)

# fuzz/replay: the fuzz target built without libFuzzer, fed every file of
# fuzz/corpus and fuzz/regress (fuzz/run.sh runs the real fuzzer).
fuzz_replay_SOURCES = fuzz/replay.c fuzz/fuzz_request.c src/wire.c src/wire.h
fuzz_replay_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src \
	-DFUZZ_DIR='"$(abs_top_srcdir)/fuzz"'
fuzz_replay_CFLAGS = $(AM_CFLAGS) $(MSGPACK_CFLAGS)
fuzz_replay_LDADD = $(MSGPACK_LIBS)

TESTS += tests/check_wire tests/check_serve fuzz/replay
# The unpacked tarball of make distcheck has no examples/node/node_modules.
AM_DISTCHECK_CONFIGURE_FLAGS = --disable-node-tests

# Makefile.am sets EXTRA_DIST after including us, so our files to
# distribute are listed here; bench.mk (included after us) adds to this list
# and to CLEANFILES with +=.
dist_noinst_DATA = examples/python/sbx_client.py examples/node/client.js \
	examples/node/package.json examples/node/package-lock.json \
	fuzz/run.sh fuzz/make_seeds.py fuzz/request.dict $(fuzz_corpus) $(fuzz_regress)
# The seeds and the regression inputs (fuzz/make_seeds.py writes both; an
# input added to fuzz/regress by hand goes here too).
fuzz_corpus = \
	fuzz/corpus/absolute_cwd fuzz/corpus/argv fuzz/corpus/big_id fuzz/corpus/dash_program \
	fuzz/corpus/empty_policy fuzz/corpus/everything fuzz/corpus/many_args \
	fuzz/corpus/many_env fuzz/corpus/network_full fuzz/corpus/shell fuzz/corpus/stdin_str \
	fuzz/corpus/timeout_int fuzz/corpus/writable_only
fuzz_regress = \
	fuzz/regress/argv_array32_4294967295 fuzz/regress/array32_4294967295 \
	fuzz/regress/bin32_4294967295 fuzz/regress/c1_alone fuzz/regress/c1_as_id \
	fuzz/regress/deep_deny_read fuzz/regress/deep_in_policy fuzz/regress/deep_nesting \
	fuzz/regress/deny_read_bytes fuzz/regress/dotdot_cwd fuzz/regress/duplicate_id \
	fuzz/regress/empty fuzz/regress/empty_argv fuzz/regress/ext_type \
	fuzz/regress/invalid_utf8_key fuzz/regress/many_deny_write \
	fuzz/regress/map32_4294967295 fuzz/regress/nan_timeout fuzz/regress/negative_memory \
	fuzz/regress/nul_in_argv fuzz/regress/nul_in_env fuzz/regress/overflowing_processes \
	fuzz/regress/str32_4294967295 fuzz/regress/trailing_garbage fuzz/regress/truncated \
	fuzz/regress/unknown_key fuzz/regress/writable_components

# make fuzz [FUZZ_SECONDS=600]: builds the libFuzzer target with clang and runs it.
FUZZ_SECONDS = 60
# The fuzzer and its findings stay in the build tree (fuzz/out).
fuzz:
	FUZZ_OUT=$(abs_top_builddir)/fuzz/out $(top_srcdir)/fuzz/run.sh $(FUZZ_SECONDS)
.PHONY: fuzz
CLEANFILES = fuzz/out/fuzz_request
