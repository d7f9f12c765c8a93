//! Running a filetest: what its kernel prints and computes, as the expectation text.

use dsl_core::emit::ptx::emit;
use dsl_core::interp::{Arg, Launch, Memory, run};
use dsl_core::ir::{ElemTy, Kernel, ParamKind, Ty};

use super::format::{ArgSpec, Data, EXPECT, Interpret};

/// What the file's expectations should be for `kernel`.
pub fn expectations(
    compile: &[Option<dsl_core::Target>],
    interpret: Option<&Interpret>,
    kernel: &Kernel,
) -> String {
    let mut out = String::new();
    for target in compile {
        let mut k = kernel.clone();
        if let Some(t) = target {
            k.target = *t;
        }
        match emit(&k) {
            Ok(m) => section(&mut out, &format!("ptx {}", k.target), &m.text),
            Err(e) => section(
                &mut out,
                &format!("emit-error {}", k.target),
                &e.to_string(),
            ),
        }
    }
    if let Some(run) = interpret {
        let result = interpret_kernel(run, kernel).unwrap_or_else(|e| format!("error: {e}\n"));
        section(&mut out, "interpret", &result);
    }
    out
}

fn section(out: &mut String, title: &str, body: &str) {
    out.push_str(&format!("{EXPECT} {title}\n"));
    for line in body.lines() {
        if line.is_empty() {
            out.push_str(";\n");
        } else {
            out.push_str(&format!("; {line}\n"));
        }
    }
}

/// The PTX sections of an expectation text: (target, PTX).
pub fn ptx_sections(expected: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut current: Option<usize> = None;
    for line in expected.lines() {
        if let Some(title) = line.strip_prefix(EXPECT) {
            current = title.trim().strip_prefix("ptx ").map(|t| {
                out.push((t.to_string(), String::new()));
                out.len() - 1
            });
        } else if let Some(i) = current {
            let text = line
                .strip_prefix("; ")
                .or(line.strip_prefix(';'))
                .unwrap_or(line);
            out[i].1.push_str(text);
            out[i].1.push('\n');
        }
    }
    out
}

fn value_bytes(elem: ElemTy, v: &str) -> Result<Vec<u8>, String> {
    let bad = || format!("`{v}` is not a {} value", elem.name());
    Ok(match elem {
        ElemTy::U8 | ElemTy::E4m3 => vec![v.parse::<u8>().map_err(|_| bad())?],
        ElemTy::I32 => v.parse::<i32>().map_err(|_| bad())?.to_le_bytes().to_vec(),
        ElemTy::U32 => v.parse::<u32>().map_err(|_| bad())?.to_le_bytes().to_vec(),
        ElemTy::I64 => v.parse::<i64>().map_err(|_| bad())?.to_le_bytes().to_vec(),
        ElemTy::F32 => v.parse::<f32>().map_err(|_| bad())?.to_le_bytes().to_vec(),
        ElemTy::Bf16 => half::bf16::from_f32(v.parse::<f32>().map_err(|_| bad())?)
            .to_le_bytes()
            .to_vec(),
    })
}

fn show(elem: ElemTy, b: &[u8]) -> String {
    match elem {
        ElemTy::U8 | ElemTy::E4m3 => b[0].to_string(),
        ElemTy::I32 => i32::from_le_bytes(b.try_into().unwrap()).to_string(),
        ElemTy::U32 => u32::from_le_bytes(b.try_into().unwrap()).to_string(),
        ElemTy::I64 => i64::from_le_bytes(b.try_into().unwrap()).to_string(),
        ElemTy::F32 => f32::from_le_bytes(b.try_into().unwrap()).to_string(),
        ElemTy::Bf16 => half::bf16::from_le_bytes(b.try_into().unwrap()).to_string(),
    }
}

fn scalar(ty: Ty, v: &str) -> Result<Arg, String> {
    let bad = || format!("`{v}` is not a {} value", ty.ptx());
    Ok(match ty {
        Ty::U32 | Ty::B32 => Arg::U32(v.parse().map_err(|_| bad())?),
        Ty::S32 => Arg::S32(v.parse().map_err(|_| bad())?),
        Ty::U64 => Arg::U64(v.parse().map_err(|_| bad())?),
        Ty::S64 => Arg::S64(v.parse().map_err(|_| bad())?),
        Ty::F32 => Arg::F32(v.parse().map_err(|_| bad())?),
        Ty::Pred | Ty::B16 => Arg::Pred(v.parse::<u8>().map_err(|_| bad())? != 0),
    })
}

/// Runs the kernel and prints each `out` tensor, 16 values a line.
fn interpret_kernel(run_spec: &Interpret, kernel: &Kernel) -> Result<String, String> {
    let mut mem = Memory::new();
    let mut args = Vec::new();
    let mut buffers = Vec::new();
    for p in &kernel.params {
        let (_, spec) = run_spec
            .args
            .iter()
            .find(|(n, _)| *n == p.name)
            .ok_or_else(|| format!("no `arg {} = ...`", p.name))?;
        let arg = match (p.kind, spec) {
            (ParamKind::Scalar(ty), ArgSpec::Scalar(v)) => scalar(ty, v)?,
            (ParamKind::Tensor { elem, rank }, ArgSpec::Tensor { extents, data }) => {
                if extents.len() != rank as usize {
                    return Err(format!(
                        "`{}` has rank {rank}, given {} extents",
                        p.name,
                        extents.len()
                    ));
                }
                let n = extents.iter().product::<i64>() as usize;
                let mut bytes = Vec::with_capacity(n * elem.bytes());
                for i in 0..n {
                    let v = match data {
                        Data::Iota => match elem {
                            ElemTy::U8 | ElemTy::E4m3 => (i % 256).to_string(),
                            _ => i.to_string(),
                        },
                        Data::Zeros => "0".to_string(),
                        Data::Fill(v) => v.clone(),
                        Data::Values(vs) => vs.get(i).cloned().ok_or_else(|| {
                            format!("`{}` has {n} elements, given {} values", p.name, vs.len())
                        })?,
                    };
                    bytes.extend(value_bytes(elem, &v)?);
                }
                let id = mem.alloc(&p.name, bytes.len());
                mem.bytes_mut(id).copy_from_slice(&bytes);
                buffers.push((p.name.clone(), id, elem));
                Arg::contiguous(id, extents)
            }
            (kind, _) => {
                return Err(format!(
                    "`{}` is a {kind:?} parameter; the arg does not fit it",
                    p.name
                ));
            }
        };
        args.push(arg);
    }
    let mut launch = Launch::grid(run_spec.grid);
    if let Some(c) = run_spec.cluster {
        launch = launch.cluster(c);
    }
    run(kernel, &mut mem, &args, &launch).map_err(|e| e.to_string())?;
    let mut out = String::new();
    for name in &run_spec.outs {
        let (_, id, elem) = buffers
            .iter()
            .find(|(n, _, _)| n == name)
            .ok_or_else(|| format!("`out {name}`: no tensor argument is named so"))?;
        let values: Vec<String> = mem
            .bytes(*id)
            .chunks(elem.bytes())
            .map(|b| show(*elem, b))
            .collect();
        for (row, chunk) in values.chunks(16).enumerate() {
            out.push_str(&format!("{name}[{}] {}\n", row * 16, chunk.join(" ")));
        }
    }
    Ok(out)
}
