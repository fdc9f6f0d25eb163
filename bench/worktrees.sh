#!/usr/bin/env bash
# bench/worktrees.sh — how much does fanout cost over a plain bash fan-out?
#
# What is measured: the wall-clock time to fan one task out to 10 isolated git
# worktrees of a ~5,000-file repository and run a trivial agent in each.
#
#   baseline  the seed's hand-written approach ("seed 002's script"): ten
#             sequential `git worktree add -b`, then the ten agents in the
#             background with `&`, then `wait`. It commits nothing.
#   fanout    `fanout run --workers 10` with the same agent: it creates the
#             ten worktrees and branches, runs the agents, commits each
#             worker's change on its branch and writes results.json/summary.
#
# The agent does (almost) nothing, so the numbers are pure orchestration
# overhead: worktree checkout, process spawning and fanout's bookkeeping.
# The target is fanout/baseline <= 1.05 (median over median).
#
# This is a benchmark, not a test: it prints numbers and never asserts a
# timing. It exits non-zero only when something actually breaks (the build,
# a worker that did not succeed, a clean-up that leaves worktrees behind).
#
# Usage:   bench/worktrees.sh
# Env:     BENCH_RUNS  timed runs per side (default 5; one extra warm-up each)
#          TMPDIR      where the scratch repository and worktrees go (see README:
#                      on ext4 without a journal, mass deletes between runs skew it)
#          CARGO_TARGET_DIR is honoured when locating the release binary.
set -euo pipefail
shopt -s inherit_errexit  # let errors inside $(run_...) abort the script too

RUNS=${BENCH_RUNS:-5}
WORKERS=10
DIRS=50            # DIRS x FILES_PER_DIR files in the generated repository
FILES_PER_DIR=100
TASK="bench task"

case $RUNS in
    '' | *[!0-9]* | 0) echo "BENCH_RUNS must be a positive integer, got '$RUNS'" >&2; exit 2 ;;
esac
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 2; }

