# shellcheck shell=bash
# bench/lib.sh — shared by the bench/*.sh scripts (sourced, not run): which fanout
# binaries to measure, hermetic git, the scratch directory, the clock, the load
# average and the record file that bench/stats.py summarises.
#
# Env (all optional):
#   FANOUT_BIN         the fanout binary to measure (default: build this checkout's
#                      release binary with `cargo build --release --locked`)
#   FANOUT_BEFORE_BIN  a second fanout binary measured side by side with the first,
#                      in the same rounds (e.g. a build of the previous commit);
#                      it appears as the side "before"
#   BENCH_RUNS         timed runs per side (each script has its own default)
#   BENCH_TMP          scratch directory parent (default: /dev/shm when it has room,
#                      else $TMPDIR or /tmp)
#   BENCH_RECORDS_OUT  copy the raw records (see `record`) to this file on exit
#   CARGO_TARGET_DIR   honoured when locating the release binary

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)

die() { echo "bench: $*" >&2; exit 1; }

command -v python3 >/dev/null || die "python3 is required"

# positive_int NAME VALUE: exit 2 unless VALUE is a positive integer.
positive_int() {
    case $2 in
        '' | *[!0-9]* | 0) echo "$1 must be a positive integer, got '$2'" >&2; exit 2 ;;
    esac
}

