#!/usr/bin/env bash
# The decode benchmark on the GPU machine: the kernel (bundled bench_decode example: CUDA-graph
# replays behind a GPU spin, every schedule with its output checked against the f64
# reference first, and the 61-layer chains; a wrong output fails the run), the copy bandwidth and
# the PyTorch baseline (eager, and CUDA-graphed timed the same way) in one run, merged into
# markdown tables with the ratios (one row per configuration, then the chains).
#
#   Build here:  scripts/gpu-bundle.sh
#   Run there, from the repository root with gpu-bundle/ carried:
#       scripts/bench-gpu.sh [--part K/N] [OUTDIR]   (default: $OUT, else bench-out/)
#
# Writes OUTDIR/kernel.jsonl, OUTDIR/torch.json, OUTDIR/torch-check.txt and OUTDIR/table.md.
# `--part K/N` times every N-th configuration from the K-th, kernel and PyTorch alike, for a
# run longer than one sitting on the GPU machine allows (24 of the 40 configurations took 8
# minutes on an H100); `python3 scripts/bench_table.py DIR1 DIR2 ...` merges the parts'
# directories into one table.
set -euo pipefail
cd "$(dirname "$0")/.."
part=1/1
if [ "${1:-}" = --part ]; then
    [ -n "${2:-}" ] || { echo "error: --part needs K/N, e.g. 1/2" >&2; exit 2; }
    part=$2
    shift 2
fi
out="${1:-${OUT:-bench-out}}"
mkdir -p "$out"
bin=gpu-bundle/examples/bench_decode
[ -x "$bin" ] || { echo "error: $bin is missing: build the bundle with scripts/gpu-bundle.sh" >&2; exit 1; }

echo "== the PyTorch baseline against the reference (two case files written by the main job)"
for key in h16_nk128_ne512_fp8_p64x16_sm90a h32_nk128_ne1024_nvfp4_p64x16_sm90a; do
    gpu-bundle/examples/decode --key "$key" --tokens 8 --write-case "$out/$key.safetensors" >/dev/null
done
python3 scripts/bench_torch.py check "$out"/*.safetensors --device cuda | tee "$out/torch-check.txt"

echo "== kernel (part $part)"
"$bin" --part "$part" --out "$out/kernel.jsonl"
echo "== PyTorch (part $part)"
python3 scripts/bench_torch.py bench --device cuda --s-q 1,32,64,128,512 --part "$part" \
    --out "$out/torch.json"
python3 scripts/bench_table.py "$out" | tee "$out/table.md"
