#!/usr/bin/env bash
# bench/all.sh — every issue #14 benchmark in one go, then each goal next to its figure.
#
# Runs bench/startup.sh, memory.sh, worktrees.sh, bigrepo.sh (their own output as
# they go) and `cargo bench --bench publish`, then prints one line per goal of issue
# #14: the figure (median; ratios are median over median), the goal, and the load
# average seen. Wall-time figures are only comparable on a quiet machine; CPU time
# and peak RSS are printed too, as they hold under load.
#
# A benchmark, not a test: it never fails on a figure, only when something breaks.
#
# Usage:   bench/all.sh
# Env:     BENCH_SKIP   space-separated names to leave out (startup memory
#                       worktrees bigrepo publish)
#          FANOUT_BIN, FANOUT_BEFORE_BIN, BENCH_TMP: see bench/lib.sh (BENCH_RUNS
#          applies to every script; leave it unset for each one's default)
set -euo pipefail
shopt -s inherit_errexit
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)

OUT=$(mktemp -d "${TMPDIR:-/tmp}/fanout-bench-all.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
skipped() { [[ " ${BENCH_SKIP:-} " == *" $1 "* ]]; }

if [[ -z ${FANOUT_BIN:-} ]]; then
    (cd "$ROOT" && cargo build --release --locked --quiet)
    FANOUT_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/fanout
    case $FANOUT_BIN in /*) ;; *) FANOUT_BIN=$ROOT/$FANOUT_BIN ;; esac
fi
export FANOUT_BIN

echo "issue #14 benchmarks — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uptime)"
echo
for script in startup memory worktrees bigrepo; do
    if skipped "$script"; then continue; fi
    BENCH_RECORDS_OUT=$OUT/$script.tsv "$BENCH_DIR/$script.sh"
    echo
done
if ! skipped publish; then
    (cd "$ROOT" && cargo bench --locked --bench publish) | tee "$OUT/publish.txt"
    echo
fi

echo "issue #14 goals (load now: $(uptime | sed 's/.*load average: //'))"
python3 - "$OUT" <<'PY'
import os, re, statistics, sys
out = sys.argv[1]

def records(name):
    path = os.path.join(out, f"{name}.tsv")
    data = {}
    if not os.path.exists(path):
        return None
    for line in open(path):
        metric, side, _, value, load = line.rstrip("\n").split("\t")
        data.setdefault(metric, {}).setdefault(side, []).append((float(value), float(load)))
    return data

def med(data, metric, side):
    for m, sides in data.items():
        if m.startswith(metric) and side in sides:
            vals = [v for v, _ in sides[side]]
            loads = [l for _, l in sides[side]]
            return statistics.median(vals), max(loads)
    return None, None

def line(goal, figure, target, ok, load, extra=""):
    mark = "n/a " if ok is None else ("met " if ok else "NOT ")
    load = f"load ≤{load:.1f}" if load is not None else ""
    print(f"  {mark} {goal:<52} {figure:>14}  (goal {target}) {load} {extra}".rstrip())

def ratio(data, metric, a, b, goal, limit, fmt="{:.2f}×"):
    if data is None:
        return line(goal, "skipped", f"≤ {limit}", None, None)
    x, la = med(data, metric, a)
    y, lb = med(data, metric, b)
    if x is None or y is None:
        return line(goal, "missing", f"≤ {limit}", None, None)
    r = x / y
    line(goal, fmt.format(r), f"≤ {limit}", r <= limit, max(la, lb), f"[{a} {x:.3g}, {b} {y:.3g}]")

def value(data, metric, side, goal, limit, unit):
    if data is None:
        return line(goal, "skipped", f"≤ {limit} {unit}", None, None)
    x, l = med(data, metric, side)
    if x is None:
        return line(goal, "missing", f"≤ {limit} {unit}", None, None)
    line(goal, f"{x:.1f} {unit}", f"≤ {limit} {unit}", x <= limit, l)

big = records("bigrepo")
ratio(big, "(a) worktree phase", "fanout", "git", "big repo: worktree phase, 8 worktrees / git", 0.6)
ratio(big, "(b) whole run", "fanout", "git", "big repo: whole run, 0-s agent / git", 0.7)
ratio(big, "(c) one checkout: peak RSS", "fanout", "git", "big repo: one checkout, peak RSS / git's", 1.0)
ratio(big, "(a) CPU time", "fanout", "git", "big repo: 8-worktree run CPU / git's (no goal)", float("inf"))
mem = records("memory")
if mem is not None:
    counts = sorted({int(re.search(r"(\d+) tasks", m).group(1)) for m in mem})
    lo, hi = counts[0], counts[-1]
    value(mem, f"peak RSS, {lo} tasks", "fanout", f"memory: peak RSS, 10 workers, {lo} tasks", 20, "MB")
    a, la = med(mem, f"peak RSS, {hi} tasks", "fanout")
    b, lb = med(mem, f"peak RSS, {lo} tasks", "fanout")
    if a and b:
        line(f"memory: peak RSS {hi} tasks / {lo} tasks", f"{a / b:.2f}×", "≤ 1.10", a / b <= 1.10,
             max(la, lb), f"[{a:.1f} / {b:.1f} MB]")
else:
    line("memory", "skipped", "", None, None)
st = records("startup")
value(st, "fanout --version [ms]", "fanout", "startup: fanout --version", 10, "ms")
value(st, "fanout plan [ms]", "fanout", "startup: fanout plan", 10, "ms")
value(st, "one-task run", "fanout", "startup: one-task run (a guard, issue #30)", 20, "ms")
for m in ("fanout --version, CPU", "fanout plan, CPU", "one-task run, 0-second agent, tiny repo, CPU"):
    if st is not None:
        x, l = med(st, m, "fanout")
        if x is not None:
            line(f"  {m.replace(', 0-second agent, tiny repo', '')} time", f"{x:.1f} ms", "as above", None, l)
wt = records("worktrees")
ratio(wt, "whole run", "fanout", "git", "P1: 10 workers, 1-s agent / bash pattern", 0.7)
pub = os.path.join(out, "publish.txt")
if os.path.exists(pub):
    text = open(pub).read()
    m = re.search(r"shortest ([\d.]+) ms; (\d+) of (\d+) shorter than the pace", text)
    p = re.search(r"pacing (\d+) ms", text)
    if m and p:
        line("publish: gaps between mutations ≥ the pace", f"{m.group(2)} of {m.group(3)} short",
             "0 short", m.group(2) == "0", None, f"[shortest {m.group(1)} ms, pace {p.group(1)} ms]")
else:
    line("publish: gaps between mutations ≥ the pace", "skipped", "0 short", None, None)
PY
