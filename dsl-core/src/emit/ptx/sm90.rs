//! wgmma (sm_90a).

use super::Printer;
use crate::ir::{Ty, WgmmaOp};

pub(super) fn wgmma(p: &mut Printer, op: &WgmmaOp) {
    let line = match op {
        WgmmaOp::Fence => "wgmma.fence.sync.aligned;".to_string(),
        WgmmaOp::MmaAsync {
            n,
            acc,
            a_desc,
            b_desc,
            scale_d,
            trans_a,
            trans_b,
        } => {
            let regs: Vec<String> = acc.iter().map(|r| p.reg(*r)).collect();
            format!(
                "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{{}}}, {}, {}, {}, 1, 1, {trans_a}, {trans_b};",
                regs.join(", "),
                p.operand(*a_desc, Ty::U64),
                p.operand(*b_desc, Ty::U64),
                p.operand(*scale_d, Ty::Pred)
            )
        }
        WgmmaOp::MmaAsyncRs {
            n,
            acc,
            a,
            b_desc,
            scale_d,
            trans_b,
        } => {
            let regs: Vec<String> = acc.iter().map(|r| p.reg(*r)).collect();
            let a: Vec<String> = a.iter().map(|r| p.reg(*r)).collect();
            format!(
                "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{{}}}, {{{}}}, {}, {}, 1, 1, {trans_b};",
                regs.join(", "),
                a.join(", "),
                p.operand(*b_desc, Ty::U64),
                p.operand(*scale_d, Ty::Pred)
            )
        }
        WgmmaOp::CommitGroup => "wgmma.commit_group.sync.aligned;".to_string(),
        WgmmaOp::WaitGroup { n } => format!("wgmma.wait_group.sync.aligned {n};"),
    };
    p.line(&line);
}
