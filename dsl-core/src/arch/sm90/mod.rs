//! Hopper (sm_90a) only: warpgroup MMA.

pub mod wgmma;
