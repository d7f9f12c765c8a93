//! The rules, one function each, returning what to do when broken. The verify pass applies
//! them to the IR; the trace-time API in `arch/` applies the same functions to its arguments,
//! so that a mistake is reported at the author's line with the same text.

use crate::Target;
use crate::ir::{BinaryOp, LaunchBounds, Requirement, SmemBuffer, Ty, UnaryOp};

/// Op `name` with requirement `req` exists on `target`.
pub fn available(name: &str, req: &Requirement, target: Target) -> Result<(), String> {
    let missing = req.missing(target.capabilities());
    if missing.is_empty() {
        return Ok(());
    }
    let with: Vec<String> = Target::ALL
        .iter()
        .filter(|t| req.supports(**t))
        .map(|t| format!("{t} ({})", t.family()))
        .collect();
    let needs = if with.is_empty() {
        "a target the project does not have".to_string()
    } else {
        with.join(" or ")
    };
    Err(format!(
        "`{name}` is not available on {target}: it needs {needs}; {target} lacks {missing}"
    ))
}

/// wgmma `m64nNk16`: N from 8 to 256 in steps of 8.
pub fn wgmma_n(n: u32) -> Result<(), String> {
    if (8..=256).contains(&n) && n % 8 == 0 {
        Ok(())
    } else {
        Err(format!(
            "wgmma m64nNk16 takes N from 8 to 256 in steps of 8, got {n}"
        ))
    }
}

/// A wgmma f32 accumulator of N columns is N/2 registers a thread.
pub fn wgmma_accumulator(n: u32, registers: usize) -> Result<(), String> {
    if registers == (n / 2) as usize {
        Ok(())
    } else {
        Err(format!(
            "wgmma m64n{n}k16 accumulates into N/2 = {} f32 registers a thread, got {registers}: \
             make the accumulator with `Accumulator::zeros({n})`",
            n / 2
        ))
    }
}

/// wgmma transpose immediates are 0 (K-major) or 1 (MN-major).
pub fn wgmma_transpose(trans_a: u8, trans_b: u8) -> Result<(), String> {
    if trans_a <= 1 && trans_b <= 1 {
        Ok(())
    } else {
        Err(format!(
            "transpose flags are 0 (K-major) or 1 (MN-major), got trans-a {trans_a} and \
             trans-b {trans_b}"
        ))
    }
}

/// `tcgen05.alloc` / `dealloc` column counts.
pub fn tmem_columns(ncols: u32) -> Result<(), String> {
    if (32..=512).contains(&ncols) && ncols.is_power_of_two() {
        Ok(())
    } else {
        Err(format!(
            "TMEM allocations are a power of two from 32 to 512 columns, got {ncols}"
        ))
    }
}

/// `tcgen05.ld.32x32b.xN`: N a power of two up to 128.
pub fn tcgen05_ld_columns(columns: usize) -> Result<(), String> {
    tcgen05_32x32b_columns("tcgen05.ld.32x32b loads", columns)
}

/// `tcgen05.st.32x32b.xN`: the same N as the load.
pub fn tcgen05_st_columns(columns: usize) -> Result<(), String> {
    tcgen05_32x32b_columns("tcgen05.st.32x32b stores", columns)
}

/// The `.xN` of the `32x32b` shape, loads and stores alike: a power of two up to 128.
fn tcgen05_32x32b_columns(what: &str, columns: usize) -> Result<(), String> {
    if columns.is_power_of_two() && columns <= 128 {
        Ok(())
    } else {
        Err(format!("{what} 1, 2, 4, ... or 128 columns, not {columns}"))
    }
}

/// `ldmatrix` / `stmatrix` `.m8n8.xN`: 1, 2 or 4 matrices, one b32 register each a lane.
pub fn matrix_count(what: &str, n: usize) -> Result<(), String> {
    if matches!(n, 1 | 2 | 4) {
        Ok(())
    } else {
        Err(format!(
            "{what} moves 1, 2 or 4 8x8 matrices (.x1, .x2, .x4), one b32 register each, not \
             {n}: split it into such groups"
        ))
    }
}

/// Vector loads and stores move 1, 2 or 4 elements.
pub fn vector_width(n: usize) -> Result<(), String> {
    if matches!(n, 1 | 2 | 4) {
        Ok(())
    } else {
        Err(format!(
            "vector accesses move 1, 2 or 4 elements, not {n}: split it into such accesses"
        ))
    }
}

