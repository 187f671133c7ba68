#!/bin/sh
# Runs the isolation suite as the user running make check (see relocate.sh
# for why from a copy).
set -eu
. "$(dirname "$0")/relocate.sh"
relocate
trap 'rm -rf "$dir"' EXIT INT TERM
HOME_FOR_SUITE=${HOME:-/}
run_suite
