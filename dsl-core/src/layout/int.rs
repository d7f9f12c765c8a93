//! Trace-time integers: a value is either known while tracing (`Static`) or only at run
//! time (`Dynamic`, e.g. a register holding the thread index).
//!
//! Layout arithmetic runs on [`Int`]. Whenever both operands are static the result is
//! computed on the spot, and identities (`x * 0`, `x * 1`, `x + 0`, `x / 1`, `x % 1`) are
//! folded, so a [`DynInt`] method is called only when a runtime instruction is really needed.

use std::fmt;
use std::ops::{Add, Mul};

/// The runtime integer operations that layouts and swizzles need.
///
/// The DSL implements this for its register values: each method appends one instruction to
/// the trace. [`Int`] calls a method only when the result is not known at trace time, and
/// never with a neutral constant: `add_const` never gets 0, `mul_const` never 0 or 1,
/// `div_const`/`rem_const` never 1, `shr_const` never 0, `and_const` never 0 or -1.
///
/// Values are offsets and coordinates, so they are never negative; `div_const` and
/// `rem_const` may assume that. Every implementor can absorb a static-only value (the
/// `From<StaticOnly>` bound), which lets static layouts be evaluated at any coordinate type.
pub trait DynInt: Clone + fmt::Debug + From<StaticOnly> {
    /// `self + other`.
    fn add(self, other: Self) -> Self;
    /// `self * other`; only needed when a stride and a coordinate are both runtime values.
    fn mul(self, other: Self) -> Self;
    /// `self + c`.
    fn add_const(self, c: i64) -> Self;
    /// `self * c`.
    fn mul_const(self, c: i64) -> Self;
    /// `self / c` for `c >= 2`.
    fn div_const(self, c: i64) -> Self;
    /// `self % c` for `c >= 2`.
    fn rem_const(self, c: i64) -> Self;
    /// `self >> bits` (logical; values are non-negative).
    fn shr_const(self, bits: u32) -> Self;
    /// `self & mask`.
    fn and_const(self, mask: i64) -> Self;
    /// `self ^ other`.
    fn xor(self, other: Self) -> Self;
}

/// The dynamic type of layouts and integers that are static by construction: it has no
/// values, so an `Int<StaticOnly>` is always `Int::Static`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StaticOnly {}

impl DynInt for StaticOnly {
    fn add(self, _: Self) -> Self {
        match self {}
    }
    fn mul(self, _: Self) -> Self {
        match self {}
    }
    fn add_const(self, _: i64) -> Self {
        match self {}
    }
    fn mul_const(self, _: i64) -> Self {
        match self {}
    }
    fn div_const(self, _: i64) -> Self {
        match self {}
    }
    fn rem_const(self, _: i64) -> Self {
        match self {}
    }
    fn shr_const(self, _: u32) -> Self {
        match self {}
    }
    fn and_const(self, _: i64) -> Self {
        match self {}
    }
    fn xor(self, _: Self) -> Self {
        match self {}
    }
}

/// An integer that is known at trace time (`Static`) or only at run time (`Dynamic`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Int<D = StaticOnly> {
    Static(i64),
    Dynamic(D),
}

impl<D: DynInt> Int<D> {
    /// The value, if it is known at trace time.
    pub fn as_static(&self) -> Option<i64> {
        match self {
            Int::Static(v) => Some(*v),
            Int::Dynamic(_) => None,
        }
    }

    pub fn is_static(&self) -> bool {
        matches!(self, Int::Static(_))
    }

    /// The same integer over another dynamic type that can hold this one's runtime values.
    pub fn lift<C: DynInt + From<D>>(self) -> Int<C> {
        match self {
            Int::Static(v) => Int::Static(v),
            Int::Dynamic(d) => Int::Dynamic(C::from(d)),
        }
    }

    /// `self / c` for a positive constant (floor division of a non-negative value).
    ///
    /// # Panics
    /// If `c <= 0`: divisors come from layout extents, which are positive.
    pub fn div_const(self, c: i64) -> Self {
        assert!(c > 0, "division by the non-positive constant {c}");
        match self {
            Int::Static(v) => Int::Static(v.div_euclid(c)),
            Int::Dynamic(d) if c == 1 => Int::Dynamic(d),
            Int::Dynamic(d) => Int::Dynamic(d.div_const(c)),
        }
    }

