#!/usr/bin/env bash
# bench/startup.sh — fanout's fixed costs: how long before it does anything useful?
#
#   --version      `fanout --version`
#   plan           `fanout plan` of one task in a one-file repository
#   one-task run   `fanout run` of one task with a 0-second agent in that
#                  repository (the clean-up between runs is not timed)
#
# Many repetitions each; the median and min-max in milliseconds, and the CPU time
# (user+sys: with hyperfine its mean, else the median of each run's). With hyperfine
# installed (Debian package `hyperfine`) it does the timing (-N: no shell in
# between); otherwise a loop timed with $EPOCHREALTIME, which adds the cost of a
# fork and exec from bash (about 1 ms) to every figure.
# Targets: --version and plan <= 10 ms (issue #14); the one-task run is a guard,
# not a target: <= 20 ms (issue #30).
#
# A benchmark, not a test: it never fails on a timing, only when something breaks.
#
# Usage:   bench/startup.sh
# Env:     BENCH_RUNS   repetitions per command (default 200; 50 for the run)
#          BENCH_NO_HYPERFINE=1  use the loop even if hyperfine is installed
#          FANOUT_BIN, FANOUT_BEFORE_BIN, BENCH_TMP: see bench/lib.sh
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${BENCH_RUNS:-200}
positive_int BENCH_RUNS "$RUNS"
RUN_RUNS=$(((RUNS + 3) / 4))
resolve_binaries
make_scratch 100

REPO=$WORK/repo
CFG=$WORK/fanout.yml
AGENT=$WORK/agent.sh
git init -q -b main "$REPO"
echo tiny >"$REPO/README.md"
git -C "$REPO" add -A
git -C "$REPO" commit -q -m tiny
cat >"$AGENT" <<'SH'
#!/bin/sh
echo "$1" > "result-$FANOUT_WORKER_ID.txt"
SH
chmod +x "$AGENT"
cat >"$CFG" <<YAML
parallel_runs:
  workers: 1
  agent: trivial
agents:
  trivial:
    command: ["$AGENT", "{task}"]
YAML

HYPERFINE=
if [[ ${BENCH_NO_HYPERFINE:-} != 1 ]] && command -v hyperfine >/dev/null; then
    HYPERFINE=$(command -v hyperfine)
fi

SIDES=(fanout)
if [[ -n $FANOUT_BEFORE ]]; then SIDES+=(before); fi
bin_of() { if [[ $1 == before ]]; then echo "$FANOUT_BEFORE"; else echo "$FANOUT"; fi; }

# The command lines, as an array (CMD) to run and as a string for hyperfine -N,
# which splits it at spaces: paths must have none.
case $WORK in *[[:space:]]*) die "the scratch path has a space: $WORK" ;; esac
cmd_args() {
    local what=$1 bin=$2
    case $what in
        version) CMD=("$bin" --version) ;;
        plan) CMD=("$bin" -C "$REPO" --config "$CFG" plan --task bench) ;;
        run) CMD=("$bin" -C "$REPO" --config "$CFG" run --task bench --quiet --worktree-dir "$WORK/wt") ;;
        cleanup) CMD=("$bin" -C "$REPO" --config "$CFG" cleanup --all) ;;
    esac
}
run_cmd() { cmd_args "$1" "$2"; "${CMD[@]}"; }
cmd_line() { cmd_args "$1" "$2"; echo "${CMD[*]}"; }

# Everything must work before anything is timed.
for side in "${SIDES[@]}"; do
    bin=$(bin_of "$side")
    for what in version plan run; do
        run_cmd "$what" "$bin" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; die "$side: $what failed"; }
    done
    run_cmd cleanup "$bin" >/dev/null
    assert_clean "$REPO" "$side: fanout cleanup --all"
done

# measure NAME WHAT RUNS: time WHAT (version, plan, run) for every side.
measure() {
    local name=$1 what=$2 runs=$3 side bin r t0 t1
    if [[ -n $HYPERFINE ]]; then
        local args=(-N --style none --warmup 5 --runs "$runs" --export-json "$WORK/h.json")
        for side in "${SIDES[@]}"; do
            bin=$(bin_of "$side")
            if [[ $what == run ]]; then args+=(--prepare "$(cmd_line cleanup "$bin")"); fi
            args+=(-n "$side" "$(cmd_line "$what" "$bin")")
        done
        "$HYPERFINE" "${args[@]}" >/dev/null || die "hyperfine failed on $what"
        python3 - "$WORK/h.json" "$name" "$(load1)" >>"$RECORDS" <<'PY'
import json, sys
path, name, load = sys.argv[1:]
results = json.load(open(path))["results"]
for res in results:
    for i, t in enumerate(res["times"], 1):
        # hyperfine runs one command's repetitions back to back: no rounds to pair.
        print(f"{name}\t{res['command']}\t{res['command']}-{i}\t{t * 1000:.3f}\t{load}")
# CPU time: hyperfine reports only its mean over the runs.
cpu = name.replace(" [ms]", ", CPU time (user+sys, mean) [ms]")
for res in results:
    ms = (res["user"] + res["system"]) * 1000
    print(f"{cpu}\t{res['command']}\tmean\t{ms:.3f}\t{load}")
PY
    else
        for ((r = 1; r <= runs + 5; r++)); do
            mapfile -t order < <(rotate "$r" "${SIDES[@]}")
            for side in "${order[@]}"; do
                bin=$(bin_of "$side")
                cpu_mark "$WORK/cpu"
                t0=$(now)
                run_cmd "$what" "$bin" >/dev/null 2>&1 || die "$side: $what failed"
                t1=$(now)
                cpu_mark "$WORK/cpu.end"
                if ((r > 5)); then
                    record "$name" "$side" "$r" "$(elapsed_ms "$t0" "$t1")"
                    record "${name% \[ms\]}, CPU time (user+sys) [ms]" "$side" "$r" \
                        "$(python3 -c 'import sys; print(float(sys.argv[1]) * 1000)' "$(cpu_diff "$WORK/cpu" "$WORK/cpu.end")")"
                fi
                if [[ $what == run ]]; then run_cmd cleanup "$bin" >/dev/null; fi
            done
        done
    fi
    if [[ $what == run ]]; then
        # The older binary first: it cleans runs of either, while a current fanout
        # refuses journals it did not sign (the before-binary's) and exits 1.
        for ((i = ${#SIDES[@]} - 1; i >= 0; i--)); do
            run_cmd cleanup "$(bin_of "${SIDES[i]}")" >/dev/null
        done
        assert_clean "$REPO" "fanout cleanup --all"
    fi
}

echo "fanout startup benchmark"
describe_binaries
echo "  timing:  ${HYPERFINE:-a bash loop (\$EPOCHREALTIME; includes a fork+exec)}"
echo "  cpus:    $(nproc), load now: $(load1)"
describe_scratch
echo "  runs:    $RUNS of --version and plan, $RUN_RUNS of the one-task run, after 5 warm-ups"
echo

measure "fanout --version [ms]" version "$RUNS"
measure "fanout plan [ms]" plan "$RUNS"
measure "one-task run, 0-second agent, tiny repo [ms]" run "$RUN_RUNS"
summarize --order fanout,before --ratio fanout/before
echo
echo "  targets: --version and plan <= 10 ms (issue #14); one-task run <= 20 ms, a guard (issue #30)"
