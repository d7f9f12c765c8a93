//! The decode kernel: the entry points and the setup both schedules share ([`kernel`]), the
//! split and streamed schedules (`split.rs`, `stream.rs`), and the stages they are built
//! from: loads and dequant (`inputs.rs`), the streamed records' stage (`stage.rs`), the MMA
//! stage per target (`mma/`: `tcgen05.rs`, `wgmma.rs`), the softmax (`softmax.rs`), the merge and epilogue
//! (`merge.rs`, with the clusters' inbox that peers push their partials into,
//! `inbox.rs`), the shared-memory buffers (`smem.rs`), the teams of warps that work on a
//! tile together (`team.rs`) and the key's trace-time plan ([`plan`]).

pub(super) mod inbox;
pub(super) mod inputs;
pub mod kernel;
pub(super) mod merge;
pub(super) mod mma;
pub mod plan;
pub(super) mod prefetch;
pub(super) mod smem;
pub(super) mod softmax;
pub(super) mod split;
pub(super) mod stage;
pub(super) mod stream;
pub(super) mod team;
