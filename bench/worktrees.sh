#!/usr/bin/env bash
# bench/worktrees.sh — how much does fanout cost over a plain bash fan-out? (P1)
#
# What is measured: the wall-clock time to fan one task out to 10 isolated git
# worktrees of a ~5,000-file repository and run an agent in each that sleeps
# BENCH_AGENT_SECONDS (default 1) and writes one file.
#
#   git       the seed's hand-written approach ("seed 002's script"): ten
#             sequential `git worktree add -b`, then the ten agents in the
#             background with `&`, then `wait`. It commits nothing.
#   fanout    `fanout run --workers 10` with the same agent: it creates the
#             ten worktrees and branches, runs the agents, commits each
#             worker's change on its branch and writes results.json/summary.
#   before    the same with FANOUT_BEFORE_BIN, when it is set.
#
# Also printed: the worktree phase, from the start until the last agent has
# started (each agent writes $EPOCHREALTIME first thing), and the clean-up
# afterwards (`git worktree remove --force` and `branch -D` for each worker;
# `fanout cleanup --all`, which first looks for uncommitted work in each).
# Target (issue #14): whole run fanout/git <= 0.7 with the 1-second agent.
#
# This is a benchmark, not a test: it prints numbers and never asserts a
# timing. It exits non-zero only when something actually breaks (the build,
# a worker that did not succeed, a clean-up that leaves worktrees behind).
#
# Usage:   bench/worktrees.sh
# Env:     BENCH_RUNS           timed runs per side (default 5; one extra warm-up each)
#          BENCH_AGENT_SECONDS  how long the agent sleeps (default 1; 0 for pure overhead)
#          FANOUT_BIN, FANOUT_BEFORE_BIN, BENCH_TMP: see bench/lib.sh (the scratch
#          space goes on /dev/shm when it has room; see README)
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${BENCH_RUNS:-5}
SLEEP=${BENCH_AGENT_SECONDS:-1}
WORKERS=10
TASK="bench task"
positive_int BENCH_RUNS "$RUNS"
case $SLEEP in '' | *[!0-9.]*) echo "BENCH_AGENT_SECONDS must be a number of seconds, got '$SLEEP'" >&2; exit 2 ;; esac
resolve_binaries
make_scratch 1000

REPO=$WORK/repo      # the repository every side fans out from
WT=$WORK/wt          # worktrees: $WT/base-N (git), $WT/fanout/... (fanout)
STAMPS=$WORK/stamps  # agent start times
CFG=$WORK/fanout.yml # outside the repo, so the repo stays clean
AGENT=$WORK/agent.sh
mkdir -p "$WT" "$STAMPS"
make_small_repo "$REPO" 50 100
NFILES=$(git -C "$REPO" ls-files | wc -l)

cat >"$AGENT" <<SH
#!/usr/bin/env bash
# Note the start (outside the worktree), sleep, leave one file, succeed.
echo "\$EPOCHREALTIME" > "$STAMPS/\$FANOUT_WORKER_ID"
sleep $SLEEP
echo "\$1" > "result-\$FANOUT_WORKER_ID.txt"
SH
chmod +x "$AGENT"
cat >"$CFG" <<YAML
parallel_runs:
  workers: $WORKERS
  agent: trivial
agents:
  trivial:
    command: ["$AGENT", "{task}"]
YAML
# The agent notes its start outside its worktree: fanout's sandbox (on by default)
# must let it write there; a before-binary from before the sandbox refuses the key.
CFG_BEFORE=$WORK/fanout-before.yml
cp "$CFG" "$CFG_BEFORE"
echo "    writable: [\"$STAMPS\"]" >>"$CFG"
CFG_BEFORE=$(config_for_before "$CFG" "$CFG_BEFORE" "$REPO")

# cfg_of SIDE: the configuration that side's binary reads.
cfg_of() { if [[ $1 == before ]]; then echo "$CFG_BEFORE"; else echo "$CFG"; fi; }