/// `bar.sync id` (the CTA-wide barrier and named barriers share ids 0..16).
pub fn barrier_id(id: u32) -> Result<(), String> {
    if id < 16 {
        Ok(())
    } else {
        Err(format!("barrier id {id} is not in 0..16"))
    }
}

/// A named barrier: id 1..16, a positive multiple of 32 threads, at most the CTA's `cta`
/// (0 when the block shape is not known yet).
pub fn named_barrier(id: u32, threads: u32, cta: u32) -> Result<(), String> {
    if !(1..16).contains(&id) {
        return Err(format!(
            "named barrier id {id}: use 1..16 (0 is the CTA-wide barrier)"
        ));
    }
    if threads == 0 || threads % 32 != 0 || (cta > 0 && threads > cta) {
        return Err(format!(
            "named barrier {id} for {threads} threads: the count is a positive multiple of 32 \
             (whole warps), at most the CTA's {cta}"
        ));
    }
    Ok(())
}

/// `setmaxnreg`: a multiple of 8 in 24..=256.
pub fn setmaxnreg(regs: u32) -> Result<(), String> {
    if (24..=256).contains(&regs) && regs % 8 == 0 {
        Ok(())
    } else {
        Err(format!(
            "setmaxnreg {regs}: the count is a multiple of 8 in 24..=256"
        ))
    }
}

/// `setmaxnreg` needs a register count ptxas knows at kernel entry.
pub fn setmaxnreg_entry(launch: &LaunchBounds) -> Result<(), String> {
    if launch.entry_registers().is_some() {
        Ok(())
    } else {
        Err(
            "setmaxnreg needs a known register count at kernel entry: call `max_regs(..)` or \
             `min_ctas_per_sm(..)` before it (ptxas would ignore it, C7508)"
                .into(),
        )
    }
}

/// `cp.async` copies 4, 8 or 16 bytes.
pub fn cp_async_bytes(bytes: u32) -> Result<(), String> {
    if matches!(bytes, 4 | 8 | 16) {
        Ok(())
    } else {
        Err(format!("cp.async copies 4, 8 or 16 bytes, not {bytes}"))
    }
}

/// A 1-D bulk copy moves a positive multiple of 16 bytes.
pub fn bulk_bytes(bytes: u64) -> Result<(), String> {
    if bytes > 0 && bytes % 16 == 0 {
        Ok(())
    } else {
        Err(format!(
            "a bulk copy moves a positive multiple of 16 bytes, not {bytes}"
        ))
    }
}

/// TMA tensor maps and copies have rank 1 to 5.
pub fn tensor_map_rank(rank: usize) -> Result<(), String> {
    if (1..=crate::tensor_map::MAX_RANK).contains(&rank) {
        Ok(())
    } else {
        Err(format!(
            "rank {rank}; TMA copies take rank 1 to {}",
            crate::tensor_map::MAX_RANK
        ))
    }
}

/// `cvt.rn.f16x2.e2m1x2` reads one of the four bytes of a b32.
pub fn e2m1_byte(byte: u8) -> Result<(), String> {
    if byte < 4 {
        Ok(())
    } else {
        Err(format!("byte {byte} of a b32: a word has bytes 0..4"))
    }
}

/// mbarrier counts (arrivals and transaction bytes) are below 2^20.
pub fn mbarrier_count(what: &str, count: u64, min: u64) -> Result<(), String> {
    const LIMIT: u64 = (1 << 20) - 1;
    if (min..=LIMIT).contains(&count) {
        Ok(())
    } else {
        Err(format!(
            "{what} {count} is outside {min}..={LIMIT} (the mbarrier's 20-bit counts)"
        ))
    }
}

/// The types a unary op exists on.
pub fn unary_ty(op: UnaryOp, ty: Ty) -> Result<(), String> {
    let ok = match op {
        UnaryOp::Neg => matches!(
            ty,
            Ty::S32 | Ty::U32 | Ty::B32 | Ty::S64 | Ty::U64 | Ty::F32
        ),
        UnaryOp::Not => true,
        UnaryOp::Abs => matches!(ty, Ty::S32 | Ty::S64 | Ty::F32),
        UnaryOp::Ex2Approx | UnaryOp::Rcp => ty == Ty::F32,
    };
    defined_on(ok, ty)
}

