//! Procedural macros of the kestrel DSL.
//!
//! `#[kernel]` and `#[device]` rewrite a function body so that running it *traces* a
//! kernel: `if`/`else`, `while` and `for` go through the DSL's control-flow builders (a
//! `bool` condition or a Rust iterator stays compile-time, a `Pred` or a `dyn_range` becomes
//! a PTX branch or loop), comparisons and `&&`/`||` go through traits that return a `bool`
//! for Rust values and a `Pred` for DSL values. See `dsl_core::trace::control`.

mod analysis;
mod carry;
mod kernel;
mod params;
mod rewrite;

use proc_macro::TokenStream;

/// Turns `fn name(#[comptime] a: A, .., x: Tensor<..>, n: Val<u32>) { body }` into
/// `fn name(target: Target, a: A, ..) -> Result<Kernel, TraceError>` that traces `body`.
///
/// Arguments marked `#[comptime]` are plain Rust values at trace time; the others are the
/// kernel's runtime parameters and must implement `KernelParam`. Options:
/// `#[kernel(name = "entry_name")]` sets the PTX entry name, `#[kernel(crate = path)]` the
/// path of `dsl_core`, `#[kernel(debug)]` prints the expansion while compiling.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand_kernel(attr.into(), item.into()).into()
}

/// Rewrites a helper function's body like `#[kernel]` does, keeping its signature: a
/// device function is inlined into the kernel at trace time.
#[proc_macro_attribute]
pub fn device(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand_device(attr.into(), item.into()).into()
}

/// Derives `Carry` for a struct whose fields all implement it, so the struct can be
/// assigned inside runtime branches and loops.
#[proc_macro_derive(Carry)]
pub fn derive_carry(item: TokenStream) -> TokenStream {
    carry::derive(item.into()).into()
}

/// Derives `KernelParam` for a struct with named fields that all implement it: a kernel
/// parameter of the struct's type declares each field, in order, as a PTX parameter named
/// after the field. Entry points that share a parameter list (a production and a debug
/// entry) write it once, as the struct.
#[proc_macro_derive(KernelParam)]
pub fn derive_kernel_param(item: TokenStream) -> TokenStream {
    params::derive(item.into()).into()
}
