#!/usr/bin/env bash
# Builds every test binary and example of the workspace for a GPU machine that has the
# NVIDIA driver but no Rust toolchain, into the git-ignored folder gpu-bundle/, with a
# runner for the other side.
#
#   Build (here, in the repository):
#       scripts/gpu-bundle.sh [--gpu-only]
#   --gpu-only keeps only the test binaries that have GPU tests (named gpu_*), and the
#   examples: a third of the size, for when the bundle and the source tree together are
#   more than the machine takes in one go.
#   Run (on the GPU machine, from the repository root, with gpu-bundle/ copied there):
#       gpu-bundle/run.sh [--sanitize memcheck|racecheck|synccheck|initcheck]
#                         [--sanitizer-arg ARG]... [--only NAME] [--allow-no-gpu]
#                         [TEST FILTER / HARNESS ARGS...]
#
# What the bundle holds:
#   bin/<package>.<target>   each test harness (release, debug info stripped), run in order
#   examples/<name>          each example (release), for running by hand
#   lib/                     Rust shared libraries a binary links (libstd, for the
#                            proc-macro crates' test harnesses)
#   tree/                    the source tree as built (tracked and untracked-not-ignored
#                            files): what tests read at run time. insta reads its .snap files
#                            at run time, and tests may build paths from the compile-time
#                            env!("CARGO_MANIFEST_DIR"); the runner points both at tree/
#   manifest.tsv             name, package dir, kind of each test binary
#   build-info.txt           commit, toolchain and the absolute path it was built in
#   run.sh                   the runner
#
# The runner, for each test binary in turn, from tree/<package dir> as cargo would:
#   - passes every argument it does not know to the binary (a test-name filter, --exact,
#     --nocapture, --test-threads=N, ...);
#   - sets KESTREL_REQUIRE_GPU=1, so a GPU test fails rather than skips when no driver or
#     GPU is found (a test for another architecture still skips); --allow-no-gpu lifts it;
#   - with --only NAME, runs only the binaries whose name (manifest.tsv) contains NAME;
#   - stops at the first failing binary and says how to rerun just that one;
#   - with --sanitize TOOL, runs the GPU tests (named gpu_*; or your filter) under
#     `compute-sanitizer --tool TOOL`, skipping binaries with no matching test; each
#     --sanitizer-arg ARG goes to compute-sanitizer, e.g. `--racecheck-report=hazard`
#     (every hazard with its shared-memory address and threads, not one line per pair
#     of instructions);
#   - uses /usr/local/cuda/bin for ptxas and compute-sanitizer when they are not on PATH;
#   - logs everything to $OUT/gpu-tests.log when OUT is set, else gpu-bundle/last-run.log;
#   - ends with the count of binaries passed and every SKIPPED line the GPU tests printed.
# Test binaries using trybuild are left out: they compile code and need cargo.
set -euo pipefail

gpu_only=0
case "${1:-}" in
    "") ;;
    --gpu-only) gpu_only=1 ;;
    *) echo "usage: scripts/gpu-bundle.sh [--gpu-only]" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bundle="$root/gpu-bundle"
# What the GPU machine takes in one go: the repository with the bundle in it.
max_bytes=$((64 * 1024 * 1024))

for tool in cargo rustc jq git strip tar ldd; do
    command -v "$tool" >/dev/null || { echo "error: gpu-bundle.sh needs $tool" >&2; exit 1; }
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "== building test binaries (release)"
cargo test --release --workspace --no-run --message-format=json-render-diagnostics >"$tmp/tests.json"
echo "== building examples (release)"
cargo build --release --workspace --examples --message-format=json-render-diagnostics >"$tmp/examples.json"
cargo metadata --no-deps --format-version 1 >"$tmp/meta.json"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/examples" "$bundle/tree"

# One line per executable: package, kind, target name, source file, executable, manifest.
artifacts() {
    jq -r --slurpfile meta "$tmp/meta.json" --argjson test "$2" '
        ($meta[0].packages | map({(.manifest_path): .name}) | add) as $pkg
        | select(.reason == "compiler-artifact" and .executable != null
                 and .profile.test == $test)
        | [$pkg[.manifest_path], .target.kind[0], .target.name, .target.src_path,
           .executable, .manifest_path]
        | @tsv' "$1"
}

: >"$bundle/manifest.tsv"
while IFS=$'\t' read -r pkg kind target src exe manifest; do
    case "$kind" in
        lib | proc-macro) name="$pkg.lib" ;;
        test) name="$pkg.$target" ;;
        *) name="$pkg.$kind-$target" ;;
    esac
    if grep -q 'trybuild' "$src"; then
        echo "   left out $name: it uses trybuild, which needs cargo"
        continue
    fi
    pkgdir="$(realpath --relative-to="$root" "$(dirname "$manifest")")"
    strip --strip-debug -o "$bundle/bin/$name" "$exe"
    printf '%s\t%s\t%s\n' "$name" "$pkgdir" "$kind" >>"$bundle/manifest.tsv"
done < <(artifacts "$tmp/tests.json" true | sort -t$'\t' -k1,1 -k2,2 -k3,3)

