#!/usr/bin/env python3
"""Merges the GEMM benchmark's kernel and cuBLAS JSON lines into one markdown table."""
import json
import sys


def load(path):
    with open(path) as f:
        return {(r["m"], r["n"], r["k"]): r for r in map(json.loads, f)}


def main():
    ours, cublas = load(sys.argv[1]), load(sys.argv[2])
    print("| M | N | K | kestrel us (p10-p90) | kestrel TFLOP/s | cuBLAS us (p10-p90) | cuBLAS TFLOP/s | of cuBLAS |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key, r in ours.items():
        c = cublas[key]
        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {r['median_us']:.1f} ({r['p10_us']:.1f}-{r['p90_us']:.1f}) "
            f"| {r['tflops']:.0f} | {c['median_us']:.1f} ({c['p10_us']:.1f}-{c['p90_us']:.1f}) "
            f"| {c['tflops']:.0f} | {100 * r['tflops'] / c['tflops']:.0f}% |"
        )


if __name__ == "__main__":
    main()
