#!/usr/bin/env bash
# The project's test command (README "Run the tests"; CI runs exactly this).
#
# Installs ptxas from the PyPI package nvidia-cuda-nvcc into target/tools when none is
# found, then checks formatting and lints and runs every test. Snapshots must match (no
# new snapshot is written) and every PTX snapshot must assemble: a missing ptxas fails.
set -euo pipefail
cd "$(dirname "$0")/.."

find_ptxas() {
    if [ -n "${KESTREL_PTXAS:-}" ] && [ -x "$KESTREL_PTXAS" ]; then echo "$KESTREL_PTXAS"; return; fi
    if command -v ptxas >/dev/null 2>&1; then command -v ptxas; return; fi
    find target/tools/py -name ptxas -type f 2>/dev/null | head -n 1 || true
}

PTXAS="$(find_ptxas)"
if [ -z "$PTXAS" ]; then
    echo "ptxas not found: installing nvidia-cuda-nvcc into target/tools/py" >&2
    mkdir -p target/tools
    python3 -m venv target/tools/py
    # Pinned: the resource table in the kernel docs records this release's register counts.
    target/tools/py/bin/pip install --quiet --disable-pip-version-check nvidia-cuda-nvcc==13.5.37
    PTXAS="$(find_ptxas)"
fi
[ -n "$PTXAS" ] || { echo "error: could not install ptxas (pip install nvidia-cuda-nvcc)" >&2; exit 1; }
export KESTREL_PTXAS="$(realpath "$PTXAS")"
export KESTREL_REQUIRE_PTXAS=1
# The ptxas of the GPU machines' drivers (CUDA 13.0), which degrades code the pinned one
# takes silently: every sm_90a snapshot must assemble under it too (tests/ptxas.rs).
DRIVER_PTXAS="${KESTREL_DRIVER_PTXAS:-$(find target/tools/py-driver -name ptxas -type f 2>/dev/null | head -n 1 || true)}"
if [ -z "$DRIVER_PTXAS" ]; then
    echo "installing the drivers' ptxas (nvidia-cuda-nvcc 13.0) into target/tools/py-driver" >&2
    python3 -m venv target/tools/py-driver
    target/tools/py-driver/bin/pip install --quiet --disable-pip-version-check nvidia-cuda-nvcc==13.0.88
    DRIVER_PTXAS="$(find target/tools/py-driver -name ptxas -type f | head -n 1)"
fi
[ -n "$DRIVER_PTXAS" ] || { echo "error: could not install the drivers' ptxas (nvidia-cuda-nvcc==13.0.88)" >&2; exit 1; }
export KESTREL_DRIVER_PTXAS="$(realpath "$DRIVER_PTXAS")"
export INSTA_UPDATE=no
echo "ptxas: $("$KESTREL_PTXAS" --version | tail -n 1); the drivers': $("$KESTREL_DRIVER_PTXAS" --version | tail -n 1)"

cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace "$@"
# The API docs build without warnings. Links from public docs to private modules (kernel.rs
# names its `mma` stages that way) are allowed: they are for readers of the source.
RUSTDOCFLAGS="-D warnings -A rustdoc::private_intra_doc_links" cargo doc --workspace --no-deps --quiet
# The build an engine gets when it links libcuda at build time (cudarc's dynamic-linking,
# as candle does) must compile too.
cargo clippy --quiet -p kernels --features dynamic-linking -- -D warnings

# The main job on this machine (the CPU interpreter when there is no GPU): trace, emit,
# assemble, run, check; its last line is a JSON object with "ok".
cargo run --quiet --example decode -- --tokens 2 | tee target/main-job.log
tail -n 1 target/main-job.log | grep -q '"ok":true' || { echo "error: the main job's numerics check failed" >&2; exit 1; }