    /// `self % c` for a positive constant.
    ///
    /// # Panics
    /// If `c <= 0`: moduli come from layout extents, which are positive.
    pub fn rem_const(self, c: i64) -> Self {
        assert!(c > 0, "remainder by the non-positive constant {c}");
        match self {
            Int::Static(v) => Int::Static(v.rem_euclid(c)),
            Int::Dynamic(_) if c == 1 => Int::Static(0),
            Int::Dynamic(d) => Int::Dynamic(d.rem_const(c)),
        }
    }
}

impl Int<StaticOnly> {
    /// The value; an integer without a dynamic type is always static.
    pub fn value(&self) -> i64 {
        match self {
            Int::Static(v) => *v,
            Int::Dynamic(never) => match *never {},
        }
    }
}

impl<D: DynInt> Add for Int<D> {
    type Output = Int<D>;
    fn add(self, other: Int<D>) -> Int<D> {
        match (self, other) {
            (Int::Static(a), Int::Static(b)) => Int::Static(a + b),
            (Int::Dynamic(d), Int::Static(c)) | (Int::Static(c), Int::Dynamic(d)) => {
                Int::Dynamic(add_const(d, c))
            }
            (Int::Dynamic(a), Int::Dynamic(b)) => Int::Dynamic(a.add(b)),
        }
    }
}

impl<D: DynInt> Add<i64> for Int<D> {
    type Output = Int<D>;
    fn add(self, c: i64) -> Int<D> {
        self + Int::Static(c)
    }
}

impl<D: DynInt> Mul for Int<D> {
    type Output = Int<D>;
    fn mul(self, other: Int<D>) -> Int<D> {
        match (self, other) {
            (Int::Static(a), Int::Static(b)) => Int::Static(a * b),
            (Int::Dynamic(d), Int::Static(c)) | (Int::Static(c), Int::Dynamic(d)) => match c {
                0 => Int::Static(0),
                _ => Int::Dynamic(mul_const(d, c)),
            },
            (Int::Dynamic(a), Int::Dynamic(b)) => Int::Dynamic(a.mul(b)),
        }
    }
}

impl<D: DynInt> Mul<i64> for Int<D> {
    type Output = Int<D>;
    fn mul(self, c: i64) -> Int<D> {
        self * Int::Static(c)
    }
}

impl<D> From<i64> for Int<D> {
    fn from(v: i64) -> Self {
        Int::Static(v)
    }
}

impl<D: fmt::Debug> fmt::Display for Int<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Int::Static(v) => write!(f, "{v}"),
            Int::Dynamic(d) => write!(f, "{d:?}"),
        }
    }
}

impl<D: fmt::Debug> fmt::Debug for Int<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `d + c`, emitting nothing for `c == 0`.
fn add_const<D: DynInt>(d: D, c: i64) -> D {
    if c == 0 { d } else { d.add_const(c) }
}

/// `d * c` for `c != 0`, emitting nothing for `c == 1`.
fn mul_const<D: DynInt>(d: D, c: i64) -> D {
    if c == 1 { d } else { d.mul_const(c) }
}

/// A partially evaluated offset `dynamic + constant`: layouts sum many terms, and keeping
/// the static ones apart lets them fold into one constant however they interleave with
/// runtime terms (and lets a swizzle split the constant, see `Swizzle::apply_int`).
#[derive(Clone, Debug)]
pub(crate) struct Affine<D> {
    pub(crate) dynamic: Option<D>,
    pub(crate) constant: i64,
}

impl<D: DynInt> Affine<D> {
    pub(crate) fn zero() -> Self {
        Affine {
            dynamic: None,
            constant: 0,
        }
    }

    pub(crate) fn add_int(&mut self, term: Int<D>) {
        match term {
            Int::Static(c) => self.constant += c,
            Int::Dynamic(d) => {
                self.dynamic = Some(match self.dynamic.take() {
                    None => d,
                    Some(acc) => acc.add(d),
                })
            }
        }
    }

    pub(crate) fn into_int(self) -> Int<D> {
        match self.dynamic {
            None => Int::Static(self.constant),
            Some(d) => Int::Dynamic(add_const(d, self.constant)),
        }
    }
}

/// Swizzle arithmetic on a runtime value: `d ^ ((d >> shift) & mask)`.
pub(crate) fn xor_shifted_bits<D: DynInt>(d: D, shift: u32, mask: i64) -> D {
    let moved = d.clone().shr_const(shift).and_const(mask);
    d.xor(moved)
}
