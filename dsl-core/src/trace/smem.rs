//! The dynamic shared memory, carved into named buffers at trace time.

use super::builder::EntryValue;
use super::val::Val;
use super::with_builder;
use crate::arch::memory::Smem;
use crate::ir::{MemOp, Op, SmemBuffer, SourceLoc, Ty};

/// A named buffer of the kernel's dynamic shared memory at a trace-time offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmemRegion {
    pub name: String,
    /// Byte offset from the start of the dynamic shared memory.
    pub offset: u32,
    pub bytes: u32,
}

/// The shared::cta address of the start of the dynamic shared memory.
#[track_caller]
pub fn smem_base() -> Val<u32> {
    let loc = SourceLoc::caller();
    Val::from_reg(with_builder(|b| {
        b.entry_value(EntryValue::SmemBase, Ty::U32, loc, |_, dst| {
            vec![Op::Mem(MemOp::SmemBase { dst })]
        })
    }))
}

/// Reserves `bytes` bytes aligned to `align` (a power of two, at most 1024: the alignment
/// the dynamic shared memory itself is declared with).
#[track_caller]
pub fn smem_alloc(name: &str, bytes: u32, align: u32) -> SmemRegion {
    smem_alloc_with_layout(name, bytes, align, None)
}

/// Like [`smem_alloc`], recording the CuTe-printed layout the buffer holds (for the SMEM
/// map tools print).
#[track_caller]
pub fn smem_alloc_with_layout(
    name: &str,
    bytes: u32,
    align: u32,
    layout: Option<String>,
) -> SmemRegion {
    let loc = SourceLoc::caller();
    with_builder(|b| {
        if !align.is_power_of_two() || align > 1024 {
            b.error(
                format!(
                    "shared buffer `{name}`: alignment {align} must be a power of two of at most 1024"
                ),
                loc,
            );
        }
        let offset = b.smem_bytes.next_multiple_of(align.max(1));
        b.smem_bytes = offset + bytes;
        b.smem_buffers.push(SmemBuffer {
            name: name.to_string(),
            offset,
            bytes,
            align,
            layout,
        });
        SmemRegion {
            name: name.to_string(),
            offset,
            bytes,
        }
    })
}

impl SmemRegion {
    /// The buffer's first byte.
    #[track_caller]
    pub fn addr(&self) -> Smem {
        Smem::new(smem_base(), self.offset as i64)
    }
}
