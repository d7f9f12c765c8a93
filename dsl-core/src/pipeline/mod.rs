//! Producer/consumer pipelines over shared-memory stages, warp roles and persistent tile
//! scheduling: the structure of every fast Hopper and Blackwell kernel (CUTLASS's
//! `PipelineTmaAsync` / `PipelineTmaUmmaAsync`, CuTe DSL's `cutlass.pipeline`).
//!
//! A pipeline owns `N` stages and two mbarriers per stage: `full[s]` (the producer's copy
//! of stage `s` has landed) and `empty[s]` (every consumer is done reading it). Each role
//! walks the stages with a [`PipelineState`] (stage index and phase bit) that runtime loops
//! carry; the producer starts at phase 1 because the buffers start empty, the consumers at
//! phase 0.
//!
//! ```text
//! producer (one thread)                         consumers
//!   bar = pipe.producer_acquire(&st)  ──full──▶   pipe.consumer_wait(&st)
//!   map.load(stage(st), coords, bar)               ... MMAs read stage(st) ...
//!   st = st.advance()                 ◀─empty──   pipe.consumer_release(&st); st = st.advance()
//! ```
//!
//! Flavours: [`TmaPipeline`] (consumers release with an mbarrier arrive) and
//! [`TmaPipeline::umma`] (the tcgen05 MMA thread releases with `tcgen05.commit`, which
//! arrives once the MMAs reading the stage are done). Roles: [`roles`]. Persistent grids:
//! [`scheduler`].

pub mod roles;
pub mod scheduler;
mod state;
mod tma;

pub use state::PipelineState;
pub use tma::TmaPipeline;
