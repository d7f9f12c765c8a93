#!/usr/bin/env bash
# The GEMM benchmark on the GPU machine: the kernel (bundled bench_gemm example) and cuBLAS
# through torch.matmul, timed the same way in one run, merged into one markdown table.
#
#   Build here:  scripts/gpu-bundle.sh --gpu-only
#   Run there, from the repository root with gpu-bundle/ carried:
#       scripts/bench-gemm.sh [OUTDIR]        (default: $OUT, else bench-out/)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-bench-out}}"
mkdir -p "$out"
bin=gpu-bundle/examples/bench_gemm
[ -x "$bin" ] || { echo "error: $bin is missing: build the bundle with scripts/gpu-bundle.sh" >&2; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$out/clocks.txt"
echo "== kestrel"
"$bin" --out "$out/gemm-kernel.jsonl"
echo "== cuBLAS (torch.matmul)"
python3 scripts/bench_gemm_torch.py --out "$out/gemm-cublas.jsonl"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a "$out/clocks.txt"
python3 scripts/bench_gemm_table.py "$out/gemm-kernel.jsonl" "$out/gemm-cublas.jsonl" | tee "$out/gemm-table.md"
