#!/bin/sh
# fuzz/run.sh [SECONDS] -- builds the libFuzzer target of the request decoder
# of `sbx serve` with clang (address and undefined-behaviour sanitizers) and
# runs it for SECONDS (default 60), starting from the seeds in fuzz/corpus
# and the inputs in fuzz/regress.  Also: `make fuzz FUZZ_SECONDS=600` in a
# build tree.
#
# What it finds goes to $FUZZ_OUT (default build/fuzz under the source tree):
# corpus/ the inputs it kept, artifacts/ any crash-, leak-, oom- or
# timeout- input.  Copy such an input into fuzz/regress so `make check`
# replays it for good.  Exit status: libFuzzer's (0 when nothing was found).
#
# -malloc_limit_mb makes any single allocation over 16 MiB a failure: frames
# here are at most 64 KiB, and decoding one allocates a small multiple of
# that, so more means a count was trusted before it was checked.
set -eu
seconds=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
out=${FUZZ_OUT:-$top/build/fuzz}
mkdir -p "$out/corpus" "$out/artifacts"

msgpack_cflags=$(pkg-config --cflags msgpack-c 2>/dev/null || pkg-config --cflags msgpack)
msgpack_libs=$(pkg-config --libs msgpack-c 2>/dev/null || pkg-config --libs msgpack)
# shellcheck disable=SC2086
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-I"$top/include" -I"$top/src" $msgpack_cflags \
	"$here/fuzz_request.c" "$top/src/wire.c" $msgpack_libs -o "$out/fuzz_request"

exec "$out/fuzz_request" -max_total_time="$seconds" -max_len=65536 \
	-rss_limit_mb=512 -malloc_limit_mb=16 -timeout=10 \
	-dict="$here/request.dict" -artifact_prefix="$out/artifacts/" -print_final_stats=1 \
	"$out/corpus" "$here/corpus" "$here/regress"
