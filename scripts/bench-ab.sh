#!/usr/bin/env bash
# A quick A/B of two builds of the decode kernel on the GPU machine, the method of the
# per-change tables of docs/performance.md: each configuration's schedule timed by both
# builds' bench_decode (`--quick`: 5 CUDA-graph replays behind a GPU spin, cold KV),
# interleaved and in rounds (the side that goes first alternates), in one run; then one
# markdown row per configuration with the range of each build's medians and the ratio of
# their means (new / base: below 1 the new build is faster). A build whose bench_decode
# checks outputs (d0cda9f on) fails the A/B on a wrong one.
#
#   Build each side here (the baseline checked out, then the change):
#       cargo build --release --example bench_decode
#       mkdir -p ab && cp target/release/examples/bench_decode ab/base   (then ab/new)
#   (add ab/ to .git/info/exclude so that it travels as an untracked file, or carry it)
#   Run there, from the repository root:
#       scripts/bench-ab.sh BASE NEW [--rounds N] [--out DIR] HEADS,NE,RECORD,S_Q:SCHEDULE ...
#   e.g. scripts/bench-ab.sh ab/base ab/new 16,512,fp8,512:stream 16,512,fp8,32:stream3
#
# BASE and NEW are bench_decode binaries. Writes DIR/base.jsonl and DIR/new.jsonl
# (bench_decode's rows, tagged with their round), DIR/gpu.txt and DIR/ab.md; DIR defaults
# to $OUT, else bench-ab-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/bench-ab.sh BASE NEW [--rounds N] [--out DIR] HEADS,NE,RECORD,S_Q:SCHEDULE ..."
[ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
base="$1"; new="$2"; shift 2
rounds=2
out="${OUT:-bench-ab-out}"
configs=()
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *:*) configs+=("$1"); shift ;;
        *) echo "error: $1 is not HEADS,NE,RECORD,S_Q:SCHEDULE" >&2; echo "$usage" >&2; exit 2 ;;
    esac
done
[ ${#configs[@]} -gt 0 ] || { echo "error: give at least one configuration" >&2; exit 2; }
for bin in "$base" "$new"; do
    [ -x "$bin" ] || { echo "error: $bin is not an executable bench_decode: cargo build --release --example bench_decode, and copy target/release/examples/bench_decode" >&2; exit 1; }
done
mkdir -p "$out"
: > "$out/base.jsonl"; : > "$out/new.jsonl"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>/dev/null || true
run_one() {  # side-name binary config round
    local tmp; tmp="$(mktemp)"
    "$2" --quick --no-chain --only "${3%:*}" --schedule "${3#*:}" --out "$tmp" >/dev/null
    sed "s/^{/{\"round\":$4,/" "$tmp" >> "$out/$1.jsonl"
    rm -f "$tmp"
}
for round in $(seq 1 "$rounds"); do
    for config in "${configs[@]}"; do
        # Alternate which side goes first, so that neither always runs on a warmer GPU.
        if [ $((round % 2)) -eq 1 ]; then
            run_one base "$base" "$config" "$round"; run_one new "$new" "$config" "$round"
        else
            run_one new "$new" "$config" "$round"; run_one base "$base" "$config" "$round"
        fi
    done
done
python3 scripts/bench_ab_table.py "$out/base.jsonl" "$out/new.jsonl" --gpu "$out/gpu.txt" | tee "$out/ab.md"
