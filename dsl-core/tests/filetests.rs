//! The filetests of `dsl-core/filetests/`: each `.kir` file's kernel, parsed from the text
//! form, must print the PTX and compute the interpreter results written in the file.
//! `KESTREL_BLESS=1 cargo test -p dsl-core --test filetests` rewrites the expectations.

mod filetest;

use std::collections::BTreeSet;

use dsl_core::Target;
use dsl_core::emit::ptx::PtxModule;
use dsl_core::ir::text::{OpKind, parse, parse_named, print};
use dsl_core::ptxas;

use filetest::diff::diff;
use filetest::format::{Filetest, all, read};
use filetest::run::{expectations, ptx_sections};

fn bless() -> bool {
    std::env::var("KESTREL_BLESS").as_deref() == Ok("1")
}

/// The repository path of a filetest, for messages and the locations of its ops.
fn shown(path: &std::path::Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy();
    format!("dsl-core/filetests/{name}")
}

fn kernel_of(t: &Filetest) -> Result<dsl_core::ir::Kernel, String> {
    let path = shown(&t.path);
    parse_named(&t.kernel_text, &path).map_err(|e| format!("{path}:{e}"))
}

#[test]
fn filetests_match_their_expectations() {
    let mut failures = Vec::new();
    for path in all() {
        let t = match read(&path) {
            Ok(t) => t,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let kernel = match kernel_of(&t) {
            Ok(k) => k,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        if parse(&print(&kernel)).as_ref() != Ok(&kernel) {
            failures.push(format!(
                "{}: the kernel does not round-trip through the text form",
                shown(&path)
            ));
        }
        let got = expectations(&t.compile, t.interpret.as_ref(), &kernel);
        if got == t.expected {
            continue;
        }
        if bless() {
            std::fs::write(&path, format!("{}{got}", t.head)).expect("writes the filetest");
            eprintln!("blessed {}", shown(&path));
        } else {
            failures.push(format!(
                "{}: the output differs from the expectation (- expected, + got; KESTREL_BLESS=1 \
                 rewrites it):\n{}",
                shown(&path),
                diff(&t.expected, &got)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_op_kind_has_a_filetest() {
    let mut seen = BTreeSet::new();
    for path in all() {
        let t = read(&path).unwrap_or_else(|e| panic!("{e}"));
        let kernel = kernel_of(&t).unwrap_or_else(|e| panic!("{e}"));
        kernel.body.for_each_inst(&mut |i| {
            seen.insert(OpKind::of(&i.op));
        });
    }
    let missing: Vec<&str> = OpKind::ALL
        .iter()
        .filter(|k| !seen.contains(k))
        .map(|k| k.mnemonic())
        .collect();
    assert!(
        missing.is_empty(),
        "no filetest in dsl-core/filetests/ uses these op kinds: {}",
        missing.join(", ")
    );
}

#[test]
fn expected_ptx_assembles() {
    let Some(ptxas_path) = ptxas::find() else {
        if std::env::var("KESTREL_REQUIRE_PTXAS").as_deref() == Ok("1") {
            panic!(
                "ptxas is required (KESTREL_REQUIRE_PTXAS=1) but was not found: set KESTREL_PTXAS"
            );
        }
        eprintln!("SKIPPED filetest ptxas check: ptxas not found (set KESTREL_PTXAS)");
        return;
    };
    let mut failures = Vec::new();
    for path in all() {
        let t = read(&path).unwrap_or_else(|e| panic!("{e}"));
        let kernel = kernel_of(&t).unwrap_or_else(|e| panic!("{e}"));
        for (target, text) in ptx_sections(&t.expected) {
            let target: Target = target
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", shown(&path)));
            let module = PtxModule {
                kernel: kernel.name.clone(),
                target,
                text,
            };
            if let Err(e) = ptxas::assemble_with(&ptxas_path, &module) {
                failures.push(format!("{} ({target}): {e}", shown(&path)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
