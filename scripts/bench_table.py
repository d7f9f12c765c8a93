#!/usr/bin/env python3
"""Merges the kernel benchmark (JSON lines from the bench_decode example: every schedule of
every configuration, and the 61-layer chains) and the PyTorch baseline (JSON array from
bench_torch.py) into two markdown tables. Times are medians with (p10-p90) of CUDA-graph
replays.

The first table has one row per configuration: the median of every schedule (split with
128- and 64-row compressed tiles, streamed by 1 to 4 CTAs), then the one the host dispatches with its p10-p90; the bandwidth
and ratios are of that one. The second has the chains: the time per layer of a graph of 61
launches of the dispatched schedule, and its ratio to the single-launch time of that
schedule.

    python3 scripts/bench_table.py DIR [DIR...]

Each DIR holds a kernel.jsonl and a torch.json, as `scripts/bench-gpu.sh [--part K/N] DIR`
writes them: the parts of a run split in several merge into one table, each row's share of
the copy bandwidth taken against the bandwidth its own part measured.
"""

import json
import os
import sys

RECORD_BYTES = {"fp8": 528, "nvfp4": 288}


def spread(row, median="kernel_us", p10="p10_us", p90="p90_us"):
    """`median (p10-p90)` of a row, the median alone where the row has no percentiles, `-`
    where it has no time."""
    if not row or row.get(median) is None:
        return "-"
    if row.get(p10) is None:
        return f"{row[median]:.1f}"
    return f"{row[median]:.1f} ({row[p10]:.1f}-{row[p90]:.1f})"


def ratio(base, us):
    return f"{base / us:.1f}x" if base else "-"


SCHEDULES = ["split", "split64", "splith16", "split64h16", "stream", "stream2", "stream3",
             "stream4", "streamh32", "stream2h32", "stream3h32", "stream4h32"]


def median(row):
    return f"{row['kernel_us']:.1f}" if row else "-"


def configuration_table(configs, baseline):
    # A column per schedule the run timed: `stream2h32`-`stream4h32` are no dispatch
    # candidates, so bench_decode times them only when asked to.
    schedules = [s for s in SCHEDULES if any(s in runs for runs in configs.values())]
    columns = " | ".join(f"{s} us" for s in schedules)
    print(f"| heads | NE | extra | s_q | {columns} | dispatched | its us | KV GB/s | of copy "
          "| PyTorch eager us | PyTorch graph us | vs eager | vs graph |")
    print("|---:|---:|:---|---:|" + "---:|" * len(schedules) + ":---|---:|---:|---:|---:|---:|"
          "---:|---:|")
    for (heads, ne, record, s_q), runs in configs.items():
        chosen = next((r for r in runs.values() if r.get("dispatched", True)), None)
        if chosen is None:
            continue
        t = baseline.get((heads, ne, RECORD_BYTES[record], s_q), {})
        us = chosen["kernel_us"]
        gbs = chosen["kv_bytes"] / (us * 1e-6) / 1e9
        copy = chosen["copy_gbs"]
        times = " | ".join(median(runs.get(s)) for s in schedules)
        print(
            f"| {heads} | {ne} | {record} | {s_q} | {times} | "
            f"{chosen.get('schedule', 'split')} | {spread(chosen)} | {gbs:.0f} | "
            f"{100 * gbs / copy:.1f}% | {spread(t, 'eager_us')} | "
            f"{spread(t, 'graph_us', 'graph_p10_us', 'graph_p90_us')} | "
            f"{ratio(t.get('eager_us'), us)} | {ratio(t.get('graph_us'), us)} |"
        )


def chain_table(chains, configs):
    layers = chains[0]["chain_layers"]
    print(f"\n{layers}-layer chains: one graph of {layers} PDL launches of the dispatched "
          f"schedule, each layer on its own KV; time per layer = graph time / {layers}.\n")
    print("| heads | NE | extra | s_q | schedule | per layer us | single launch us | of single |")
    print("|---:|---:|:---|---:|:---|---:|---:|---:|")
    for c in chains:
        config = (c["heads"], c["ne"], c["record"], c["s_q"])
        single = configs.get(config, {}).get(c["schedule"])
        of_single = f"{c['kernel_us'] / single['kernel_us']:.2f}x" if single else "-"
        print(f"| {c['heads']} | {c['ne']} | {c['record']} | {c['s_q']} | {c['schedule']} | "
              f"{spread(c)} | {spread(single)} | {of_single} |")


def read_parts(dirs):
    """The kernel rows and the PyTorch rows of every part's directory."""
    kernel, torch = [], []
    for d in dirs:
        with open(os.path.join(d, "kernel.jsonl")) as f:
            kernel += [json.loads(line) for line in f if line.strip()]
        with open(os.path.join(d, "torch.json")) as f:
            torch += json.load(f)
    return kernel, torch


def main(dirs):
    kernel, torch = read_parts(dirs)
    baseline = {(t["heads"], t["ne"], t["record"], t["s_q"]): t for t in torch}
    # bench_decode's order (fp8 before NVFP4), whichever part a row came from.
    kernel.sort(key=lambda k: (k["heads"], k["ne"], k["record"] != "fp8", k["s_q"]))
    configs, chains = {}, []
    for k in kernel:
        if "chain_layers" in k:
            chains.append(k)
            continue
        config = (k["heads"], k["ne"], k["record"], k["s_q"])
        configs.setdefault(config, {})[k.get("schedule", "split")] = k
    copies = ", ".join(f"{c:.0f}" for c in dict.fromkeys(k["copy_gbs"] for k in kernel))
    print(f"Copy bandwidth measured in the same run: {copies} GB/s (bytes read + written; "
          "one figure a part).\n")
    configuration_table(configs, baseline)
    if chains:
        chain_table(chains, configs)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
