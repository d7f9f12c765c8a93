//! Printing what the interpreter's debug hooks recorded: one thread's instruction trace,
//! grouped by stage, and snapshots of shared memory (hex rows, optionally decoded) or tensor
//! memory (lanes x columns).

use std::fmt::Write as _;

use kestrel::core::interp::TraceEntry;
use kestrel::core::ir::Ty;

use crate::args::ValueType;

/// The trace entries whose stage passes `keep`, at most `limit` of them, under a stage title
/// line each time the stage changes.
pub fn format_trace(
    entries: &[TraceEntry],
    keep: &dyn Fn(Option<&str>) -> bool,
    limit: usize,
) -> (String, usize) {
    let mut out = String::new();
    let mut shown = 0;
    let mut hidden = 0;
    let mut current: Option<Option<&str>> = None;
    let op_width = entries
        .iter()
        .map(|e| e.op.len())
        .max()
        .unwrap_or(0)
        .min(40);
    let loc_width = entries
        .iter()
        .map(|e| e.loc.to_string().len())
        .max()
        .unwrap_or(0)
        .min(60);
    for e in entries {
        let stage = e.stage.as_deref();
        if !keep(stage) {
            continue;
        }
        if shown == limit {
            hidden += 1;
            continue;
        }
        if current != Some(stage) {
            let _ = writeln!(out, "== {}", stage.unwrap_or("(before the first stage)"));
            current = Some(stage);
        }
        let mut line = format!("  {:<op_width$}  {:<loc_width$}", e.op, e.loc.to_string());
        for (i, (reg, ty, bits)) in e.values.iter().enumerate() {
            let sep = if i == 0 { "  " } else { ", " };
            let _ = write!(line, "{sep}%{}:{} = {}", reg.0, ty.ptx(), value(*ty, *bits));
        }
        out.push_str(line.trim_end());
        out.push('\n');
        shown += 1;
    }
    (out, hidden)
}

/// A register value in hex, and as a number where that reads better.
fn value(ty: Ty, bits: u64) -> String {
    match ty {
        Ty::Pred => (bits != 0).to_string(),
        Ty::B16 => format!("{:#06x}", bits as u16),
        Ty::B32 => format!("{:#010x}", bits as u32),
        Ty::U32 => format!("{:#010x} ({})", bits as u32, bits as u32),
        Ty::S32 => format!("{:#010x} ({})", bits as u32, bits as u32 as i32),
        Ty::F32 => format!(
            "{:#010x} ({})",
            bits as u32,
            f32_text(f32::from_bits(bits as u32))
        ),
        Ty::U64 => format!("{bits:#018x}"),
        Ty::S64 => format!("{bits:#018x} ({})", bits as i64),
    }
}

/// A float short enough for a table.
pub fn f32_text(v: f32) -> String {
    let a = v.abs();
    if a == 0.0 || (1e-3..1e5).contains(&a) || !v.is_finite() {
        let s = format!("{v:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s.is_empty() || s == "-" {
            "0".into()
        } else {
            s.to_string()
        }
    } else {
        format!("{v:.3e}")
    }
}

/// Shared-memory bytes (`None`: never written) as rows of 16, offsets relative to the buffer
/// and absolute in dynamic shared memory; runs of identical rows collapse to `*`. Returns
/// the text and how many rows `limit` left out.
pub fn format_smem(
    bytes: &[Option<u8>],
    base: u32,
    as_type: Option<ValueType>,
    limit: usize,
) -> (String, usize) {
    let mut out = String::new();
    let written = bytes.iter().filter(|b| b.is_some()).count();
    let _ = writeln!(
        out,
        "  {written} of {} bytes written (-- marks the others)",
        bytes.len()
    );
    let mut shown = 0;
    let mut hidden = 0;
    let mut previous: Option<&[Option<u8>]> = None;
    let mut starred = false;
    let rows: Vec<&[Option<u8>]> = bytes.chunks(16).collect();
    for (i, row) in rows.iter().enumerate() {
        if shown == limit {
            hidden = rows.len() - i;
            break;
        }
        let last = i + 1 == rows.len();
        if previous == Some(*row) && !last {
            if !starred {
                out.push_str("  *\n");
                starred = true;
            }
            continue;
        }
        starred = false;
        previous = Some(*row);
        let offset = (i * 16) as u32;
        let _ = write!(out, "  +{offset:#07x} [{:#07x}] ", base + offset);
        for (j, b) in row.iter().enumerate() {
            if j == 8 {
                out.push(' ');
            }
            match b {
                Some(b) => {
                    let _ = write!(out, " {b:02x}");
                }
                None => out.push_str(" --"),
            }
        }
        if let Some(ty) = as_type {
            out.push_str("  |");
            for v in decode_row(row, ty) {
                let _ = write!(out, " {v:>10}");
            }
        }
        out.push('\n');
        shown += 1;
    }
    (out, hidden)
}

