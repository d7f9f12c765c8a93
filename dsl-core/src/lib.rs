//! The core of the kestrel DSL: the IR, tracing, layouts, the Blackwell/Hopper op set, the
//! PTX emitter, the CPU interpreter and the cudarc JIT.

pub mod arch;
pub mod emit;
pub mod interp;
pub mod ir;
pub mod jit;
pub mod layout;
pub mod pipeline;
pub mod ptxas;
pub mod target;
pub mod tensor;
pub mod tensor_map;
pub mod trace;

pub use target::Target;
