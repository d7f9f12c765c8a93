#!/usr/bin/env python3
"""cuBLAS through torch.matmul for the GEMM benchmark's shapes, timed like the kernel:
C = A @ B^T (bf16, A [M, K], B [N, K] row-major), each timed call a CUDA-graph replay queued
behind a short GPU spin (torch.cuda._sleep), median and p10-p90. Writes JSON lines."""
import argparse
import json

import torch

SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (128, 8192, 8192)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    rows = []
    for m, n, k in SHAPES:
        a = (torch.randint(-8, 9, (m, k), device="cuda") / 4).to(torch.bfloat16)
        b = (torch.randint(-8, 9, (n, k), device="cuda") / 4).to(torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        bt = b.t()
        for _ in range(3):
            torch.matmul(a, bt, out=c)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            torch.matmul(a, bt, out=c)
        times = []
        for i in range(args.reps + 3):
            torch.cuda._sleep(40000)
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            e.synchronize()
            if i >= 3:
                times.append(s.elapsed_time(e) * 1e3)
        times.sort()
        pick = lambda p: times[round((len(times) - 1) * p)]
        med = pick(0.5)
        tflops = 2 * m * n * k / (med * 1e-6) / 1e12
        row = dict(m=m, n=n, k=k, median_us=med, p10_us=pick(0.1), p90_us=pick(0.9), tflops=tflops)
        print(row, flush=True)
        rows.append(row)
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