fn decode_row(row: &[Option<u8>], ty: ValueType) -> Vec<String> {
    let width = match ty {
        ValueType::Bf16 => 2,
        ValueType::F32 | ValueType::U32 => 4,
    };
    row.chunks(width)
        .map(|c| {
            let Some(bytes) = c
                .iter()
                .copied()
                .collect::<Option<Vec<u8>>>()
                .filter(|b| b.len() == width)
            else {
                return "?".to_string();
            };
            match ty {
                ValueType::Bf16 => {
                    let bits = u16::from_le_bytes([bytes[0], bytes[1]]);
                    f32_text(f32::from_bits(u32::from(bits) << 16))
                }
                ValueType::F32 => {
                    f32_text(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
                }
                ValueType::U32 => {
                    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]).to_string()
                }
            }
        })
        .collect()
}

/// Tensor-memory cells (one row per lane, `None`: never written), `col0` being the first
/// column, in blocks of 8 columns; as f32 or, with `hex`, as raw 32-bit words. At most
/// `limit` lane rows per block; returns the text and how many lane rows were left out.
pub fn format_tmem(
    lanes: &[Vec<Option<u32>>],
    col0: u32,
    hex: bool,
    limit: usize,
) -> (String, usize) {
    let mut out = String::new();
    let cols = lanes.first().map_or(0, Vec::len);
    let written = lanes.iter().flatten().filter(|c| c.is_some()).count();
    let _ = writeln!(
        out,
        "  {written} of {} cells written (-- marks the others)",
        lanes.len() * cols
    );
    let mut hidden = 0;
    for block in (0..cols).step_by(8) {
        let end = (block + 8).min(cols);
        if lanes
            .iter()
            .all(|l| l[block..end].iter().all(Option::is_none))
        {
            let (a, b) = (col0 as usize + block, col0 as usize + end);
            let _ = writeln!(out, "  columns {a}..{b}: never written");
            continue;
        }
        let _ = write!(out, "  lane");
        for c in block..end {
            let _ = write!(out, " {:>11}", format!("col {}", col0 as usize + c));
        }
        out.push('\n');
        for (lane, cells) in lanes.iter().enumerate() {
            if lane == limit {
                hidden += lanes.len() - limit;
                break;
            }
            let _ = write!(out, "  {lane:>4}");
            for cell in &cells[block..end] {
                let text = match cell {
                    None => "--".to_string(),
                    Some(w) if hex => format!("{w:#010x}"),
                    Some(w) => f32_text(f32::from_bits(*w)),
                };
                let _ = write!(out, " {text:>11}");
            }
            out.push('\n');
        }
    }
    (out, hidden)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_read_well() {
        assert_eq!(f32_text(1.0), "1");
        assert_eq!(f32_text(-0.25), "-0.25");
        assert_eq!(f32_text(0.0), "0");
        assert_eq!(f32_text(1e-6), "1.000e-6");
        assert_eq!(f32_text(f32::NAN), "NaN");
    }

    #[test]
    fn smem_rows_collapse_and_decode() {
        let mut bytes = vec![Some(0u8); 64];
        bytes[0..4].copy_from_slice(&1.0f32.to_le_bytes().map(Some));
        bytes[60] = None;
        let (text, hidden) = format_smem(&bytes, 0x100, Some(ValueType::F32), usize::MAX);
        assert_eq!(hidden, 0);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert_eq!(lines[0], "  63 of 64 bytes written (-- marks the others)");
        assert!(lines[1].contains("00 00 80 3f") && lines[1].ends_with('0'));
        assert!(lines[1].contains("|          1"), "{text}");
        assert_eq!(lines[3], "  *");
        assert!(lines[4].contains("--") && lines[4].contains('?'));
        let (text, hidden) = format_smem(&bytes, 0, None, 1);
        assert_eq!((text.lines().count(), hidden), (2, 3));
    }
}
