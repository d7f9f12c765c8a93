//! Running a generated case in the interpreter, and comparing two runs' outputs.

use dsl_core::interp::{Arg, Launch, Memory, run};
use dsl_core::ir::{Kernel, ParamKind};

use super::Case;

/// The words of `out` after running `kernel` (the case's kernel or one equal to it) on the
/// case's inputs.
pub fn interpret(case: &Case, kernel: &Kernel) -> Result<Vec<u32>, String> {
    let mut mem = Memory::new();
    let mut args = Vec::new();
    let mut out = None;
    for p in &kernel.params {
        let arg = match (p.name.as_str(), p.kind) {
            ("n", _) => Arg::U32(case.n),
            ("out", ParamKind::Tensor { .. }) => {
                let words = case.out_words();
                let id = mem.alloc_from("out", &vec![0u32; words]);
                out = Some(id);
                Arg::contiguous(id, &[words as i64])
            }
            (name, ParamKind::Tensor { .. }) => {
                let (_, data) = case
                    .inputs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .ok_or_else(|| format!("no input for parameter `{name}`"))?;
                let id = mem.alloc_from(name, data);
                Arg::contiguous(id, &[data.len() as i64])
            }
            (name, kind) => return Err(format!("unexpected parameter `{name}`: {kind:?}")),
        };
        args.push(arg);
    }
    let out = out.ok_or("the kernel has no `out` parameter")?;
    run(kernel, &mut mem, &args, &Launch::grid([case.grid, 1, 1])).map_err(|e| e.to_string())?;
    Ok(mem.read(out))
}

/// The first word where `got` differs from `want`, described by column and thread.
pub fn first_difference(case: &Case, want: &[u32], got: &[u32]) -> Option<String> {
    if want.len() != got.len() {
        return Some(format!("{} words, expected {}", got.len(), want.len()));
    }
    let at = want.iter().zip(got).position(|(w, g)| w != g)?;
    let len = case.len as usize;
    let (column, thread) = (at / len, at % len);
    let differing = want.iter().zip(got).filter(|(w, g)| w != g).count();
    Some(format!(
        "column {column} ({}) of thread {thread} (CTA {}, tid {}): {:#010x}, expected {:#010x} \
         ({differing} words differ)",
        case.columns[column],
        thread as u32 / case.threads,
        thread as u32 % case.threads,
        got[at],
        want[at],
    ))
}

/// Every word where `got` differs from `want`, a line each: column, its value, thread, the
/// word `got` has and the one `want` has.
pub fn differing_words(case: &Case, want: &[u32], got: &[u32]) -> String {
    let len = case.len as usize;
    let mut text = String::from("column value thread got want\n");
    for (at, (w, g)) in want.iter().zip(got).enumerate() {
        if w != g {
            let column = at / len;
            text += &format!(
                "{column} {} {} {g:#010x} {w:#010x}\n",
                case.columns[column],
                at % len
            );
        }
    }
    text
}
