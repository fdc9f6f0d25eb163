#!/usr/bin/env bash
# bench/rss_parts.sh — what fanout's peak RSS is made of, for bench/memory.sh's run.
#
# The same run as bench/memory.sh (10 workers at a time on a 5,000-file repository,
# a 0-second agent), once per task count, while /proc/<pid>/smaps is read every
# 10 ms. At the sample with the highest total it prints the resident kB of each
# part: fanout's code (.text), its read-only data (.rodata, .eh_frame), the main
# heap, other anonymous memory (thread stacks, the other threads' malloc arenas),
# the shared libraries; and the number of threads. A sampled peak can miss a peak
# shorter than 10 ms, so it may be below /usr/bin/time's figure.
#
# A diagnostic, not a benchmark: it never fails on a figure.
#
# Usage:   bench/rss_parts.sh
# Env:     BENCH_TASKS  space-separated task counts (default "10 200")
#          FANOUT_BIN, BENCH_TMP: see bench/lib.sh
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

read -r -a TASK_COUNTS <<<"${BENCH_TASKS:-10 200}"
for n in "${TASK_COUNTS[@]}"; do positive_int BENCH_TASKS "$n"; done
resolve_binaries
make_scratch 6000

REPO=$WORK/repo
make_small_repo "$REPO" 50 100
cat >"$WORK/agent.sh" <<'SH'
#!/bin/sh
echo "$1" > "result-$FANOUT_WORKER_ID.txt"
SH
chmod +x "$WORK/agent.sh"

echo "fanout peak RSS by part"
describe_binaries
describe_scratch
for n in "${TASK_COUNTS[@]}"; do
    {
        echo "parallel_runs:"
        echo "  workers: 10"
        echo "  agent: trivial"
        echo "agents:"
        echo "  trivial:"
        echo "    command: [\"$WORK/agent.sh\", \"{task}\"]"
        echo "tasks:"
        for ((i = 1; i <= n; i++)); do echo "  - task number $i"; done
    } >"$WORK/fanout-$n.yml"
    echo
    echo "  $n tasks:"
    python3 - "$FANOUT" "$n" -C "$REPO" --config "$WORK/fanout-$n.yml" run \
        --worktree-dir "$WORK/wt" --quiet --json <<'PY'
import collections, os, subprocess, sys, time

binary, n, args = sys.argv[1], sys.argv[2], sys.argv[3:]
child = subprocess.Popen([binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def parts(pid):
    """Resident kB by part, and the thread count, from /proc/<pid>."""
    with open(f"/proc/{pid}/smaps") as f:
        lines = f.read().splitlines()
    threads = len(os.listdir(f"/proc/{pid}/task"))
    kb, part = collections.Counter(), None
    for line in lines:
        fields = line.split()
        if len(fields) >= 5 and "-" in fields[0] and ":" in fields[3]:
            name = fields[5] if len(fields) > 5 else ""
            if name == binary:
                part = "fanout code" if "x" in fields[1] else "fanout data"
            elif name == "[heap]":
                part = "main heap"
            elif name in ("", "[stack]"):
                part = "anonymous (stacks, arenas)"
            elif ".so" in name:
                part = "shared libraries"
            else:
                part = "other"
        elif fields and fields[0] == "Rss:":
            kb[part] += int(fields[1])
    return kb, threads


best = (collections.Counter(), 0)
while child.poll() is None:
    try:
        kb, threads = parts(child.pid)
    except (FileNotFoundError, ProcessLookupError):
        break
    if sum(kb.values()) > sum(best[0].values()):
        best = (kb, threads)
    time.sleep(0.01)
err = child.communicate()[1]
if child.returncode != 0:
    sys.stderr.write(err.decode(errors="replace"))
    sys.exit(f"bench: fanout run ({n} tasks) exited {child.returncode}")
kb, threads = best
print(f"    sampled peak {sum(kb.values())} kB, {threads} threads")
for part, size in kb.most_common():
    print(f"    {size:>8} kB  {part}")
PY
    "$FANOUT" -C "$REPO" --config "$WORK/fanout-$n.yml" cleanup --all >/dev/null
    assert_clean "$REPO" "fanout cleanup --all"
done