# --- the binaries -------------------------------------------------------------
# Sets FANOUT (the binary under test) and FANOUT_BEFORE (empty unless
# FANOUT_BEFORE_BIN is set). Both are absolute paths.
resolve_binaries() {
    if [[ -n ${FANOUT_BIN:-} ]]; then
        FANOUT=$(realpath "$FANOUT_BIN") || die "FANOUT_BIN=$FANOUT_BIN: not found"
    else
        (cd "$ROOT" && cargo build --release --locked --quiet) || die "cargo build --release failed"
        local target=${CARGO_TARGET_DIR:-$ROOT/target}
        case $target in /*) ;; *) target=$ROOT/$target ;; esac
        FANOUT=$target/release/fanout
    fi
    [[ -x $FANOUT ]] || die "no executable fanout at $FANOUT"
    FANOUT_BEFORE=
    if [[ -n ${FANOUT_BEFORE_BIN:-} ]]; then
        FANOUT_BEFORE=$(realpath "$FANOUT_BEFORE_BIN") || die "FANOUT_BEFORE_BIN=$FANOUT_BEFORE_BIN: not found"
        [[ -x $FANOUT_BEFORE ]] || die "FANOUT_BEFORE_BIN: $FANOUT_BEFORE is not executable"
    fi
}

# describe_binaries: one line per binary measured.
describe_binaries() {
    echo "  fanout:  $FANOUT ($("$FANOUT" --version))"
    if [[ -n $FANOUT_BEFORE ]]; then
        echo "  before:  $FANOUT_BEFORE ($("$FANOUT_BEFORE" --version))"
    fi
}

# --- hermetic scratch space ---------------------------------------------------
# make_scratch NEED_MB: create $WORK (removed on exit) under BENCH_TMP, else under
# /dev/shm when it has NEED_MB free, else under ${TMPDIR:-/tmp}. Sets HOME and git's
# environment so that no global or system configuration applies.
make_scratch() {
    local need_mb=$1 base
    if [[ -n ${BENCH_TMP:-} ]]; then
        base=$BENCH_TMP
    elif [[ -d /dev/shm && -w /dev/shm ]] &&
        (($(df -Pm /dev/shm | awk 'NR == 2 { print $4 }') >= need_mb)); then
        base=/dev/shm
    else
        base=${TMPDIR:-/tmp}
    fi
    WORK=$(mktemp -d "$base/fanout-bench.XXXXXX")
    # BENCH_RECORDS_OUT (set by bench/all.sh): keep the records when done.
    trap 'if [[ -n ${BENCH_RECORDS_OUT:-} ]]; then cp "$RECORDS" "$BENCH_RECORDS_OUT" || true; fi; rm -rf "$WORK"' EXIT
    RECORDS=$WORK/records.tsv
    : >"$RECORDS"
    mkdir -p "$WORK/home"
    export HOME=$WORK/home
    export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
    export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.invalid
    export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.invalid
    # Nothing from the caller's environment should steer git or fanout.
    unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY \
          XDG_DATA_HOME XDG_CONFIG_HOME FANOUT_WORKTREE_DIR FANOUT_LOG \
          GITHUB_ACTIONS GITHUB_STEP_SUMMARY MALLOC_ARENA_MAX
}

# describe_scratch: where the scratch space is and what kind of filesystem.
describe_scratch() {
    echo "  workdir: $(stat -f -c %T "$WORK") filesystem, under $(dirname "$WORK")"
}

# --- the clock, the load, the records -------------------------------------------
# Wall clock in seconds; $EPOCHREALTIME (bash >= 5) needs no fork.
now() {
    if [[ -n ${EPOCHREALTIME:-} ]]; then echo "${EPOCHREALTIME/,/.}"; else date +%s.%N; fi
}
elapsed() { python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.4f}")' "$1" "$2"; }
elapsed_ms() { python3 -c 'import sys; print(f"{(float(sys.argv[2]) - float(sys.argv[1])) * 1000:.3f}")' "$1" "$2"; }

# The 1-minute load average (other people's compilers show up here).
load1() { cut -d' ' -f1 /proc/loadavg; }

# record METRIC SIDE ROUND VALUE: one measurement, with the load average now.
record() {
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$(load1)" >>"$RECORDS"
}

# cpu_mark FILE: note in FILE the CPU time of the children this shell has waited for
# (bash's `times`; call it directly, never in a command substitution, whose subshell
# has children of its own). cpu_diff START END: the CPU time (user+sys, seconds)
# between two marks. The processes a child waited for count too (an agent's time
# counts in fanout's once fanout has reaped it).
cpu_mark() { times >"$1"; }
cpu_diff() {
    python3 - "$1" "$2" <<'PY'
import re, sys
def children(path):
    line = open(path).read().splitlines()[1]
    pairs = re.findall(r"(\d+)m([\d.,]+)s", line)
    return sum(int(m) * 60 + float(s.replace(",", ".")) for m, s in pairs)
print(f"{children(sys.argv[2]) - children(sys.argv[1]):.3f}")
PY
}

# summarize [--ratio A/B]...: print medians, min-max and ratios of $RECORDS.
summarize() { python3 "$BENCH_DIR/stats.py" "$RECORDS" "$@"; }

# rotate ROUND SIDE...: print the sides in the order they run in round ROUND (the
# order shifts by one every round, so no side always goes first).
rotate() {
    local r=$1; shift
    local n=$# i
    local sides=("$@")
    for ((i = 0; i < n; i++)); do
        printf '%s\n' "${sides[$(((r + i) % n))]}"
    done
}

# peak_rss_kb FILE: the "Maximum resident set size" /usr/bin/time -v wrote to FILE.
peak_rss_kb() {
    awk -F': ' '/Maximum resident set size/ { print $2 }' "$1"
}

# cpu_seconds FILE: user + system seconds from what /usr/bin/time -v wrote to FILE.
cpu_seconds() {
    awk -F': ' '/User time \(seconds\)|System time \(seconds\)/ { t += $2 } END { printf "%.2f\n", t }' "$1"
}

# kb_to_mb KB
kb_to_mb() { python3 -c 'import sys; print(f"{int(sys.argv[1]) / 1024:.1f}")' "$1"; }

# need_gnu_time: /usr/bin/time must be GNU time (Debian package `time`).
need_gnu_time() {
    /usr/bin/time -v true >/dev/null 2>&1 ||
        die "/usr/bin/time -v is needed for peak RSS (Debian: apt-get install time)"
}

# --- repositories -------------------------------------------------------------------
# make_small_repo DIR DIRS FILES_PER_DIR: a repository of DIRS x FILES_PER_DIR small
# text files (~350 bytes each) in one commit, on branch main.
make_small_repo() {
    git init -q -b main "$1"
    python3 - "$1" "$2" "$3" <<'PY'
import os, sys
root, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(dirs):
    path = os.path.join(root, f"dir{d:02d}")
    os.mkdir(path)
    for f in range(per):
        line = f"dir {d} file {f}: the quick brown fox jumps over the lazy dog\n"
        with open(os.path.join(path, f"file{f:03d}.txt"), "w") as fh:
            fh.write(line * 5)
PY
    git -C "$1" add -A
    git -C "$1" commit -q -m "bench: generated tree"
}

# config_for_before CFG PLAIN REPO: CFG when the before-binary accepts it (a fanout
# with the sandbox knows `writable:`, and its agents need it), else PLAIN (a fanout
# from before the sandbox refuses the key and needs none).
config_for_before() {
    if [[ -n $FANOUT_BEFORE ]] && "$FANOUT_BEFORE" -C "$3" --config "$1" plan --task probe >/dev/null 2>&1; then
        echo "$1"
    else
        echo "$2"
    fi
}

# assert_clean REPO WHAT: the repository holds only its main checkout and branch
# main, and its checkout is clean.
assert_clean() {
    local n
    n=$(git -C "$1" worktree list --porcelain | grep -c '^worktree ')
    [[ $n -eq 1 ]] || die "$2: $((n - 1)) worktree(s) left behind: $(git -C "$1" worktree list)"
    n=$(git -C "$1" for-each-ref --format='%(refname)' refs/heads | grep -vcx refs/heads/main || true)
    [[ $n -eq 0 ]] || die "$2: branches left behind: $(git -C "$1" for-each-ref --format='%(refname:short)' refs/heads)"
    [[ -z $(git -C "$1" status --porcelain) ]] || die "$2: the repository's checkout is not clean"
}

# fanout_succeeded JSON N: the run report JSON says N workers succeeded.
fanout_succeeded() {
    python3 - "$1" "$2" <<'PY'
import json, sys
totals = json.load(open(sys.argv[1]))["totals"]
sys.exit(0 if totals.get("success") == int(sys.argv[2]) else 1)
PY
}