# --- build -----------------------------------------------------------------
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(cd "$ROOT" && cargo build --release --quiet)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
case $TARGET_DIR in /*) ;; *) TARGET_DIR=$ROOT/$TARGET_DIR ;; esac
FANOUT=$TARGET_DIR/release/fanout
[[ -x $FANOUT ]] || { echo "no binary at $FANOUT" >&2; exit 1; }

# --- hermetic scratch space ------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fanout-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
REPO=$WORK/repo      # the repository both sides fan out from
WT=$WORK/wt          # worktrees: $WT/base-N (baseline), $WT/fanout/... (fanout)
CFG=$WORK/fanout.yml # outside the repo, so the repo stays clean
AGENT=$WORK/agent.sh
mkdir -p "$WORK/home" "$WT"

export HOME=$WORK/home
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.invalid
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.invalid
# Nothing from the caller's environment should steer git or fanout.
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY \
      XDG_DATA_HOME FANOUT_WORKTREE_DIR GITHUB_ACTIONS GITHUB_STEP_SUMMARY

# --- the repository: DIRS x FILES_PER_DIR small text files, one commit -----
git init -q -b main "$REPO"
python3 - "$REPO" "$DIRS" "$FILES_PER_DIR" <<'PY'
import os, sys
root, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(dirs):
    path = os.path.join(root, f"dir{d:02d}")
    os.mkdir(path)
    for f in range(per):
        line = f"dir {d} file {f}: the quick brown fox jumps over the lazy dog\n"
        with open(os.path.join(path, f"file{f:03d}.txt"), "w") as fh:
            fh.write(line * 5)  # ~350 bytes
PY
git -C "$REPO" add -A
git -C "$REPO" commit -q -m "bench: generated tree"
NFILES=$(git -C "$REPO" ls-files | wc -l)

# --- the trivial agent and fanout's config ----------------------------------
cat >"$AGENT" <<'SH'
#!/bin/sh
# Trivial agent: leave one file in the working directory and succeed.
echo "$1" > "result-$FANOUT_WORKER_ID.txt"
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

# --- helpers -----------------------------------------------------------------
die() { echo "bench: $*" >&2; exit 1; }

# Wall clock in seconds; $EPOCHREALTIME (bash >= 5) needs no fork.
now() {
    if [[ -n ${EPOCHREALTIME:-} ]]; then echo "${EPOCHREALTIME/,/.}"; else date +%s.%N; fi
}
elapsed() { python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.3f}")' "$1" "$2"; }

# The repository must hold only its main checkout and branch between runs.
assert_clean() {
    local n
    n=$(git -C "$REPO" worktree list --porcelain | grep -c '^worktree ')
    [[ $n -eq 1 ]] || die "$1: $((n - 1)) worktree(s) left behind: $(git -C "$REPO" worktree list)"
    n=$(git -C "$REPO" for-each-ref --format='%(refname)' refs/heads | grep -vcx refs/heads/main || true)
    [[ $n -eq 0 ]] || die "$1: branches left behind: $(git -C "$REPO" for-each-ref --format='%(refname:short)' refs/heads)"
    [[ -z $(git -C "$REPO" status --porcelain) ]] || die "$1: the repository is not clean"
}

# --- one run of each side; each prints its duration on stdout ---------------
run_baseline() {
    local i t0 t1 pids=() failed=0
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

    ((failed == 0)) || die "baseline: $failed agent(s) failed"
    for ((i = 1; i <= WORKERS; i++)); do
        [[ -f $WT/base-$i/result-$i.txt ]] || die "baseline: worker $i left no result"
    done
    # Clean-up, not timed.
    for ((i = 1; i <= WORKERS; i++)); do
        git -C "$REPO" worktree remove --force "$WT/base-$i"
        git -C "$REPO" branch -q -D "base/$i"
    done
    assert_clean baseline
    elapsed "$t0" "$t1"
}

run_fanout() {
    local t0 t1 rc=0 out=$WORK/out.json
    t0=$(now)
    "$FANOUT" -C "$REPO" --config "$CFG" run --task "$TASK" --workers "$WORKERS" \
        --worktree-dir "$WT/fanout" --quiet --json >"$out" 2>"$WORK/fanout.log" || rc=$?
    t1=$(now)

    if ((rc != 0)); then
        cat "$WORK/fanout.log" >&2
        die "fanout run exited $rc"
    fi
    python3 - "$out" "$WORKERS" <<'PY' || die "fanout: not every worker succeeded (see $out)"
import json, sys
totals = json.load(open(sys.argv[1]))["totals"]
sys.exit(0 if totals.get("success") == int(sys.argv[2]) else 1)
PY
    # Clean-up, not timed: must leave no worktrees and no fanout/* branches.
    "$FANOUT" -C "$REPO" --config "$CFG" cleanup --all >/dev/null
    [[ -z $(git -C "$REPO" for-each-ref refs/heads/fanout) ]] || die "fanout cleanup --all left fanout/* branches"
    assert_clean "fanout cleanup --all"
    elapsed "$t0" "$t1"
}

# --- the benchmark -----------------------------------------------------------
echo "fanout worktree benchmark"
echo "  fanout:  $FANOUT ($("$FANOUT" --version))"
echo "  repo:    $NFILES files ($DIRS dirs x $FILES_PER_DIR), $WORKERS workers"
echo "  cpus:    $(nproc)"
echo "  workdir: $(stat -f -c %T "$WORK") filesystem (TMPDIR=$(dirname "$WORK"))"
echo "  runs:    $RUNS per side, after one warm-up each (not counted)"
echo

# Warm-up: page cache, git's first-time work, the binary itself.
run_baseline >/dev/null
run_fanout >/dev/null

# Alternate the sides and flip the order every round (B F, F B, ...), so that
# neither side systematically runs first on a freshly cleaned repository.
base_times=()
fan_times=()
for ((r = 1; r <= RUNS; r++)); do
    if ((r % 2)); then
        b=$(run_baseline); f=$(run_fanout)
    else
        f=$(run_fanout); b=$(run_baseline)
    fi
    base_times+=("$b")
    fan_times+=("$f")
    printf '  run %2d   baseline %7.3f s   fanout %7.3f s\n' "$r" "$b" "$f"
done
echo

python3 - "${#base_times[@]}" "${base_times[@]}" "${fan_times[@]}" <<'PY'
import statistics, sys
n = int(sys.argv[1])
vals = [float(v) for v in sys.argv[2:]]
base, fan = vals[:n], vals[n:]
mb, mf = statistics.median(base), statistics.median(fan)
print(f"  median   baseline {mb:7.3f} s   fanout {mf:7.3f} s")
print(f"  ratio fanout/baseline = {mf / mb:.2f}")
print("  target: <= 1.05")
PY
