#!/usr/bin/env bash
# The fuzzing campaign: every libFuzzer target of fuzz/ (request and reply parsers, log loader,
# RESTORE payloads, the command layer) side by side for the time given (default one hour each),
# on the stable toolchain. Corpora grow in target/fuzz-corpus/, crashes land in
# target/fuzz-artifacts/<target>/; a summary per target at the end. Run it niced if the machine
# is shared: `nice -n 15 bench/fuzz.sh`.
#
#   bench/fuzz.sh [--time SECONDS] [target...]
set -euo pipefail
TIME=3600
if [[ ${1:-} == --time ]]; then TIME=$2; shift 2; fi
exec "$(dirname "$0")/../fuzz/run.sh" --time "$TIME" "$@"
