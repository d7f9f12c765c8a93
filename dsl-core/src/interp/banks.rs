//! Shared-memory bank conflicts of ordinary loads and stores, counted the way Nsight
//! Compute's source counters count them ("L1 Wavefronts Shared" and its "Ideal"), so that a
//! conflict shows on the CPU before any GPU time is spent.
//!
//! The model (sm_90, 32 banks of 4 bytes): a warp's access is split into phases of lanes by
//! its size per lane, 32 lanes for 1-4 bytes, 16 for 8, 8 for 16, as the hardware serves
//! at most 128 bytes a wavefront. A phase takes as many wavefronts as the most distinct
//! 4-byte words any one bank holds among its active lanes (lanes reading the same word share
//! it); a phase with no active lane takes none. Ideal is the distinct words over 32, rounded
//! up, per phase. On the H200 this reproduced Nsight Compute's counts for the decode kernel's
//! scalar, 64-bit and 128-bit shared stores (1, 2 and 4 ideal wavefronts a warp; 4-way on
//! the scalar partial stores the O MMA's fragment made).

use crate::ir::SourceLoc;

/// Banks of shared memory, each 4 bytes wide.
const BANKS: u64 = 32;

/// One `ld.shared` or `st.shared` of the kernel, summed over a run
/// ([`RunStats::shared_accesses`](super::RunStats::shared_accesses), with
/// [`Options::shared_wavefronts`](super::Options::shared_wavefronts)).
///
/// ```
/// use dsl_core::Target;
/// use dsl_core::arch::memory::store;
/// use dsl_core::arch::thread::thread_idx_x;
/// use dsl_core::interp::{Arg, Launch, Memory, Options, run_with};
/// use dsl_core::trace::{smem_alloc, threads, trace_kernel};
///
/// // Each lane stores a word at the start of its own 128-byte row: all in bank 0.
/// let kernel = trace_kernel("rows", Target::Sm90a, || {
///     threads(32, 1, 1);
///     let rows = smem_alloc("rows", 32 * 128, 16);
///     store(rows.addr() + thread_idx_x() * 128u32, thread_idx_x());
/// })
/// .unwrap();
/// let options = Options { shared_wavefronts: true, ..Options::default() };
/// let stats =
///     run_with(&kernel, &mut Memory::new(), &[], &Launch::grid([1, 1, 1]), &options).unwrap();
/// let store = &stats.shared_accesses[0];
/// assert_eq!((store.wavefronts, store.ideal, store.excessive()), (32, 1, 31));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedAccess {
    /// The op's PTX mnemonic.
    pub op: &'static str,
    /// The stage comment in force when the op was traced.
    pub stage: Option<String>,
    pub loc: SourceLoc,
    /// Bytes each lane moves.
    pub bytes: u32,
    /// Warp executions with at least one active lane.
    pub executions: u64,
    pub wavefronts: u64,
    /// The wavefronts without bank conflicts.
    pub ideal: u64,
}

impl SharedAccess {
    /// Wavefronts spent on bank conflicts.
    pub fn excessive(&self) -> u64 {
        self.wavefronts - self.ideal
    }
}

/// Running wavefront counts of one instruction.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Counts {
    pub(crate) bytes: u32,
    pub(crate) executions: u64,
    pub(crate) wavefronts: u64,
    pub(crate) ideal: u64,
}

impl Counts {
    /// Adds one warp execution: `lanes` are (lane, byte address) of the active lanes, each
    /// moving `bytes` bytes.
    pub(crate) fn add(&mut self, lanes: &[(usize, u64)], bytes: usize) {
        if lanes.is_empty() {
            return;
        }
        let (wavefronts, ideal) = wavefronts(lanes, bytes);
        self.bytes = bytes as u32;
        self.executions += 1;
        self.wavefronts += wavefronts;
        self.ideal += ideal;
    }
}

/// The wavefronts of one warp access and its ideal: see the module docs.
pub(crate) fn wavefronts(lanes: &[(usize, u64)], bytes: usize) -> (u64, u64) {
    let phase_lanes = 128 / bytes.clamp(4, 16);
    let words_per_lane = bytes.div_ceil(4) as u64;
    let (mut actual, mut ideal) = (0, 0);
    for phase in 0..32 / phase_lanes {
        let mut words: Vec<u64> = lanes
            .iter()
            .filter(|(lane, _)| lane / phase_lanes == phase)
            .flat_map(|&(_, address)| (0..words_per_lane).map(move |w| address / 4 + w))
            .collect();
        if words.is_empty() {
            continue;
        }
        words.sort_unstable();
        words.dedup();
        let mut per_bank = [0u64; BANKS as usize];
        for word in &words {
            per_bank[(word % BANKS) as usize] += 1;
        }
        actual += per_bank.iter().max().copied().unwrap_or(0);
        ideal += (words.len() as u64).div_ceil(BANKS);
    }
    (actual, ideal)
}

#[cfg(test)]
mod tests {
    use super::wavefronts;

    fn warp(bytes: usize, address_of: impl Fn(u64) -> u64) -> (u64, u64) {
        let lanes: Vec<(usize, u64)> = (0..32).map(|l| (l as usize, address_of(l))).collect();
        wavefronts(&lanes, bytes)
    }

    #[test]
    fn consecutive_words_take_one_wavefront_a_128_bytes() {
        assert_eq!(warp(4, |l| 4 * l), (1, 1));
        assert_eq!(warp(8, |l| 8 * l), (2, 2));
        assert_eq!(warp(16, |l| 16 * l), (4, 4));
    }

    #[test]
    fn a_stride_of_the_bank_count_serialises_every_lane() {
        assert_eq!(warp(4, |l| 128 * l), (32, 1));
        // One word of padding a row spreads the lanes over every bank again.
        assert_eq!(warp(4, |l| 132 * l), (1, 1));
    }

    #[test]
    fn lanes_reading_one_word_share_it() {
        assert_eq!(warp(4, |_| 64), (1, 1));
        assert_eq!(warp(4, |l| 4 * (l % 2)), (1, 1));
    }

    #[test]
    fn the_decode_partial_rows_conflict_four_ways_unpadded() {
        // Lane 4g + t stores head 2t at dim g of an fp32 [H, 512] partial.
        let partial = |row_words: u64| warp(4, move |l| 4 * ((2 * (l % 4)) * row_words + l / 4));
        assert_eq!(partial(512), (4, 1));
        assert_eq!(partial(516), (1, 1));
    }

    #[test]
    fn wide_accesses_conflict_only_within_their_phase() {
        // 64-bit: lanes 0-15 and 16-31 are separate phases; rows of 64 bytes put lanes 0
        // and 2 (rows 0 and 2, same column) in one bank within the first phase.
        assert_eq!(warp(8, |l| 64 * (l / 4) + 8 * (l % 4)), (4, 2));
        // Inactive lanes cost nothing: half a warp of 128-bit accesses is two phases.
        let half: Vec<(usize, u64)> = (0..16).map(|l| (l, 16 * l as u64)).collect();
        assert_eq!(wavefronts(&half, 16), (2, 2));
    }
}
