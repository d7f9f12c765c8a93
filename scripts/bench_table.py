#!/usr/bin/env python3
"""Merges the kernel benchmark (JSON lines from the bench_decode example: both schedules of
every configuration) and the PyTorch baseline (JSON array from bench_torch.py) into one
markdown table with the ratios. The ratios are of the schedule the host dispatches.

    python3 scripts/bench_table.py kernel.jsonl torch.json
"""

import json
import sys


def main(kernel_path, torch_path):
    kernel = [json.loads(line) for line in open(kernel_path) if line.strip()]
    torch = json.load(open(torch_path))
    record_bytes = {"fp8": 528, "nvfp4": 288}
    baseline = {(t["heads"], t["ne"], t["record"], t["s_q"]): t for t in torch}
    copy = kernel[0]["copy_gbs"] if kernel else float("nan")
    configs = {}
    for k in kernel:
        config = (k["heads"], k["ne"], k["record"], k["s_q"])
        configs.setdefault(config, {})[k.get("schedule", "split")] = k
    print(f"Copy bandwidth measured in the same run: {copy:.0f} GB/s (bytes read + written).\n")
    print("| heads | NE | extra | s_q | split us | streamed us | dispatched | KV GB/s | of copy | PyTorch eager us | PyTorch graph us | vs eager | vs graph |")
    print("|---:|---:|:---|---:|---:|---:|:---|---:|---:|---:|---:|---:|---:|")
    num = lambda v: f"{v:.1f}" if v else "-"
    for (heads, ne, record, s_q), runs in configs.items():
        chosen = next((r for r in runs.values() if r.get("dispatched", True)), None)
        if chosen is None:
            continue
        t = baseline.get((heads, ne, record_bytes[record], s_q), {})
        us = chosen["kernel_us"]
        gbs = chosen["kv_bytes"] / (us * 1e-6) / 1e9
        eager, graph = t.get("eager_us"), t.get("graph_us")
        ratio = lambda base: f"{base / us:.1f}x" if base else "-"
        split = runs.get("split", {}).get("kernel_us")
        streamed = runs.get("stream", {}).get("kernel_us")
        print(
            f"| {heads} | {ne} | {record} | {s_q} | {num(split)} | {num(streamed)} | "
            f"{chosen.get('schedule', 'split')} | {gbs:.0f} | {100 * gbs / copy:.1f}% | "
            f"{num(eager)} | {num(graph)} | {ratio(eager)} | {ratio(graph)} |"
        )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
