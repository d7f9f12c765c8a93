//! The GEMM's tile shapes, stages and warp roles, fixed per target at compile time.

use dsl_core::Target;

/// K elements per pipeline stage: one 128-byte swizzle row of bf16.
pub const TILE_K: u32 = 64;
/// Bytes of one bf16 element.
pub const ELEM_BYTES: u32 = 2;

/// What a target's GEMM kernel is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tiling {
    /// Output rows per CTA tile.
    pub tile_m: u32,
    /// Output columns per CTA tile.
    pub tile_n: u32,
    /// Shared-memory stages of the A/B ring.
    pub stages: u32,
    /// Consumer warpgroups (sm_90a: each owns `tile_m / consumers` rows; sm_100a: the
    /// epilogue warpgroup).
    pub consumers: u32,
}

impl Tiling {
    /// The tiling of `target`'s kernel.
    pub fn for_target(target: Target) -> Tiling {
        match target {
            // 2 consumer warpgroups of m64n256k16 wgmma; 4 stages of 48 KiB.
            Target::Sm90a => Tiling {
                tile_m: 128,
                tile_n: 256,
                stages: 4,
                consumers: 2,
            },
            // One M=128, N=256 tcgen05 MMA per K-step into TMEM; one epilogue warpgroup.
            Target::Sm100a => Tiling {
                tile_m: 128,
                tile_n: 256,
                stages: 4,
                consumers: 1,
            },
        }
    }

    /// Threads per CTA: one producer warpgroup plus the consumers.
    pub fn threads(&self) -> u32 {
        128 * (1 + self.consumers)
    }

    pub fn a_stage_bytes(&self) -> u32 {
        self.tile_m * TILE_K * ELEM_BYTES
    }

    pub fn b_stage_bytes(&self) -> u32 {
        self.tile_n * TILE_K * ELEM_BYTES
    }

    /// Bytes the two TMA boxes of one stage complete on its `full` barrier.
    pub fn stage_tx_bytes(&self) -> u32 {
        self.a_stage_bytes() + self.b_stage_bytes()
    }
}
