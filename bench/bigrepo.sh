#!/usr/bin/env bash
# bench/bigrepo.sh — fanout against git itself on a big repository.
#
# The repository: BENCH_FILES (default 40,000) real files copied from sources on
# this machine (the crates under ~/.cargo/registry/src, then the Rust toolchain's
# HTML docs), with a few .gitattributes files (the crates' own and three more),
# committed and packed with `git gc`. It is built once and cached (see README);
# every run of this script starts from a fresh copy of it in the scratch space.
#
# Measured, sides alternating and the order rotating every round:
#   (a) worktree phase, 8 worktrees: from the start until the last of the 8
#       agents has started (each agent writes $EPOCHREALTIME first thing).
#         git     eight sequential `git worktree add -b`, then the 8 agents in the
#                 background, then `wait` (the plain bash pattern)
#         fanout  `fanout run --workers 8` with the same agent
#   (b) whole run with that 0-second agent (same runs as (a)); for fanout this
#       includes committing, diffing and writing its report
#   (c) peak RSS (/usr/bin/time -v) of one checkout: `git worktree add` vs
#       `fanout run --workers 1`; also the peak RSS of the 8-worktree runs.
#
# A benchmark, not a test: it never fails on a timing, only when something breaks
# (a build, a worker that does not succeed, a clean-up that leaves things behind).
#
# Usage:   bench/bigrepo.sh
# Env:     BENCH_RUNS      timed rounds for (a)/(b) (default 5, plus a warm-up)
#          BENCH_RSS_RUNS  rounds for (c) (default 3)
#          BENCH_FILES     files in the repository (default 40000, at least 30000
#                          to be called big)
#          BENCH_SOURCES   colon-separated directories to copy files from, in order
#                          (default: the cargo registry sources, then the Rust docs)
#          BENCH_CACHE     where the built repository is cached
#                          (default ${XDG_CACHE_HOME:-~/.cache}/fanout-bench)
#          BENCH_REBUILD=1 build the repository again even if it is cached
#          FANOUT_BIN, FANOUT_BEFORE_BIN, BENCH_TMP: see bench/lib.sh
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${BENCH_RUNS:-5}
RSS_RUNS=${BENCH_RSS_RUNS:-3}
FILES=${BENCH_FILES:-40000}
WORKERS=8
TASK="bench task"
positive_int BENCH_RUNS "$RUNS"
positive_int BENCH_RSS_RUNS "$RSS_RUNS"
positive_int BENCH_FILES "$FILES"
need_gnu_time

# --- the cached repository (resolved before HOME is made hermetic) -------------
CACHE_ROOT=${BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fanout-bench}
if [[ -n ${BENCH_SOURCES:-} ]]; then
    SOURCES=$BENCH_SOURCES
else
    SOURCES=
    for d in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/; do
        if [[ -d $d ]]; then SOURCES+="${SOURCES:+:}${d%/}"; fi
    done
    sysroot=$(cd "$ROOT" && rustc --print sysroot 2>/dev/null) || sysroot=/nonexistent
    docs=$sysroot/share/doc/rust/html
    if [[ -d $docs ]]; then SOURCES+="${SOURCES:+:}$docs"; fi
fi
[[ -n $SOURCES ]] || die "no sources to build the repository from; set BENCH_SOURCES"
KEY=$(printf 'v1 %s %s' "$FILES" "$SOURCES" | sha256sum | cut -c1-12)
CACHED=$CACHE_ROOT/bigrepo-$FILES-$KEY

resolve_binaries
make_scratch 6000

