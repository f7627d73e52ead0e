#!/usr/bin/env bash
# Builds rill's libFuzzer targets and runs them, on the stable toolchain: cargo-fuzz's
# coverage flags (`-Cpasses=sancov-module` and the sanitizer-coverage options) are stable
# rustc options, and libfuzzer-sys builds libFuzzer from its C++ sources. No sanitizer (the
# workspace has no unsafe code); debug assertions and overflow checks on.
#
#   fuzz/run.sh --runs N [targets...]      each target N inputs after its seed corpus, fixed
#                                          seed (what scripts/test runs in CI)
#   fuzz/run.sh --time SECONDS [targets...] each target that long, all targets side by side
#                                          (the campaign, bench/fuzz.sh)
#
# Targets: request_parser reply_parser log_loader restore_payload commands (default: all).
# Seeds: fuzz/corpus/<target> (committed). A campaign grows a working corpus in
# target/fuzz-corpus/<target> (seeds copied in first) and writes crashes to
# target/fuzz-artifacts/<target>/ (logs: <target>.log for a campaign, <target>.runs.log for
# --runs). A found crash replays with
# `target/fuzz/x86_64-unknown-linux-gnu/release/<target> <file>`; `RILL_FUZZ_TRACE=1` makes the
# commands target print each command it runs. Exits non-zero if any target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=""
amount=""
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) mode=runs; amount="$2"; shift 2 ;;
        --time) mode=time; amount="$2"; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) targets+=("$1"); shift ;;
    esac
done
[ -n "$mode" ] || { echo "fuzz/run.sh: --runs N or --time SECONDS" >&2; exit 2; }
[ ${#targets[@]} -gt 0 ] || targets=(request_parser reply_parser log_loader restore_payload commands)

triple="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# --target keeps RUSTFLAGS off build scripts (as cargo-fuzz does).
cargo build --release --locked --target "$triple" --manifest-path fuzz/Cargo.toml --target-dir target/fuzz --bins
bin="target/fuzz/$triple/release"

# Limits for every target: no input may take 10 s, nor allocate 512 MiB at once.
common=(-timeout=10 -malloc_limit_mb=512 -rss_limit_mb=2048 -print_final_stats=1)

status=0
if [ "$mode" = runs ]; then
    for t in "${targets[@]}"; do
        mkdir -p "fuzz/corpus/$t" "target/fuzz-artifacts/$t"
        echo "--- $t: seed corpus + $amount inputs"
        # New inputs go to a scratch directory named first: the seed corpus is only read.
        scratch="target/fuzz-artifacts/$t.new"
        rm -rf "$scratch" && mkdir -p "$scratch"
        if "$bin/$t" "${common[@]}" -seed=1 -runs="$amount" -artifact_prefix="target/fuzz-artifacts/$t/" \
            "$scratch" "fuzz/corpus/$t" >"target/fuzz-artifacts/$t.runs.log" 2>&1; then
            grep -a -E "^Done" "target/fuzz-artifacts/$t.runs.log" | tail -1
        else
            status=1
            tail -40 "target/fuzz-artifacts/$t.runs.log"
            echo "--- $t: FAILED (input in target/fuzz-artifacts/$t/)"
        fi
    done
    exit $status
fi

pids=()
for t in "${targets[@]}"; do
    mkdir -p "target/fuzz-corpus/$t" "target/fuzz-artifacts/$t"
    if [ -d "fuzz/corpus/$t" ]; then cp -n "fuzz/corpus/$t"/* "target/fuzz-corpus/$t/" 2>/dev/null || true; fi
    echo "--- $t: ${amount}s, log target/fuzz-artifacts/$t.log"
    "$bin/$t" "${common[@]}" -max_total_time="$amount" -artifact_prefix="target/fuzz-artifacts/$t/" \
        "target/fuzz-corpus/$t" >"target/fuzz-artifacts/$t.log" 2>&1 &
    pids+=($!)
done
for i in "${!pids[@]}"; do
    t="${targets[$i]}"
    if wait "${pids[$i]}"; then r="ok"; else r="CRASHED"; status=1; fi
    execs="$(grep -a '^stat::number_of_executed_units' "target/fuzz-artifacts/$t.log" | sed 's/.*: *//' | tail -1)"
    cov="$(grep -a -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "target/fuzz-artifacts/$t.log" | tail -1)"
    echo "$t: $r, ${execs:-?} inputs, $cov, corpus target/fuzz-corpus/$t"
done
exit $status
