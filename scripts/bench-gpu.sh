#!/usr/bin/env bash
# The decode benchmark on the GPU machine: the kernel (bundled bench_decode example: CUDA-graph
# replays behind a GPU spin, every schedule with its output checked against the f64
# reference first, and the 61-layer chains; a wrong output fails the run), the copy bandwidth and
# the PyTorch baseline (eager, and CUDA-graphed timed the same way) in one run, merged into
# markdown tables with the ratios (one row per configuration, then the chains).
#
#   Build here:  scripts/gpu-bundle.sh
#   Run there, from the repository root with gpu-bundle/ carried:
#       scripts/bench-gpu.sh [OUTDIR]        (default: $OUT, else bench-out/)
#
# Writes OUTDIR/kernel.jsonl, OUTDIR/torch.json, OUTDIR/torch-check.txt and OUTDIR/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-bench-out}}"
mkdir -p "$out"
bin=gpu-bundle/examples/bench_decode
[ -x "$bin" ] || { echo "error: $bin is missing: build the bundle with scripts/gpu-bundle.sh" >&2; exit 1; }

echo "== the PyTorch baseline against the reference (two case files written by the main job)"
for key in h16_nk128_ne512_fp8_p64x16_sm90a h32_nk128_ne1024_nvfp4_p64x16_sm90a; do
    gpu-bundle/examples/decode --key "$key" --tokens 8 --write-case "$out/$key.safetensors" >/dev/null
done
python3 scripts/bench_torch.py check "$out"/*.safetensors --device cuda | tee "$out/torch-check.txt"

echo "== kernel"
"$bin" --out "$out/kernel.jsonl"
echo "== PyTorch"
python3 scripts/bench_torch.py bench --device cuda --s-q 1,32,64,128,512 --out "$out/torch.json"
python3 scripts/bench_table.py "$out/kernel.jsonl" "$out/torch.json" | tee "$out/table.md"