# build_big_repo DEST: make the repository at DEST (a checkout) from $SOURCES.
build_big_repo() {
    local dest=$1
    git init -q -b main "$dest"
    python3 - "$dest" "$FILES" "$SOURCES" <<'PY' || die "could not copy $FILES files from $SOURCES"
import os, shutil, sys
dest, want, sources = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(":")
MAX = 1 << 20  # leave out files over 1 MiB (search indexes and the like)
n = 0
labels = set()
for src in sources:
    label = os.path.basename(os.path.normpath(src)) or "root"
    while label in labels:
        label += "_"
    labels.add(label)
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            if n >= want:
                break
            path = os.path.join(dirpath, name)
            if name == ".git" or os.path.islink(path) or not os.path.isfile(path):
                continue
            if os.path.getsize(path) > MAX:
                continue
            out = os.path.join(dest, label, os.path.relpath(path, src))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            shutil.copy2(path, out)
            n += 1
    if n >= want:
        break
# A few attribute files of our own on top of the crates' (text normalisation and
# diff drivers, as real repositories have them): checkouts must look them up.
with open(os.path.join(dest, ".gitattributes"), "w") as fh:
    fh.write("* text=auto\n*.png binary\n*.woff2 binary\n*.ttf binary\n")
for label, body in ((sorted(labels)[0], "*.rs text diff=rust\n*.toml text\n"),
                    (sorted(labels)[-1], "*.html text diff=html\n*.js text\n*.css text\n")):
    with open(os.path.join(dest, label, ".gitattributes"), "a") as fh:
        fh.write(body)
print(n)
sys.exit(0 if n >= want else 1)
PY
    git -C "$dest" -c core.safecrlf=false add -A -f
    # No automatic gc in the background: it would make the `gc` below fail.
    git -C "$dest" -c gc.auto=0 commit -q -m "bench: $FILES files from real sources"
    git -C "$dest" gc -q
}

# instantiate: $REPO becomes a fresh checkout of the cached repository.
instantiate() {
    if [[ ${BENCH_REBUILD:-} == 1 || ! -f $CACHED/complete ]]; then
        echo "  building the repository ($FILES files) into $CACHED ..."
        local t0 t1
        t0=$(now)
        rm -rf "$WORK/build"
        build_big_repo "$WORK/build" >/dev/null
        mkdir -p "$CACHE_ROOT"
        rm -rf "$CACHED.tmp" "$CACHED"
        mkdir "$CACHED.tmp"
        cp -a "$WORK/build/.git" "$CACHED.tmp/git"
        rm -f "$CACHED.tmp/git/index"
        touch "$CACHED.tmp/complete"
        mv "$CACHED.tmp" "$CACHED"
        rm -rf "$WORK/build"
        t1=$(now)
        echo "  built in $(elapsed "$t0" "$t1") s"
    fi
    mkdir -p "$REPO"
    cp -a "$CACHED/git" "$REPO/.git"
    git -C "$REPO" reset -q --hard HEAD
}

REPO=$WORK/repo
WT=$WORK/wt
STAMPS=$WORK/stamps
CFG=$WORK/fanout.yml
AGENT=$WORK/agent.sh
mkdir -p "$WT" "$STAMPS"
instantiate
assert_clean "$REPO" "the repository as instantiated"
NFILES=$(git -C "$REPO" ls-files | wc -l)
NATTR=$(git -C "$REPO" ls-files | grep -c '\(^\|/\)\.gitattributes$' || true)
SIZE_MB=$(du -sm --exclude=.git "$REPO" | cut -f1)
PACK_MB=$(du -sm "$REPO/.git/objects" | cut -f1)

# The 0-second agent: note when it started (outside the worktree), leave a file.
cat >"$AGENT" <<SH
#!/usr/bin/env bash
echo "\$EPOCHREALTIME" > "$STAMPS/\$FANOUT_WORKER_ID"
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