last_start() {
    local n
    n=$(find "$STAMPS" -type f | wc -l)
    [[ $n -eq $WORKERS ]] || die "$WORKERS agents should have started, $n did"
    sort -n "$STAMPS"/* | tail -n 1
}

# --- one run of each side -------------------------------------------------------
git_side() {
    local round=$1 i t0 t1 cpu pids=() failed=0
    rm -f "$STAMPS"/*
    cpu_mark "$WORK/cpu"
    t0=$(now)
    for ((i = 1; i <= WORKERS; i++)); do
        git -C "$REPO" worktree add -q -b "base/$i" "$WT/base-$i" HEAD
    done
    for ((i = 1; i <= WORKERS; i++)); do
        (cd "$WT/base-$i" && FANOUT_WORKER_ID=$i exec "$AGENT" "$TASK") &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || failed=$((failed + 1)); done
    t1=$(now)
    cpu_mark "$WORK/cpu.end"
    cpu=$(cpu_diff "$WORK/cpu" "$WORK/cpu.end")

    ((failed == 0)) || die "git: $failed agent(s) failed"
    for ((i = 1; i <= WORKERS; i++)); do
        [[ -f $WT/base-$i/result-$i.txt ]] || die "git: worker $i left no result"
    done
    if [[ $round != warm-up ]]; then
        record "whole run, $WORKERS workers, ${SLEEP}-second agent [s]" git "$round" "$(elapsed "$t0" "$t1")"
        record "worktree phase (until the last agent starts) [s]" git "$round" "$(elapsed "$t0" "$(last_start)")"
        record "CPU time (user+sys) of the run, agents included [s]" git "$round" "$cpu"
    fi
    # Clean-up (its own figure): the worktrees and the branches.
    t0=$(now)
    for ((i = 1; i <= WORKERS; i++)); do
        git -C "$REPO" worktree remove --force "$WT/base-$i"
        git -C "$REPO" branch -q -D "base/$i"
    done
    t1=$(now)
    assert_clean "$REPO" "git worktree remove"
    if [[ $round != warm-up ]]; then
        record "clean-up of the $WORKERS worktrees and branches [s]" git "$round" "$(elapsed "$t0" "$t1")"
    fi
}

fanout_side() {
    local side=$1 bin=$2 round=$3 t0 t1 cpu rc=0 out=$WORK/out.json
    rm -f "$STAMPS"/*
    cpu_mark "$WORK/cpu"
    t0=$(now)
    "$bin" -C "$REPO" --config "$(cfg_of "$side")" run --task "$TASK" --workers "$WORKERS" \
        --worktree-dir "$WT/fanout" --quiet --json >"$out" 2>"$WORK/fanout.log" || rc=$?
    t1=$(now)
    cpu_mark "$WORK/cpu.end"
    cpu=$(cpu_diff "$WORK/cpu" "$WORK/cpu.end")

    if ((rc != 0)); then
        cat "$WORK/fanout.log" >&2
        die "$side: fanout run exited $rc"
    fi
    fanout_succeeded "$out" "$WORKERS" || die "$side: not every worker succeeded (see $out)"
    if [[ $round != warm-up ]]; then
        record "whole run, $WORKERS workers, ${SLEEP}-second agent [s]" "$side" "$round" "$(elapsed "$t0" "$t1")"
        record "worktree phase (until the last agent starts) [s]" "$side" "$round" "$(elapsed "$t0" "$(last_start)")"
        record "CPU time (user+sys) of the run, agents included [s]" "$side" "$round" "$cpu"
    fi
    # Clean-up (its own figure): must leave no worktrees and no fanout/* branches.
    # fanout first looks in each worktree for uncommitted work; git is told to
    # throw it away (--force).
    t0=$(now)
    "$bin" -C "$REPO" --config "$(cfg_of "$side")" cleanup --all >/dev/null
    t1=$(now)
    if [[ $round != warm-up ]]; then
        record "clean-up of the $WORKERS worktrees and branches [s]" "$side" "$round" "$(elapsed "$t0" "$t1")"
    fi
    [[ -z $(git -C "$REPO" for-each-ref refs/heads/fanout) ]] || die "$side: fanout cleanup --all left fanout/* branches"
    assert_clean "$REPO" "$side: fanout cleanup --all"
}

run_side() {
    case $1 in
        git) git_side "$2" ;;
        fanout) fanout_side fanout "$FANOUT" "$2" ;;
        before) fanout_side before "$FANOUT_BEFORE" "$2" ;;
    esac
}

# --- the benchmark -----------------------------------------------------------------
SIDES=(git fanout)
if [[ -n $FANOUT_BEFORE ]]; then SIDES+=(before); fi
echo "fanout worktree benchmark (P1)"
describe_binaries
echo "  repo:    $NFILES files (50 dirs x 100), $WORKERS workers, ${SLEEP}-second agent"
echo "  cpus:    $(nproc), load now: $(load1)"
describe_scratch
echo "  runs:    $RUNS per side, after one warm-up each (not counted); sides: ${SIDES[*]}"
echo

# Warm-up: page cache, git's first-time work, the binary itself.
for side in "${SIDES[@]}"; do run_side "$side" warm-up; done
# The order of the sides rotates every round (git fanout, fanout git, ...), so
# that no side systematically runs first on a freshly cleaned repository.
for ((r = 1; r <= RUNS; r++)); do
    mapfile -t order < <(rotate "$r" "${SIDES[@]}")
    for side in "${order[@]}"; do run_side "$side" "$r"; done
done
summarize --order git,fanout,before --ratio fanout/git --ratio before/git --ratio fanout/before
echo
echo "  target (issue #14): whole run fanout/git <= 0.7 with the 1-second agent"
