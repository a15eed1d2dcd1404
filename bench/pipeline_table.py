#!/usr/bin/env python3
"""Prints make bench-pipeline's table from the stage log (bench/stage-timer.sh).

    pipeline_table.py STAGES.jsonl PIPELINE_WALL_SECONDS

Per stage: wall time (as the stage timer saw it), the tool's phases (start-up, read, hash,
compute, write, other inside the tool) and the rest, exit: the wall time the tool's own
clock did not see (process teardown, the dynamic loader before /proc's start time).
"""
import json
import sys

PHASES = ["startup", "read", "hash", "compute", "write", "other"]


def main():
    stages = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    wall_total = float(sys.argv[2])
    head = ["stage", "wall s"] + [p for p in PHASES] + ["exit"]
    rows, sums = [], [0.0] * (len(head) - 1)
    for s in stages:
        phases = (s.get("summary") or {}).get("phases") or {}
        vals = [s["wall"]] + [phases.get(p) for p in PHASES]
        vals.append(s["wall"] - phases["total"] if "total" in phases else None)
        rows.append([s["stage"]] + vals)
        for i, v in enumerate(vals):
            sums[i] += v or 0.0
    rows.append(["sum of stages"] + sums)
    rows.append(["make overhead", wall_total - sums[0]] + [None] * (len(head) - 2))
    rows.append(["pipeline", wall_total] + [None] * (len(head) - 2))
    fmt = lambda v: "" if v is None else (v if isinstance(v, str) else "%.2f" % v)
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(fmt(v) for v in r) + " |")


if __name__ == "__main__":
    main()
