#!/usr/bin/env python3
"""Merges the kernel benchmark (JSON lines from the bench_decode example) and the PyTorch
baseline (JSON array from bench_torch.py) into one markdown table with the ratios.

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
    print(f"Copy bandwidth measured in the same run: {copy:.0f} GB/s (bytes read + written).\n")
    print("| heads | NE | extra | s_q | kernel us | KV GB/s | of copy | PyTorch eager us | PyTorch graph us | vs eager | vs graph |")
    print("|---:|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in kernel:
        t = baseline.get((k["heads"], k["ne"], record_bytes[k["record"]], k["s_q"]), {})
        gbs = k["kv_bytes"] / (k["kernel_us"] * 1e-6) / 1e9
        eager, graph = t.get("eager_us"), t.get("graph_us")
        ratio = lambda base: f"{base / k['kernel_us']:.1f}x" if base else "-"
        num = lambda v: f"{v:.1f}" if v else "-"
        print(
            f"| {k['heads']} | {k['ne']} | {k['record']} | {k['s_q']} | {k['kernel_us']:.1f} | "
            f"{gbs:.0f} | {100 * gbs / copy:.1f}% | {num(eager)} | {num(graph)} | "
            f"{ratio(eager)} | {ratio(graph)} |"
        )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
