//! Asynchronous copies: `cp.async`, 1-D bulk and TMA tensor copies, and their groups.

use super::Printer;
use super::ops::{address, regs_list, vector};
use crate::ir::{BulkWait, CopyOp, Operand, Reg, Ty};

pub(super) fn copy(p: &mut Printer, op: &CopyOp) {
    let line = match op {
        CopyOp::CpAsync {
            dst,
            src,
            bytes,
            src_bytes,
        } => {
            // .cg (L2 only) exists for 16-byte copies alone.
            let level = if *bytes == 16 { "cg" } else { "ca" };
            let fill = src_bytes
                .map(|n| format!(", {}", p.operand(n, Ty::U32)))
                .unwrap_or_default();
            format!(
                "cp.async.{level}.shared.global {}, {}, {bytes}{fill};",
                address(p, dst, 0),
                address(p, src, 0)
            )
        }
        CopyOp::CpAsyncCommit => "cp.async.commit_group;".into(),
        CopyOp::CpAsyncWait { n } => format!("cp.async.wait_group {n};"),
        CopyOp::BulkLoad {
            dst,
            src,
            bytes,
            bar,
        } => format!(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes {}, {}, {}, {};",
            address(p, dst, 0),
            address(p, src, 0),
            p.operand(*bytes, Ty::U32),
            address(p, bar, 0)
        ),
        CopyOp::TensorLoad {
            dst,
            map,
            coords,
            bar,
            multicast,
        } => {
            let (mc, mask) = match multicast {
                Some(m) => (
                    ".multicast::cluster",
                    format!(", {}", p.operand(*m, Ty::B16)),
                ),
                None => ("", String::new()),
            };
            format!(
                "cp.async.bulk.tensor.{}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes{mc} {}, {}, {}{mask};",
                coords.len(),
                address(p, dst, 0),
                box_operand(p, *map, coords),
                address(p, bar, 0)
            )
        }
        CopyOp::TensorStore { src, map, coords } => format!(
            "cp.async.bulk.tensor.{}d.global.shared::cta.tile.bulk_group {}, {};",
            coords.len(),
            box_operand(p, *map, coords),
            address(p, src, 0)
        ),
        CopyOp::BulkCommit => "cp.async.bulk.commit_group;".into(),
        CopyOp::BulkWaitGroup { n, until } => match until {
            BulkWait::Read => format!("cp.async.bulk.wait_group.read {n};"),
            BulkWait::Written => format!("cp.async.bulk.wait_group {n};"),
        },
        CopyOp::PrefetchTensorMap { map } => format!("prefetch.tensormap [{}];", p.reg(*map)),
        CopyOp::BulkPrefetchL2 { src, bytes } => format!(
            "cp.async.bulk.prefetch.L2.global {}, {};",
            address(p, src, 0),
            p.operand(*bytes, Ty::U32)
        ),
        CopyOp::StoreAsync { dst, src, bar } => {
            let values: Vec<String> = src.iter().map(|v| p.operand(*v, Ty::U32)).collect();
            format!(
                "st.async.shared::cluster.mbarrier::complete_tx::bytes{}.b32 {}, {}, {};",
                vector(values.len()),
                address(p, dst, 0),
                regs_list(&values),
                address(p, bar, 0)
            )
        }
    };
    p.line(&line);
}

/// `[map, {c0, c1, ..}]`, innermost coordinate first.
fn box_operand(p: &Printer, map: Reg, coords: &[Operand]) -> String {
    let coords: Vec<String> = coords.iter().map(|c| p.operand(*c, Ty::S32)).collect();
    format!("[{}, {{{}}}]", p.reg(map), coords.join(", "))
}
