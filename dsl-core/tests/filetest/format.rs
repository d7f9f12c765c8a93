//! Reading a filetest: its directives, the kernel text and the expectations.

use std::path::{Path, PathBuf};

use dsl_core::Target;

/// The line that starts the expectations; it and everything after are generated.
pub const EXPECT: &str = "; expect";

pub struct Filetest {
    pub path: PathBuf,
    /// Everything before the expectations: directives, comments and the kernel.
    pub head: String,
    /// The kernel's text: `head` with the directive lines blanked, so that parse errors and
    /// the locations of ops point at the file's own lines.
    pub kernel_text: String,
    /// The expectations as in the file.
    pub expected: String,
    /// `test compile`: the targets to print PTX for (`None`: the kernel's own).
    pub compile: Vec<Option<Target>>,
    pub interpret: Option<Interpret>,
}

pub struct Interpret {
    pub grid: [u32; 3],
    pub cluster: Option<[u32; 3]>,
    pub args: Vec<(String, ArgSpec)>,
    pub outs: Vec<String>,
}

pub enum ArgSpec {
    Scalar(String),
    Tensor { extents: Vec<i64>, data: Data },
}

pub enum Data {
    Iota,
    Zeros,
    Fill(String),
    Values(Vec<String>),
}

fn triple(s: &str) -> Result<[u32; 3], String> {
    let v: Vec<u32> = s
        .split(',')
        .map(|n| n.trim().parse().map_err(|_| format!("`{s}` is not X,Y,Z")))
        .collect::<Result<_, _>>()?;
    v.try_into().map_err(|_| format!("`{s}` is not X,Y,Z"))
}

fn arg(rest: &str) -> Result<(String, ArgSpec), String> {
    let (name, value) = rest.split_once('=').ok_or("expected `arg NAME = VALUE`")?;
    let value = value.trim();
    let spec = if let Some(shape) = value.strip_prefix('[') {
        let (extents, data) = shape.split_once(']').ok_or("expected `[EXTENTS] DATA`")?;
        let extents = extents
            .split(',')
            .map(|e| {
                e.trim()
                    .parse()
                    .map_err(|_| format!("`{e}` is not an extent"))
            })
            .collect::<Result<_, _>>()?;
        let words: Vec<&str> = data.split_whitespace().collect();
        let data = match words[..] {
            ["iota"] => Data::Iota,
            ["zeros"] => Data::Zeros,
            ["fill", v] => Data::Fill(v.to_string()),
            ["values", ref vs @ ..] => Data::Values(vs.iter().map(|v| v.to_string()).collect()),
            _ => return Err("tensor data is iota, zeros, fill V or values V V ...".into()),
        };
        ArgSpec::Tensor { extents, data }
    } else {
        ArgSpec::Scalar(value.to_string())
    };
    Ok((name.trim().to_string(), spec))
}

pub fn read(path: &Path) -> Result<Filetest, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let split = text
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .chain([0])
        .filter(|&i| text[i..].starts_with(EXPECT))
        .min()
        .unwrap_or(text.len());
    let (head, expected) = text.split_at(split);
    let mut compile = Vec::new();
    let mut interpret: Option<Interpret> = None;
    let mut kernel_text = String::new();
    let mut in_kernel = false;
    for (n, line) in head.lines().enumerate() {
        let at = |m: String| format!("{}:{}: {m}", path.display(), n + 1);
        let t = line.trim();
        in_kernel |= t.starts_with("kernel ");
        let mut words = t.splitn(2, char::is_whitespace);
        let (first, rest) = (
            words.next().unwrap_or(""),
            words.next().unwrap_or("").trim(),
        );
        if in_kernel || first.is_empty() || first.starts_with(';') {
            kernel_text.push_str(if in_kernel { line } else { "" });
            kernel_text.push('\n');
            continue;
        }
        match first {
            "test" => {
                let mut parts = rest.split_whitespace();
                match parts.next() {
                    Some("compile") => {
                        let target = match parts.next() {
                            Some(t) => Some(
                                t.strip_prefix("target=")
                                    .ok_or_else(|| at("expected target=TARGET".into()))?
                                    .parse()
                                    .map_err(at)?,
                            ),
                            None => None,
                        };
                        compile.push(target);
                    }
                    Some("interpret") => {
                        let mut run = Interpret {
                            grid: [1, 1, 1],
                            cluster: None,
                            args: Vec::new(),
                            outs: Vec::new(),
                        };
                        for p in parts {
                            if let Some(g) = p.strip_prefix("grid=") {
                                run.grid = triple(g).map_err(at)?;
                            } else if let Some(c) = p.strip_prefix("cluster=") {
                                run.cluster = Some(triple(c).map_err(at)?);
                            } else {
                                return Err(at(format!(
                                    "unknown option `{p}`: grid=X,Y,Z or cluster=X,Y,Z"
                                )));
                            }
                        }
                        interpret = Some(run);
                    }
                    _ => return Err(at("expected `test compile` or `test interpret`".into())),
                }
            }
            "arg" | "out" => {
                let run = interpret
                    .as_mut()
                    .ok_or_else(|| at(format!("`{first}` comes after `test interpret`")))?;
                if first == "arg" {
                    run.args.push(arg(rest).map_err(at)?);
                } else {
                    run.outs.push(rest.to_string());
                }
            }
            other => {
                return Err(at(format!(
                    "unknown directive `{other}`: test, arg, out, or the kernel"
                )));
            }
        }
        kernel_text.push('\n');
    }
    Ok(Filetest {
        path: path.to_path_buf(),
        head: head.to_string(),
        kernel_text,
        expected: expected.to_string(),
        compile,
        interpret,
    })
}

/// Every `.kir` file of `dsl-core/filetests/`, by name.
pub fn all() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "kir"))
        .collect();
    files.sort();
    files
}
