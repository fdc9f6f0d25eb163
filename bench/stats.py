#!/usr/bin/env python3
"""Summarise the measurements a bench/*.sh script recorded.

Input: a file of tab-separated records `metric  side  round  value  load1`, one per
measurement, written by `record` in bench/lib.sh. For every metric, in the order
first seen: each side's median and min-max over its runs, the load average seen
during them, then each requested ratio A/B twice: median over median, and the
median (min-max) of the per-round ratios (A and B measured in the same round,
back to back, so a burst of load from elsewhere hits both).

Usage: stats.py RECORDS [--order A,B,...] [--ratio A/B]...
(--order: the order sides are listed in; others follow in the order first seen.)
"""

import statistics
import sys
from collections import OrderedDict


def fmt(v):
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def main(argv):
    if not argv:
        sys.exit(__doc__)
    path, rest = argv[0], argv[1:]
    ratios, order = [], []
    while rest:
        flag, value, rest = rest[0], rest[1] if len(rest) > 1 else "", rest[2:]
        if flag == "--order":
            order = value.split(",")
        elif flag == "--ratio" and "/" in value:
            ratios.append(tuple(value.split("/", 1)))
        else:
            sys.exit(f"stats.py: expected --order A,B or --ratio A/B, got {flag} {value}")

    data = OrderedDict()  # metric -> side -> {round: value}
    loads = {}  # (metric, side) -> [load]
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 5:
                sys.exit(f"{path}:{n}: expected 5 tab-separated fields, got {len(parts)}")
            metric, side, rnd, value, load = parts
            data.setdefault(metric, OrderedDict()).setdefault(side, {})[rnd] = float(value)
            loads.setdefault((metric, side), []).append(float(load))

    rank = {side: i for i, side in enumerate(order)}
    for metric, sides in data.items():
        sides = OrderedDict(sorted(sides.items(), key=lambda kv: rank.get(kv[0], len(rank))))
        print(f"  {metric}")
        width = max(len(s) for s in sides)
        for side, runs in sides.items():
            vals = list(runs.values())
            ld = loads[(metric, side)]
            print(
                f"    {side:<{width}}  median {fmt(statistics.median(vals)):>7}"
                f"   min-max {fmt(min(vals))}-{fmt(max(vals))}"
                f"   n={len(vals)}   load {min(ld):.2f}-{max(ld):.2f}"
            )
        for a, b in ratios:
            if a not in sides or b not in sides:
                continue
            ma = statistics.median(sides[a].values())
            mb = statistics.median(sides[b].values())
            common = [r for r in sides[a] if r in sides[b] and sides[b][r] != 0]
            per = [sides[a][r] / sides[b][r] for r in common]
            line = f"    ratio {a}/{b} = {ma / mb:.2f}" if mb else f"    ratio {a}/{b} = n/a"
            if per:
                line += (
                    f"   (per-round median {statistics.median(per):.2f},"
                    f" min-max {min(per):.2f}-{max(per):.2f})"
                )
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
