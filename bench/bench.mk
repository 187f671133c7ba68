# bench.mk -- the benchmarks (included by Makefile.am).
