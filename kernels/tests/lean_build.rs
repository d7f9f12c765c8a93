//! A serving build of `kernels` (no `testing` feature) leaves out the case files and what
//! they pull in: `cargo tree` of the crate names none of safetensors, serde_json, tempfile.

use std::process::Command;

/// The packages `cargo tree` lists for `kernels` (normal and build dependencies) with the
/// given extra arguments.
fn dependencies(extra: &[&str]) -> Vec<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let output = Command::new(env!("CARGO"))
        .args(["tree", "--manifest-path", manifest, "-p", "kernels"])
        .args(["-e", "no-dev", "--prefix", "none", "-f", "{p}"])
        .args(["--offline", "--color", "never"])
        .args(extra)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("cargo tree prints UTF-8")
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect()
}

const TESTING_ONLY: [&str; 3] = ["safetensors", "serde_json", "tempfile"];

#[test]
fn a_serving_build_has_no_case_file_dependencies() {
    let deps = dependencies(&[]);
    assert!(
        deps.iter().any(|d| d == "cudarc"),
        "cargo tree did not list the crate's dependencies: {deps:?}"
    );
    for name in TESTING_ONLY {
        assert!(
            !deps.iter().any(|d| d == name),
            "a serving build of kernels depends on {name}: keep it behind the `testing` feature"
        );
    }
}

#[test]
fn the_testing_feature_brings_the_case_files() {
    let deps = dependencies(&["--features", "testing"]);
    assert!(
        deps.iter().any(|d| d == "safetensors"),
        "with `testing`, cargo tree lists no safetensors: {deps:?}"
    );
}