# last_start: the latest agent start stamp, after checking there are N of them.
last_start() {
    local n
    n=$(find "$STAMPS" -type f | wc -l)
    [[ $n -eq $1 ]] || die "$1 agents should have started, $n did"
    sort -n "$STAMPS"/* | tail -n 1
}

# --- (a)+(b): 8 worktrees, the bash pattern ----------------------------------------
git_side() {
    local round=$1 i t0 t1 pids=() failed=0 rss=0 r cpu=0 u s
    rm -f "$STAMPS"/*
    t0=$(now)
    for ((i = 1; i <= WORKERS; i++)); do
        /usr/bin/time -f '%M %U %S' -o "$WORK/rss.$i" git -C "$REPO" worktree add -q -b "base/$i" "$WT/base-$i" HEAD
    done
    for ((i = 1; i <= WORKERS; i++)); do
        (cd "$WT/base-$i" && FANOUT_WORKER_ID=$i exec "$AGENT" "$TASK") &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || failed=$((failed + 1)); done
    t1=$(now)
    ((failed == 0)) || die "git: $failed agent(s) failed"
    for ((i = 1; i <= WORKERS; i++)); do
        [[ -f $WT/base-$i/result-$i.txt ]] || die "git: worker $i left no result"
        read -r r u s <"$WORK/rss.$i"
        if ((r > rss)); then rss=$r; fi
        cpu=$(python3 -c 'import sys; print(sum(map(float, sys.argv[1:])))' "$cpu" "$u" "$s")
    done
    if [[ $round != warm-up ]]; then
        record "(a) worktree phase, $WORKERS worktrees [s]" git "$round" "$(elapsed "$t0" "$(last_start "$WORKERS")")"
        record "(b) whole run, 0-second agent [s]" git "$round" "$(elapsed "$t0" "$t1")"
        record "(a) peak RSS of the $WORKERS-worktree run [MB]" git "$round" "$(kb_to_mb "$rss")"
        record "(a) CPU time (user+sys) of the $WORKERS-worktree run [s]" git "$round" "$cpu"
    fi
    for ((i = 1; i <= WORKERS; i++)); do
        git -C "$REPO" worktree remove --force "$WT/base-$i"
        git -C "$REPO" branch -q -D "base/$i"
    done
    assert_clean "$REPO" "git worktree remove"
}

# fanout_side SIDE BINARY ROUND
fanout_side() {
    local side=$1 bin=$2 round=$3 t0 t1 rc=0 out=$WORK/out.json
    rm -f "$STAMPS"/*
    t0=$(now)
    /usr/bin/time -f '%M %U %S' -o "$WORK/rss.fanout" \
        "$bin" -C "$REPO" --config "$(cfg_of "$side")" run --task "$TASK" --workers "$WORKERS" \
        --worktree-dir "$WT/fanout" --quiet --json >"$out" 2>"$WORK/fanout.log" || rc=$?
    t1=$(now)
    if ((rc != 0)); then
        cat "$WORK/fanout.log" >&2
        die "$side: fanout run exited $rc"
    fi
    fanout_succeeded "$out" "$WORKERS" || die "$side: not every worker succeeded (see $out)"
    if [[ $round != warm-up ]]; then
        record "(a) worktree phase, $WORKERS worktrees [s]" "$side" "$round" "$(elapsed "$t0" "$(last_start "$WORKERS")")"
        record "(b) whole run, 0-second agent [s]" "$side" "$round" "$(elapsed "$t0" "$t1")"
        local rss u s
        read -r rss u s <"$WORK/rss.fanout"
        record "(a) peak RSS of the $WORKERS-worktree run [MB]" "$side" "$round" "$(kb_to_mb "$rss")"
        record "(a) CPU time (user+sys) of the $WORKERS-worktree run [s]" "$side" "$round" \
            "$(python3 -c 'import sys; print(sum(map(float, sys.argv[1:])))' "$u" "$s")"
    fi
    "$bin" -C "$REPO" --config "$(cfg_of "$side")" cleanup --all >/dev/null
    assert_clean "$REPO" "$side: fanout cleanup --all"
}

# --- (c): one checkout under /usr/bin/time -v ----------------------------------------
git_one() {
    local round=$1 t0 t1
    t0=$(now)
    /usr/bin/time -v -o "$WORK/time.git" git -C "$REPO" worktree add -q -b base/one "$WT/one" HEAD
    t1=$(now)
    record "(c) one checkout: peak RSS [MB]" git "$round" "$(kb_to_mb "$(peak_rss_kb "$WORK/time.git")")"
    record "(c) one checkout: wall time [s]" git "$round" "$(elapsed "$t0" "$t1")"
    record "(c) one checkout: CPU time (user+sys) [s]" git "$round" "$(cpu_seconds "$WORK/time.git")"
    git -C "$REPO" worktree remove --force "$WT/one"
    git -C "$REPO" branch -q -D base/one
    assert_clean "$REPO" "git worktree remove"
}

fanout_one() {
    local side=$1 bin=$2 round=$3 t0 t1 rc=0 out=$WORK/out.json
    rm -f "$STAMPS"/*
    t0=$(now)
    /usr/bin/time -v -o "$WORK/time.fanout" \
        "$bin" -C "$REPO" --config "$(cfg_of "$side")" run --task "$TASK" --workers 1 \
        --worktree-dir "$WT/fanout" --quiet --json >"$out" 2>"$WORK/fanout.log" || rc=$?
    t1=$(now)
    ((rc == 0)) || { cat "$WORK/fanout.log" >&2; die "$side: fanout run exited $rc"; }
    fanout_succeeded "$out" 1 || die "$side: the worker did not succeed (see $out)"
    record "(c) one checkout: peak RSS [MB]" "$side" "$round" "$(kb_to_mb "$(peak_rss_kb "$WORK/time.fanout")")"
    record "(c) one checkout: wall time [s]" "$side" "$round" "$(elapsed "$t0" "$t1")"
    record "(c) one checkout: CPU time (user+sys) [s]" "$side" "$round" "$(cpu_seconds "$WORK/time.fanout")"
    "$bin" -C "$REPO" --config "$(cfg_of "$side")" cleanup --all >/dev/null
    assert_clean "$REPO" "$side: fanout cleanup --all"
}

# run_side KIND SIDE ROUND: dispatch one run of SIDE (git, fanout, before).
run_side() {
    local kind=$1 side=$2 round=$3
    case $kind/$side in
        many/git) git_side "$round" ;;
        many/fanout) fanout_side fanout "$FANOUT" "$round" ;;
        many/before) fanout_side before "$FANOUT_BEFORE" "$round" ;;
        one/git) git_one "$round" ;;
        one/fanout) fanout_one fanout "$FANOUT" "$round" ;;
        one/before) fanout_one before "$FANOUT_BEFORE" "$round" ;;
    esac
}

# --- the benchmark -----------------------------------------------------------------
SIDES=(git fanout)
if [[ -n $FANOUT_BEFORE ]]; then SIDES+=(before); fi
echo "fanout big-repository benchmark"
describe_binaries
echo "  repo:    $NFILES files, $SIZE_MB MB checked out, $PACK_MB MB of objects, $NATTR .gitattributes"
echo "           (cached at $CACHED)"
echo "  cpus:    $(nproc), load now: $(load1)"
describe_scratch
echo "  runs:    $RUNS rounds of (a)/(b) after one warm-up, $RSS_RUNS of (c); sides: ${SIDES[*]}"
echo

for side in "${SIDES[@]}"; do run_side many "$side" warm-up; done
for ((r = 1; r <= RUNS; r++)); do
    mapfile -t order < <(rotate "$r" "${SIDES[@]}")
    for side in "${order[@]}"; do run_side many "$side" "$r"; done
    echo "  round $r of $RUNS done (load $(load1))"
done
for ((r = 1; r <= RSS_RUNS; r++)); do
    mapfile -t order < <(rotate "$r" "${SIDES[@]}")
    for side in "${order[@]}"; do run_side one "$side" "$r"; done
done
echo
summarize --order git,fanout,before --ratio fanout/git --ratio before/git --ratio fanout/before
echo
echo "  targets (issue #14): (a) <= 0.6, (b) <= 0.7, (c) fanout's peak RSS <= git's"