/// The types a binary op exists on.
pub fn binary_ty(op: BinaryOp, ty: Ty) -> Result<(), String> {
    let int = matches!(ty, Ty::U32 | Ty::S32 | Ty::B32 | Ty::U64 | Ty::S64);
    let ok = match op {
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Div
        | BinaryOp::Min
        | BinaryOp::Max => int || ty == Ty::F32,
        BinaryOp::MulHi | BinaryOp::Rem => int,
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => true,
        BinaryOp::Shl => ty != Ty::Pred,
        BinaryOp::Shr => ty != Ty::Pred && ty != Ty::F32,
    };
    defined_on(ok, ty)
}

/// `mul.wide` widens 32-bit integers.
pub fn mul_wide_ty(ty: Ty) -> Result<(), String> {
    defined_on(matches!(ty, Ty::U32 | Ty::B32 | Ty::S32), ty)
}

/// `fma` (floats) and `mad.lo` (integers).
pub fn fma_ty(ty: Ty) -> Result<(), String> {
    defined_on(!matches!(ty, Ty::Pred | Ty::B16), ty)
}

/// `setp` compares values, not predicates.
pub fn setp_ty(ty: Ty) -> Result<(), String> {
    defined_on(ty != Ty::Pred, ty)
}

/// `cvt` between numeric types (a predicate is made with `setp` and read with `selp`).
pub fn convert_tys(dst: Ty, src: Ty) -> Result<(), String> {
    if dst == Ty::Pred || src == Ty::Pred {
        return Err(
            "not defined on pred: compare with `setp` to make a predicate, `selp` to read one"
                .into(),
        );
    }
    Ok(())
}

fn defined_on(ok: bool, ty: Ty) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("not defined on {}", ty.ptx()))
    }
}

/// The block shape: every dimension at least 1, at most 1024 threads.
pub fn block_shape(threads: [u32; 3]) -> Result<(), String> {
    let n: u64 = threads.iter().map(|&t| t as u64).product();
    if threads.contains(&0) || n > 1024 {
        Err(format!(
            "block shape {threads:?} has {n} threads: every dimension is at least 1 and a CTA \
             has at most 1024 threads"
        ))
    } else {
        Ok(())
    }
}

/// A fixed cluster shape: every dimension at least 1, at most 16 CTAs.
pub fn cluster_shape(cluster: [u32; 3]) -> Result<(), String> {
    let n: u64 = cluster.iter().map(|&c| c as u64).product();
    if cluster.contains(&0) || n > 16 {
        Err(format!(
            "cluster shape {cluster:?} has {n} CTAs: every dimension is at least 1 and a \
             cluster has at most 16 CTAs (8 portably)"
        ))
    } else {
        Ok(())
    }
}

/// `.maxnreg`: 24 to 255 registers a thread (the hardware's per-thread maximum).
pub fn max_regs(n: u32) -> Result<(), String> {
    if (24..=255).contains(&n) {
        Ok(())
    } else {
        Err(format!("max_regs({n}): a thread has 24 to 255 registers"))
    }
}

/// `.minnctapersm`: at least one CTA.
pub fn min_ctas_per_sm(n: u32) -> Result<(), String> {
    if n >= 1 {
        Ok(())
    } else {
        Err("min_ctas_per_sm(0): ask for at least one resident CTA".into())
    }
}

/// The kernel's dynamic shared memory fits a CTA of `target`.
pub fn smem_bytes(bytes: u32, target: Target) -> Result<(), String> {
    let max = target.max_smem_bytes();
    if bytes <= max {
        Ok(())
    } else {
        Err(format!(
            "{bytes} bytes of dynamic shared memory; a CTA on {target} has at most {max}: use \
             fewer stages or smaller tiles"
        ))
    }
}

/// A named buffer is aligned and lies inside the kernel's `smem_bytes`.
pub fn smem_buffer(b: &SmemBuffer, smem_bytes: u32) -> Result<(), String> {
    if !b.align.is_power_of_two() || b.offset % b.align != 0 {
        return Err(format!(
            "shared-memory buffer `{}` at offset {} is not aligned to its {} bytes (a power of \
             two)",
            b.name, b.offset, b.align
        ));
    }
    let end = b.offset as u64 + b.bytes as u64;
    if end > smem_bytes as u64 {
        return Err(format!(
            "shared-memory buffer `{}` spans bytes [{}, {end}) but the kernel's dynamic shared \
             memory is {smem_bytes} bytes: raise `smem_bytes` to at least {end}",
            b.name, b.offset
        ));
    }
    Ok(())
}
