//! Blackwell (sm_100a) only: tensor memory and the tcgen05 MMA.

pub mod tcgen05;
