//! tcgen05 (sm_100a).

use super::Printer;
use crate::ir::{Operand, Tcgen05Op, Ty};

pub(super) fn tcgen05(p: &mut Printer, op: &Tcgen05Op) {
    let addr = |p: &Printer, o: &Operand| format!("[{}]", p.operand(*o, Ty::U32));
    let line = match op {
        Tcgen05Op::Alloc { dst_smem, ncols } => format!(
            "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 {}, {ncols};",
            addr(p, dst_smem)
        ),
        Tcgen05Op::RelinquishAllocPermit => {
            "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;".to_string()
        }
        Tcgen05Op::Dealloc { taddr, ncols } => format!(
            "tcgen05.dealloc.cta_group::1.sync.aligned.b32 {}, {ncols};",
            p.operand(*taddr, Ty::U32)
        ),
        Tcgen05Op::Mma {
            d_tmem,
            a_desc,
            b_desc,
            idesc,
            accumulate,
        } => format!(
            "tcgen05.mma.cta_group::1.kind::f16 {}, {}, {}, {}, {};",
            addr(p, d_tmem),
            p.operand(*a_desc, Ty::U64),
            p.operand(*b_desc, Ty::U64),
            p.operand(*idesc, Ty::U32),
            p.operand(*accumulate, Ty::Pred)
        ),
        Tcgen05Op::Commit { mbar } => format!(
            "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 {};",
            addr(p, mbar)
        ),
        Tcgen05Op::Ld32x32b { dst, taddr } => {
            let regs: Vec<String> = dst.iter().map(|r| p.reg(*r)).collect();
            format!(
                "tcgen05.ld.sync.aligned.32x32b.x{}.b32 {{{}}}, {};",
                dst.len(),
                regs.join(", "),
                addr(p, taddr)
            )
        }
        Tcgen05Op::WaitLd => "tcgen05.wait::ld.sync.aligned;".to_string(),
        Tcgen05Op::St32x32b { src, taddr } => {
            let regs: Vec<String> = src.iter().map(|r| p.reg(*r)).collect();
            format!(
                "tcgen05.st.sync.aligned.32x32b.x{}.b32 {}, {{{}}};",
                src.len(),
                addr(p, taddr),
                regs.join(", ")
            )
        }
        Tcgen05Op::WaitSt => "tcgen05.wait::st.sync.aligned;".to_string(),
        Tcgen05Op::FenceBeforeThreadSync => "tcgen05.fence::before_thread_sync;".to_string(),
        Tcgen05Op::FenceAfterThreadSync => "tcgen05.fence::after_thread_sync;".to_string(),
    };
    p.line(&line);
}
