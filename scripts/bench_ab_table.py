#!/usr/bin/env python3
"""The table of a quick A/B (scripts/bench-ab.sh): one row per configuration and schedule,
the range of each build's medians over the rounds, and the ratio of their means (new /
base). Below 1 the new build is faster. A header line gives the GPU and the range of the
copy bandwidth the runs measured.

    python3 scripts/bench_ab_table.py base.jsonl new.jsonl [--gpu gpu.txt]
"""

import json
import sys


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def config(row):
    return (row["heads"], row["ne"], row["record"], row["s_q"], row["schedule"])


def medians(rows_):
    out = {}
    for row in rows_:
        out.setdefault(config(row), []).append(row["kernel_us"])
    return out


def span(values):
    return f"{min(values):.1f}-{max(values):.1f}"


def table(base, new, gpu=None):
    lines = []
    copies = [r["copy_gbs"] for r in base + new]
    if gpu or copies:
        parts = [gpu.strip()] if gpu else []
        if copies:
            parts.append(f"copy bandwidth {min(copies):.0f}-{max(copies):.0f} GB/s")
        lines.append("; ".join(parts))
        lines.append("")
    lines.append("| heads | NE | extra | s_q | schedule | base us | new us | ratio |")
    lines.append("|---:|---:|:---|---:|:---|---:|---:|---:|")
    base_us, new_us = medians(base), medians(new)
    for key in base_us:
        if key not in new_us:
            continue
        b, n = base_us[key], new_us[key]
        ratio = (sum(n) / len(n)) / (sum(b) / len(b))
        heads, ne, record, s_q, schedule = key
        lines.append(
            f"| {heads} | {ne} | {record} | {s_q} | {schedule} | {span(b)} | {span(n)} | "
            f"{ratio:.3f}x |"
        )
    missing = [k for k in list(base_us) + list(new_us) if (k in base_us) != (k in new_us)]
    for key in missing:
        lines.append(f"(only one build timed {key})")
    return "\n".join(lines)


def main(argv):
    args = argv[1:]
    gpu = None
    if "--gpu" in args:
        i = args.index("--gpu")
        try:
            with open(args[i + 1]) as f:
                gpu = f.read()
        except OSError:
            gpu = None
        del args[i : i + 2]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print(table(rows(args[0]), rows(args[1]), gpu))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
