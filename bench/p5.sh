#!/usr/bin/env bash
# bench/p5.sh — copying a dependency tree into 8 worktrees: fanout vs `cp -a` by hand (P5)
#
# What is measured, on tmpfs and on disk (each place in turn, sides alternating):
#
#   cp        8 sequential `cp -a node_modules <dir>/` of a generated dependency tree
#             (the copies only: the directories exist beforehand).
#   fanout    `fanout run --workers 8` with `copy: [node_modules/]`: it makes the
#             8 worktrees, copies the tree into each (sharing one pool of copy
#             threads), runs a trivial agent in each, commits and reports. The whole
#             run is timed, and the phase until the last agent has started.
#   before    the same with FANOUT_BEFORE_BIN, when it is set.
#
# The tree is generated (not downloaded): about 1,000 packages, 12,000 files and
# 300 MB, scoped and nested packages, executable `bin/` scripts and a
# `node_modules/.bin` of relative symlinks to them, as npm lays them out.
# After each fanout run one worktree's copy is compared with the source (types,
# modes, sizes, mtimes, symlink targets): a copy that is not `cp -a`'s fails the
# benchmark.
#
# Target (issue #29): fanout's whole run <= 0.7x of the 8 sequential `cp -a`, on
# 2 cores.
#
# This is a benchmark, not a test: it prints numbers and never asserts a timing.
#
# Usage:   bench/p5.sh
# Env:     BENCH_RUNS       timed rounds per place (default 5; one warm-up each)
#          P5_PLACES        colon-separated directories to measure in (default
#                           /dev/shm, then ${TMPDIR:-/var/tmp}: tmpfs, then disk)
#          P5_FILES, P5_MB  size of the generated tree (default 12000 files, 300 MB)
#          FANOUT_BIN, FANOUT_BEFORE_BIN: see bench/lib.sh
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${BENCH_RUNS:-5}
FILES=${P5_FILES:-12000}
MB=${P5_MB:-300}
WORKERS=8
positive_int BENCH_RUNS "$RUNS"
positive_int P5_FILES "$FILES"
positive_int P5_MB "$MB"
IFS=: read -r -a PLACES <<<"${P5_PLACES:-/dev/shm:${TMPDIR:-/var/tmp}}"
resolve_binaries
make_scratch 100