# Proc-macro test harnesses link the toolchain's libstd dynamically (cargo would put it on
# the library path); carry each Rust library a binary cannot find.
libdir="$(rustc --print target-libdir)"
for bin in "$bundle"/bin/*; do
    for lib in $(ldd "$bin" | awk '/=> not found/ {print $1}'); do
        [ -e "$bundle/lib/$lib" ] && continue
        [ -f "$libdir/$lib" ] || { echo "error: $bin needs $lib, which is not in $libdir" >&2; exit 1; }
        mkdir -p "$bundle/lib"
        strip --strip-debug -o "$bundle/lib/$lib" "$libdir/$lib"
    done
done

if [ "$gpu_only" = 1 ]; then
    : >"$tmp/manifest.tsv"
    while IFS=$'\t' read -r name pkgdir kind; do
        # Listed whole before matching: grep -q would close the pipe early and, under
        # pipefail, fail the binary with SIGPIPE.
        tests="$(LD_LIBRARY_PATH="$bundle/lib" "$bundle/bin/$name" --list 2>/dev/null || true)"
        if grep -q '^gpu_.*: test$' <<<"$tests"; then
            printf '%s\t%s\t%s\n' "$name" "$pkgdir" "$kind" >>"$tmp/manifest.tsv"
        else
            rm "$bundle/bin/$name"
        fi
    done <"$bundle/manifest.tsv"
    mv "$tmp/manifest.tsv" "$bundle/manifest.tsv"
fi

while IFS=$'\t' read -r _pkg kind target _src exe _manifest; do
    [ "$kind" = example ] && strip --strip-debug -o "$bundle/examples/$target" "$exe"
done < <(artifacts "$tmp/examples.json" false)

# The source tree as built; a file deleted but still tracked is skipped.
git ls-files -z --cached --others --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null |
    tar -xf - -C "$bundle/tree"

{
    echo "build_root=$root"
    echo "commit=$(git rev-parse HEAD)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "rustc=$(rustc --version)"
} >"$bundle/build-info.txt"

cat >"$bundle/run.sh" <<'RUNNER'
#!/usr/bin/env bash
# Runs the test binaries of this bundle (made by scripts/gpu-bundle.sh; its header says
# what each option does). Usage:
#   gpu-bundle/run.sh [--sanitize memcheck|racecheck|synccheck|initcheck]
#                     [--sanitizer-arg ARG]... [--only NAME] [--allow-no-gpu] [--]
#                     [TEST FILTER / HARNESS ARGS...]
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tree="$here/tree"
build_root="$(sed -n 's/^build_root=//p' "$here/build-info.txt")"

usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; }

sanitize=""
sanitizer_args=()
only=""
allow_no_gpu=0
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --sanitize)
            case "${2:-}" in
                memcheck | racecheck | synccheck | initcheck) sanitize="$2" ;;
                *) echo "error: --sanitize takes memcheck, racecheck, synccheck or initcheck" >&2; exit 2 ;;
            esac
            shift 2 ;;
        --sanitizer-arg)
            [ -n "${2:-}" ] || { echo "error: --sanitizer-arg takes an argument for compute-sanitizer" >&2; exit 2; }
            sanitizer_args+=("$2"); shift 2 ;;
        --only)
            [ -n "${2:-}" ] || { echo "error: --only takes a binary name (see manifest.tsv)" >&2; exit 2; }
            only="$2"; shift 2 ;;
        --allow-no-gpu) allow_no_gpu=1; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; args+=("$@"); break ;;
        *) args+=("$1"); shift ;;
    esac
done
if [ ${#sanitizer_args[@]} -gt 0 ] && [ -z "$sanitize" ]; then
    echo "error: --sanitizer-arg needs --sanitize TOOL" >&2
    exit 2
fi

log="$here/last-run.log"
[ -n "${OUT:-}" ] && mkdir -p "$OUT" && log="$OUT/gpu-tests.log"

# Tests may read paths compiled in from env!("CARGO_MANIFEST_DIR"), which name the build
# machine's checkout: where that path is free here, it is pointed at tree/ for the run.
made_link=""
made_dirs=()
link_build_root() {
    if [ -e "$build_root" ] || [ -L "$build_root" ]; then
        echo "note: $build_root exists on this machine; compiled-in source paths read it"
        return
    fi
    local d
    d="$(dirname "$build_root")"
    while [ ! -e "$d" ]; do made_dirs=("$d" "${made_dirs[@]}"); d="$(dirname "$d")"; done
    if mkdir -p "$(dirname "$build_root")" 2>/dev/null && ln -s "$tree" "$build_root" 2>/dev/null; then
        made_link="$build_root"
        echo "note: linked $build_root -> $tree for the run (compiled-in source paths)"
    else
        echo "warning: could not link $build_root -> $tree: tests that read compiled-in source paths will fail"
    fi
}
# shellcheck disable=SC2317  # called from the EXIT trap
unlink_build_root() {
    [ -n "$made_link" ] && [ -L "$made_link" ] && rm -f "$made_link"
    local i
    for ((i = ${#made_dirs[@]} - 1; i >= 0; i--)); do rmdir "${made_dirs[$i]}" 2>/dev/null; done
    return 0
}

find_tool() {
    command -v "$1" 2>/dev/null && return
    for d in /usr/local/cuda/bin /usr/local/cuda/compute-sanitizer /opt/nvidia/compute-sanitizer; do
        [ -x "$d/$1" ] && { echo "$d/$1"; return; }
    done
}

run_all() {
    echo "== kestrel GPU bundle: $(sed -n 's/^commit=//p' "$here/build-info.txt")"
    command -v nvidia-smi >/dev/null &&
        nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | sed 's/^/== GPU: /'

    export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"
    export INSTA_WORKSPACE_ROOT="$tree" INSTA_UPDATE=no
    [ "$allow_no_gpu" = 1 ] || export KESTREL_REQUIRE_GPU=1
    if [ -z "${KESTREL_PTXAS:-}" ] && ! command -v ptxas >/dev/null; then
        p="$(find_tool ptxas)"
        [ -n "$p" ] && export KESTREL_PTXAS="$p"
    fi
    local sanitizer=""
    if [ -n "$sanitize" ]; then
        sanitizer="$(find_tool compute-sanitizer)"
        [ -n "$sanitizer" ] || { echo "error: compute-sanitizer not found (PATH, /usr/local/cuda/bin)"; return 2; }
        # Only the GPU tests, unless a filter was given.
        [ ${#args[@]} -eq 0 ] && args=(gpu_)
        echo "== under compute-sanitizer --tool $sanitize, tests matching: ${args[*]}"
    fi
    # This function runs in a subshell (its output is piped to tee): the link it makes is
    # undone when that subshell exits, however it exits.
    trap unlink_build_root EXIT
    link_build_root

    local out passed=0 name pkgdir kind rc
    out="$(mktemp -d)"
    while IFS=$'\t' read -r name pkgdir kind; do
        case "$name" in *"$only"*) ;; *) continue ;; esac
        local bin="$here/bin/$name"
        local cmd=("$bin" "${args[@]}")
        if [ -n "$sanitizer" ]; then
            # A binary with no matching test is not worth the sanitizer's start-up. The
            # list is read whole first: under pipefail, `grep -q` quitting early could fail
            # the binary with SIGPIPE and skip it.
            local listed
            listed="$(cd "$tree/$pkgdir" && "$bin" --list "${args[@]}" 2>/dev/null)" || true
            if ! grep -q ': test$' <<<"$listed"; then
                continue
            fi
            cmd=("$sanitizer" --tool "$sanitize" --error-exitcode 86 "${sanitizer_args[@]}" "${cmd[@]}")
        fi
        echo
        echo "== $name ($kind, in $pkgdir)"
        (cd "$tree/$pkgdir" && CARGO_MANIFEST_DIR="$tree/$pkgdir" "${cmd[@]}") 2>&1 | tee "$out/$name.out"
        rc=${PIPESTATUS[0]}
        if [ "$rc" -ne 0 ]; then
            echo
            echo "FAILED: $name exited with $rc${sanitizer:+ (86 means compute-sanitizer found errors)}"
            local again="" arg
            for arg in "${sanitizer_args[@]}"; do again+="--sanitizer-arg $arg "; done
            echo "rerun it alone: gpu-bundle/run.sh --only $name ${sanitize:+--sanitize $sanitize }$again${args[*]}"
            echo "$passed test binaries passed before it; the remaining ones were not run."
            return "$rc"
        fi
        passed=$((passed + 1))
    done <"$here/manifest.tsv"

    echo
    if [ "$passed" -eq 0 ]; then
        echo "error: no test binary matched${only:+ --only $only}"
        return 1
    fi
    # A skip line can land after the harness's "test name ... " on the same line.
    local skips
    skips="$(cat "$out"/*.out | grep -o 'SKIPPED gpu test .*' || true)"
    echo "== all $passed test binaries passed; GPU tests skipped: $(printf '%s' "$skips" | grep -c . || true)"
    [ -n "$skips" ] && printf '%s\n' "$skips" | sed 's/^/   /'
    rm -rf "$out"
    return 0
}

run_all 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
echo "log: $log"
exit "$rc"
RUNNER
chmod +x "$bundle/run.sh"

bytes="$(du -sb "$bundle" | cut -f1)"
tree_bytes="$(du -sb "$bundle/tree" | cut -f1)"
echo "== gpu-bundle: $(wc -l <"$bundle/manifest.tsv") test binaries, $(find "$bundle/examples" -type f | wc -l) examples, $((bytes / 1024 / 1024)) MiB"
# The machine takes the bundle together with the repository's own tree (as big as tree/).
if [ $((bytes + tree_bytes)) -gt "$max_bytes" ]; then
    echo "error: the bundle and the source tree are $(((bytes + tree_bytes) / 1024 / 1024)) MiB, over 64 MiB; build it with --gpu-only to keep just the GPU tests" >&2
    exit 1
fi
echo "run it on the GPU machine, from the repository root: gpu-bundle/run.sh"
