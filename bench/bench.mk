# bench.mk -- the benchmarks (included by Makefile.am).
#
#   make bench                     quick mode, under two minutes
#   make bench BENCH_MODE=full     full mode, about ten to twelve minutes
#   make bench BENCH_ARGS='--only spawn --repeats 5'
#
# bench/sbxbench measures sbx against a bare posix_spawn loop, bubblewrap
# spawned by that loop, and Python asyncio and Node.js running the same
# bubblewrap command (bench/competitor.py, bench/competitor.js); it prints
# every figure as a ratio to a baseline from the same invocation and writes
# the raw numbers to bench/results-$(BENCH_MODE).json in the build tree.
# bench/tiny is a static program without libc that it spawns, sleeps and
# writes with; it is built by its own rule, without the configured CFLAGS
# (a sanitizer runtime cannot link into it).

noinst_PROGRAMS += bench/sbxbench
bench_sbxbench_SOURCES = bench/sbxbench.c
bench_sbxbench_CPPFLAGS = $(AM_CPPFLAGS) -DSBX_BENCH_SRCDIR='"$(abs_top_srcdir)/bench"' \
	-DSBX_BENCH_BUILDDIR='"$(abs_top_builddir)/bench"'
bench_sbxbench_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS)
# A real binary rather than a libtool wrapper, so perf and valgrind see it.
bench_sbxbench_LDFLAGS = -no-install
bench_sbxbench_LDADD = lib/libsbx.la $(LIBEVENT_LIBS) -lm

BENCH_MODE = quick
BENCH_ARGS =
bench_tiny_flags = -O2 -static -nostdlib -ffreestanding -fno-stack-protector \
	-fno-asynchronous-unwind-tables -fno-pie

bench/tiny$(EXEEXT): $(top_srcdir)/bench/tiny.c
	@$(MKDIR_P) bench
	$(AM_V_CC)$(CC) $(WARN_CFLAGS) -Werror $(bench_tiny_flags) -o $@ $(top_srcdir)/bench/tiny.c

bench: bench/sbxbench$(EXEEXT) bench/tiny$(EXEEXT)
	bench/sbxbench$(EXEEXT) --mode $(BENCH_MODE) --tiny bench/tiny$(EXEEXT) --scripts $(top_srcdir)/bench \
		--json bench/results-$(BENCH_MODE).json $(BENCH_ARGS)
.PHONY: bench

# Makefile.am sets EXTRA_DIST after including this file, and src/serve.mk
# (included before it) sets dist_noinst_DATA and CLEANFILES: hence +=.
dist_noinst_DATA += bench/tiny.c bench/competitor.py bench/competitor.js bench/README.md
CLEANFILES += bench/tiny$(EXEEXT) bench/results-quick.json bench/results-full.json