# Per-place scratch directories, removed on exit with $WORK.
DIRS=()
cleanup_places() { if ((${#DIRS[@]})); then rm -rf "${DIRS[@]}"; fi; }
trap 'cleanup_places; if [[ -n ${BENCH_RECORDS_OUT:-} ]]; then cp "$RECORDS" "$BENCH_RECORDS_OUT" || true; fi; rm -rf "$WORK"' EXIT

STAMPS=$WORK/stamps
AGENT=$WORK/agent.sh
mkdir -p "$STAMPS"
cat >"$AGENT" <<SH
#!/usr/bin/env bash
echo "\$EPOCHREALTIME" > "$STAMPS/\$FANOUT_WORKER_ID"
echo done > "result-\$FANOUT_WORKER_ID.txt"
SH
chmod +x "$AGENT"

# make_tree DIR: the generated node_modules under DIR.
make_tree() {
    python3 - "$1" "$FILES" "$MB" <<'PY'
import os, random, sys
root, files, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(29)
nm = os.path.join(root, "node_modules")
block = bytes(rng.randrange(32, 127) for _ in range(1 << 16))
made = [0, 0]

def write(path, size, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        while size > 0:
            f.write(block[: min(size, len(block))])
            size -= len(block)
    os.chmod(path, mode)
    made[0] += 1
    made[1] += os.path.getsize(path)

# Sizes: mostly small sources, some bundles, a few native binaries; scaled to MB.
packages = max(1, files // 10)
plan = []
for p in range(packages):
    scope = f"@scope{p % 7}/" if p % 10 == 0 else ""
    name = f"{scope}pkg-{p:04d}"
    base = os.path.join(nm, name)
    if p % 9 == 4:  # a nested copy, as npm makes for conflicting versions
        base = os.path.join(nm, f"pkg-{(p * 7) % packages:04d}", "node_modules", f"dep-{p:04d}")
    n = rng.randint(4, 16)
    for i in range(n):
        kind = rng.random()
        if i == 0:
            plan.append((os.path.join(base, "package.json"), rng.randint(400, 1500), 0o644))
        elif kind < 0.8:
            sub = rng.choice(["lib", "lib", "lib/util", "types"])
            ext = ".d.ts" if sub == "types" else ".js"
            plan.append((os.path.join(base, sub, f"m{i}{ext}"), int(rng.lognormvariate(8.5, 1.1)), 0o644))
        else:
            plan.append((os.path.join(base, "dist", f"bundle{i}.min.js"), int(rng.lognormvariate(11.5, 0.8)), 0o644))
    if p % 8 == 3:
        plan.append((os.path.join(base, "bin", "cli.js"), 900, 0o755))
    if p % 60 == 7:
        plan.append((os.path.join(base, "build", "Release", "native.node"), 4 << 20, 0o755))
plan = plan[:files]
scale = (mb << 20) / max(1, sum(s for _, s, _ in plan))
for path, size, mode in plan:
    write(path, max(1, int(size * scale)), mode)
# .bin: relative symlinks to the packages' CLIs, as npm makes them.
os.makedirs(os.path.join(nm, ".bin"))
links = 0
for path, _, mode in plan:
    if path.endswith(os.path.join("bin", "cli.js")):
        rel = os.path.relpath(path, os.path.join(nm, ".bin"))
        tool = path.split(os.sep)[-3] if "node_modules" not in path[len(nm):] else None
        if tool:
            os.symlink(rel, os.path.join(nm, ".bin", tool))
            links += 1
print(f"{made[0]} files, {made[1] / 1e6:.0f} MB, {links} .bin symlinks")
PY
}

# listing DIR: every entry under DIR with type, mode, size (files), mtime and target.
listing() {
    (cd "$1" && find . -printf '%y %m %T@ %l ' -a \( -type f -printf '%s' -o -true \) -a -printf ' %p\n' | sort)
}

# --- one run of each side -------------------------------------------------------
cp_side() {
    local place=$1 round=$2 i t0 t1
    for ((i = 1; i <= WORKERS; i++)); do mkdir -p "$P/cp/$i"; done
    t0=$(now)
    for ((i = 1; i <= WORKERS; i++)); do cp -a "$P/repo/node_modules" "$P/cp/$i/"; done
    t1=$(now)
    if [[ $round != warm-up ]]; then
        record "$place: $WORKERS copies, whole [s]" cp "$round" "$(elapsed "$t0" "$t1")"
    fi
    rm -rf "$P/cp"
}

fanout_side() {
    local place=$1 side=$2 bin=$3 round=$4 t0 t1 cpu rc=0 out=$WORK/out.json last wt
    rm -f "$STAMPS"/*
    cpu_mark "$WORK/cpu"
    t0=$(now)
    "$bin" -C "$P/repo" --config "$CFG" run --task "copy" --workers "$WORKERS" \
        --worktree-dir "$P/wt" --quiet --json >"$out" 2>"$WORK/fanout.log" || rc=$?
    t1=$(now)
    cpu_mark "$WORK/cpu.end"
    cpu=$(cpu_diff "$WORK/cpu" "$WORK/cpu.end")
    if ((rc != 0)); then
        cat "$WORK/fanout.log" >&2
        die "$side: fanout run exited $rc"
    fi
    fanout_succeeded "$out" "$WORKERS" || die "$side: not every worker succeeded (see $out)"
    last=$(sort -n "$STAMPS"/* | tail -n 1)
    if [[ $side == fanout ]]; then
        wt=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["results"][0]["worktree_path"])' "$out")
        [[ -x $wt/node_modules/.bin/pkg-0003 ]] || die "fanout: no node_modules/.bin/pkg-0003 in $wt"
        diff <(listing "$P/repo/node_modules") <(listing "$wt/node_modules") >"$WORK/diff" ||
            die "fanout: the copy differs from the source: $(head -5 "$WORK/diff")"
    fi
    if [[ $round != warm-up ]]; then
        record "$place: $WORKERS copies, whole [s]" "$side" "$round" "$(elapsed "$t0" "$t1")"
        record "$place: until the last agent starts [s]" "$side" "$round" "$(elapsed "$t0" "$last")"
        record "$place: CPU time of the run (user+sys) [s]" "$side" "$round" "$cpu"
    fi
    "$bin" -C "$P/repo" --config "$CFG" cleanup --all >/dev/null
    assert_clean "$P/repo" "$side: fanout cleanup --all"
}

run_side() {
    case $2 in
        cp) cp_side "$1" "$3" ;;
        fanout) fanout_side "$1" fanout "$FANOUT" "$3" ;;
        before) fanout_side "$1" before "$FANOUT_BEFORE" "$3" ;;
    esac
}

# --- the benchmark -----------------------------------------------------------------
SIDES=(cp fanout)
if [[ -n $FANOUT_BEFORE ]]; then SIDES+=(before); fi
echo "fanout dependency-tree copy benchmark (P5)"
describe_binaries
echo "  cpus:    $(nproc), load now: $(load1)"
echo "  runs:    $RUNS per side and place, after one warm-up each; sides: ${SIDES[*]}"
for place_dir in "${PLACES[@]}"; do
    P=$(mktemp -d "$place_dir/fanout-p5.XXXXXX")
    DIRS+=("$P")
    place=$(stat -f -c %T "$P")
    git init -q -b main "$P/repo"
    echo "node_modules/" >"$P/repo/.gitignore"
    echo '{"name": "app"}' >"$P/repo/package.json"
    git -C "$P/repo" add -A
    git -C "$P/repo" commit -q -m "bench: app"
    echo
    echo "  $place ($place_dir): $(make_tree "$P/repo")"
    CFG=$P/fanout.yml
    cat >"$CFG" <<YAML
parallel_runs:
  workers: $WORKERS
  agent: trivial
copy: [node_modules/]
agents:
  trivial:
    command: ["$AGENT"]
    writable: ["$STAMPS"]
YAML
    for side in "${SIDES[@]}"; do run_side "$place" "$side" warm-up; done
    for ((r = 1; r <= RUNS; r++)); do
        mapfile -t order < <(rotate "$r" "${SIDES[@]}")
        for side in "${order[@]}"; do run_side "$place" "$side" "$r"; done
    done
    rm -rf "$P"
done
echo
summarize --order cp,fanout,before --ratio fanout/cp --ratio before/cp --ratio fanout/before
echo
echo "  target (issue #29): whole run fanout/cp <= 0.7 on 2 cores, on tmpfs and on disk"
