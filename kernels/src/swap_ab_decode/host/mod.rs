//! What a serving engine calls: [`SwapAbDecode`] compiles, checks and launches (`launch.rs`);
//! [`dispatch::dispatch`] picks the key and schedule; [`problem`] and [`engine`] hold a launch's
//! inputs and run them on the GPU or the interpreter; [`resources`] reads ptxas' figures.

pub mod dispatch;
pub mod engine;
mod launch;
pub mod problem;
pub mod resources;

pub use launch::{
    Bound, CheckedCall, CompileMode, DecodeArgs, DecodeError, DeviceTensor, MAX_TOKENS,
    SwapAbDecode, check_softmax_scale,
};
