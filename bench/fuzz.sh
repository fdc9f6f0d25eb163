#!/usr/bin/env bash
# Run each fuzz target for SECONDS, one after the other, and print the executions it
# reached (from libFuzzer's final stats).
#
#   bench/fuzz.sh SECONDS [TARGET…]     # default: every target in fuzz/Cargo.toml
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Each
# target starts from the kept corpus (fuzz/corpus/<target>) and the regressions
# (fuzz/regressions/<target>); what it finds new goes to fuzz/corpus-work/<target>
# (not committed: minimize it into fuzz/corpus with `cargo fuzz cmin`, see
# fuzz/README.md). A crash, a timeout or an input over the memory limit is written to
# fuzz/artifacts/<target>/ and reported; the script then goes on with the next target
# and exits 1 at the end.
#
# Environment: FUZZ_RUNS (stop a target once it has run this many inputs, even before
# SECONDS — e.g. FUZZ_RUNS=1000000 with a generous SECONDS measures time-to-1M on a
# busy machine; unset: run for SECONDS), FUZZ_SANITIZER (none: the targets are safe Rust, and without a
# sanitizer they run about 8 times faster; `address` adds AddressSanitizer and, with
# it, libFuzzer's -malloc_limit_mb, which stops a single allocation over the limit
# even if it is never touched), FUZZ_RSS_MB (2048: -rss_limit_mb, and
# -malloc_limit_mb under a sanitizer), FUZZ_TIMEOUT (10: seconds one input may take).
set -uo pipefail

secs=${1:?usage: bench/fuzz.sh SECONDS [TARGET...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/fuzz" || exit 2
sanitizer=${FUZZ_SANITIZER:-none}
rss=${FUZZ_RSS_MB:-2048}
timeout=${FUZZ_TIMEOUT:-10}
runs_limit=()
if [ -n "${FUZZ_RUNS:-}" ]; then runs_limit=(-runs="$FUZZ_RUNS"); fi

if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(sed -n 's/^name = "\([a-z_]*\)"$/\1/p' Cargo.toml | grep -v '^fanout-fuzz$')
fi

echo "building ${#targets[@]} targets (sanitizer: $sanitizer)…" >&2
cargo +nightly fuzz build -O -s "$sanitizer" >&2 || exit 2
# The binaries built now: `cargo fuzz run` would rebuild whatever changed meanwhile.
bin=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin=target/$bin/release

found=0
printf '%-18s %8s %12s %10s  %s\n' TARGET SECONDS EXECUTIONS EXEC/S RESULT
for t in "${targets[@]}"; do
    mkdir -p "corpus-work/$t" "artifacts/$t"
    dirs=("corpus-work/$t" "corpus/$t")
    [ -d "regressions/$t" ] && dirs+=("regressions/$t")
    log=$(mktemp)
    start=$SECONDS
    "$bin/$t" "${dirs[@]}" "${runs_limit[@]}" \
        -max_total_time="$secs" -rss_limit_mb="$rss" -malloc_limit_mb="$rss" \
        -timeout="$timeout" -print_final_stats=1 -artifact_prefix="artifacts/$t/" \
        >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ -z "$runs" ]; then
        runs=$(sed -n 's/^Done \([0-9]*\) runs in .*/\1/p' "$log" | tail -1)
    fi
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    if [ "$rc" -eq 0 ]; then
        result=ok
    else
        found=1
        artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
        result="FOUND (exit $rc): ${artifact:-see $log}"
    fi
    printf '%-18s %8s %12s %10s  %s\n' "$t" "$((SECONDS - start))" "${runs:-?}" "${rate:-?}" "$result"
    [ "$rc" -eq 0 ] && rm -f "$log"
done
exit "$found"
