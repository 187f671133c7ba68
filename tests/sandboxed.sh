#!/bin/sh
# Runs the suites whose probes run inside the sandbox (isolation, limits) as
# the user running make check; relocate.sh says why from a copy.
set -eu
. "$(dirname "$0")/relocate.sh"
relocate
trap 'rm -rf "$dir"' EXIT INT TERM
HOME_FOR_SUITE=${HOME:-/}
run_all
