#!/usr/bin/env bash
# A short tour of what sbx does today, run from a build directory.
#   examples/showcase.sh [BUILD_DIR]
set -uo pipefail
build=${1:-build}
sbx="$build/src/sbx"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; echo "(exit status $?)"; }

echo "sbx showcase: each command below runs through sbx."
step "$sbx" run --json -- sh -c 'echo out; echo err >&2; exit 3'
step "$sbx" run --timeout 1 -- sleep 30
step "$sbx" run --json --max-output 16 --timeout 1 -- yes
step "$sbx" run -- no-such-program
step "$sbx" run --env GREETING=hello -c 'echo "$GREETING from a clean environment"; env | wc -l'
step "$build/examples/parallel" 1000
