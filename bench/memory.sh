#!/usr/bin/env bash
# bench/memory.sh — does fanout's memory stay flat in the number of tasks?
#
# Peak RSS (/usr/bin/time -v) of `fanout run` with 10 workers at a time on a
# 5,000-file repository (the one bench/worktrees.sh uses), for 10, 50 and 200 tasks
# of a 0-second agent. fanout alone: there is no baseline to compare with. The task
# counts alternate (the order rotates every round); each point is the median over
# BENCH_RUNS runs. It prints the figures and the ratio 200 tasks / 10 tasks.
# Targets (issue #14): <= 20 MB with 10 workers, and 200 tasks within 10% of 10.
#
# A benchmark, not a test: it never fails on a figure, only when something breaks.
#
# Usage:   bench/memory.sh
# Env:     BENCH_RUNS   runs per task count (default 3)
#          BENCH_TASKS  space-separated task counts (default "10 50 200"); the
#                       ratio printed is last/first
#          FANOUT_BIN, FANOUT_BEFORE_BIN, BENCH_TMP: see bench/lib.sh
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${BENCH_RUNS:-3}
read -r -a TASK_COUNTS <<<"${BENCH_TASKS:-10 50 200}"
CONCURRENCY=10
positive_int BENCH_RUNS "$RUNS"
((${#TASK_COUNTS[@]} > 0)) || { echo "BENCH_TASKS must list task counts" >&2; exit 2; }
for n in "${TASK_COUNTS[@]}"; do positive_int BENCH_TASKS "$n"; done
need_gnu_time
resolve_binaries
# The largest point keeps (tasks x 5,000) files in worktrees until its clean-up.
make_scratch 6000

REPO=$WORK/repo
WT=$WORK/wt
AGENT=$WORK/agent.sh
make_small_repo "$REPO" 50 100
cat >"$AGENT" <<'SH'
#!/bin/sh
echo "$1" > "result-$FANOUT_WORKER_ID.txt"
SH
chmod +x "$AGENT"
# One config per task count: N distinct tasks, 10 workers at a time.
for n in "${TASK_COUNTS[@]}"; do
    {
        echo "parallel_runs:"
        echo "  workers: $CONCURRENCY"
        echo "  agent: trivial"
        echo "agents:"
        echo "  trivial:"
        echo "    command: [\"$AGENT\", \"{task}\"]"
        echo "tasks:"
        for ((i = 1; i <= n; i++)); do echo "  - task number $i"; done
    } >"$WORK/fanout-$n.yml"
done

# one SIDE BINARY TASKS ROUND
one() {
    local side=$1 bin=$2 n=$3 round=$4 rc=0 out=$WORK/out.json
    /usr/bin/time -v -o "$WORK/time" "$bin" -C "$REPO" --config "$WORK/fanout-$n.yml" run \
        --worktree-dir "$WT" --quiet --json >"$out" 2>"$WORK/fanout.log" || rc=$?
    ((rc == 0)) || { cat "$WORK/fanout.log" >&2; die "$side: fanout run ($n tasks) exited $rc"; }
    fanout_succeeded "$out" "$n" || die "$side: not all $n workers succeeded (see $out)"
    if [[ $round != warm-up ]]; then
        record "peak RSS, $n tasks, $CONCURRENCY at a time [MB]" "$side" "$round" \
            "$(kb_to_mb "$(peak_rss_kb "$WORK/time")")"
    fi
    "$bin" -C "$REPO" --config "$WORK/fanout-$n.yml" cleanup --all >/dev/null
    assert_clean "$REPO" "$side: fanout cleanup --all"
}

SIDES=(fanout)
if [[ -n $FANOUT_BEFORE ]]; then SIDES+=(before); fi
bin_of() { if [[ $1 == before ]]; then echo "$FANOUT_BEFORE"; else echo "$FANOUT"; fi; }

echo "fanout memory benchmark"
describe_binaries
echo "  repo:    $(git -C "$REPO" ls-files | wc -l) files; tasks: ${TASK_COUNTS[*]}; $CONCURRENCY at a time"
echo "  cpus:    $(nproc), load now: $(load1)"
describe_scratch
echo "  runs:    $RUNS per point, after one warm-up"
echo

POINTS=()
for side in "${SIDES[@]}"; do
    for n in "${TASK_COUNTS[@]}"; do POINTS+=("$side:$n"); done
done
for side in "${SIDES[@]}"; do one "$side" "$(bin_of "$side")" "${TASK_COUNTS[0]}" warm-up; done
for ((r = 1; r <= RUNS; r++)); do
    mapfile -t order < <(rotate "$r" "${POINTS[@]}")
    for p in "${order[@]}"; do one "${p%%:*}" "$(bin_of "${p%%:*}")" "${p#*:}" "$r"; done
    echo "  round $r of $RUNS done (load $(load1))"
done
echo
# One metric per task count, listed in ascending task count.
sort -s -t "$(printf '\t')" -k1,1V -o "$RECORDS" "$RECORDS"
summarize --order fanout,before --ratio fanout/before
echo
python3 - "$RECORDS" "${TASK_COUNTS[0]}" "${TASK_COUNTS[-1]}" "${SIDES[@]}" <<'PY'
import statistics, sys
path, first, last, sides = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
vals = {}
for line in open(path):
    metric, side, _, value, _ = line.rstrip("\n").split("\t")
    n = metric.split(",")[1].split()[0]
    vals.setdefault((side, n), []).append(float(value))
for side in sides:
    a, b = statistics.median(vals[(side, first)]), statistics.median(vals[(side, last)])
    print(f"  {side}: peak RSS {last} tasks / {first} tasks = {b / a:.2f}")
PY
echo "  targets (issue #14): <= 20 MB with $CONCURRENCY workers; $((TASK_COUNTS[-1])) tasks within 10% of ${TASK_COUNTS[0]} (ratio <= 1.10)"
