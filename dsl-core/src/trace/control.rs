//! Runtime control flow: what `#[kernel]` rewrites `if`, `while`, `for`, comparisons and
//! `&&`/`||` into. Whether a construct is a compile-time one (plain Rust, unrolled) or a
//! runtime one (a PTX branch or loop) is decided by the type of its condition or range:
//! `bool` and Rust iterators are compile-time, [`Pred`] and [`DynRange`] are runtime.
//!
//! A runtime `if` traces both arms; every variable the arms assign is carried out of the
//! `if` as a merged value ([`Carry`]). A runtime loop carries the variables its body assigns
//! in registers written before the loop and at the end of each iteration. A compile-time
//! value (a Rust integer, a `bool`, a `Vec`'s length) that ends up different between the
//! arms, or after an iteration, cannot be represented in the kernel and is a trace error.

use super::val::{IntoVal, Number, Pred, Scalar, Val, emit_at};
use super::{trace_error_at, with_builder};
use crate::ir::{AluOp, Op, Operand, Reg, SourceLoc};

/// A value that can flow out of a runtime branch or around a runtime loop: its runtime
/// part is a list of registers, the rest must stay the same at trace time.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is assigned inside an `if`, `while` or `for` body, which may be a runtime branch or loop, but it does not implement `Carry`",
    note = "derive `Carry` for a struct of DSL values, use `static_carry!` for a compile-time-only type, or move the assignment out of the body"
)]
pub trait Carry: Clone {
    /// Appends the registers of the runtime part, in a fixed order.
    fn regs(&self, out: &mut Vec<Reg>);
    /// A copy whose runtime part is read from `regs`, in the order of [`Carry::regs`].
    fn rebuild(&self, regs: &mut dyn Iterator<Item = Reg>) -> Self;
    /// How the compile-time parts of `self` and `other` differ, if they do.
    fn static_diff(&self, other: &Self) -> Option<String>;
}

impl<T: Scalar> Carry for Val<T> {
    fn regs(&self, out: &mut Vec<Reg>) {
        out.push(self.reg());
    }
    fn rebuild(&self, regs: &mut dyn Iterator<Item = Reg>) -> Self {
        Val::from_reg(regs.next().expect("one register per runtime value"))
    }
    fn static_diff(&self, _other: &Self) -> Option<String> {
        None
    }
}

/// Implements [`Carry`] for a compile-time-only type: it has no registers and must not
/// change inside a runtime branch or loop.
#[macro_export]
macro_rules! static_carry {
    ($($t:ty),* $(,)?) => {$(
        impl $crate::trace::Carry for $t {
            fn regs(&self, _out: &mut ::std::vec::Vec<$crate::ir::Reg>) {}
            fn rebuild(&self, _regs: &mut dyn ::std::iter::Iterator<Item = $crate::ir::Reg>) -> Self {
                ::std::clone::Clone::clone(self)
            }
            fn static_diff(&self, other: &Self) -> ::std::option::Option<::std::string::String> {
                (self != other).then(|| ::std::format!("{:?} became {:?}", self, other))
            }
        }
    )*};
}

static_carry!(
    (),
    bool,
    u8,
    u16,
    u32,
    u64,
    usize,
    i8,
    i16,
    i32,
    i64,
    isize,
    char,
    String,
    &'static str,
    crate::Target
);

impl Carry for f32 {
    fn regs(&self, _out: &mut Vec<Reg>) {}
    fn rebuild(&self, _regs: &mut dyn Iterator<Item = Reg>) -> Self {
        *self
    }
    fn static_diff(&self, other: &Self) -> Option<String> {
        (self.to_bits() != other.to_bits()).then(|| format!("{self:?} became {other:?}"))
    }
}

impl Carry for f64 {
    fn regs(&self, _out: &mut Vec<Reg>) {}
    fn rebuild(&self, _regs: &mut dyn Iterator<Item = Reg>) -> Self {
        *self
    }
    fn static_diff(&self, other: &Self) -> Option<String> {
        (self.to_bits() != other.to_bits()).then(|| format!("{self:?} became {other:?}"))
    }
}

impl<T: Carry> Carry for Option<T> {
    fn regs(&self, out: &mut Vec<Reg>) {
        if let Some(v) = self {
            v.regs(out)
        }
    }
    fn rebuild(&self, regs: &mut dyn Iterator<Item = Reg>) -> Self {
        self.as_ref().map(|v| v.rebuild(regs))
    }
    fn static_diff(&self, other: &Self) -> Option<String> {
        match (self, other) {
            (Some(a), Some(b)) => a.static_diff(b),
            (None, None) => None,
            (Some(_), None) => Some("Some(..) became None".into()),
            (None, Some(_)) => Some("None became Some(..)".into()),
        }
    }
}

fn slice_static_diff<T: Carry>(a: &[T], b: &[T]) -> Option<String> {
    if a.len() != b.len() {
        return Some(format!("its length {} became {}", a.len(), b.len()));
    }
    a.iter()
        .zip(b)
        .enumerate()
        .find_map(|(i, (x, y))| x.static_diff(y).map(|d| format!("[{i}]: {d}")))
}

impl<T: Carry> Carry for Vec<T> {
    fn regs(&self, out: &mut Vec<Reg>) {
        self.iter().for_each(|v| v.regs(out))
    }
    fn rebuild(&self, regs: &mut dyn Iterator<Item = Reg>) -> Self {
        self.iter().map(|v| v.rebuild(regs)).collect()
    }
    fn static_diff(&self, other: &Self) -> Option<String> {
        slice_static_diff(self, other)
    }
}

impl<T: Carry, const N: usize> Carry for [T; N] {
    fn regs(&self, out: &mut Vec<Reg>) {
        self.iter().for_each(|v| v.regs(out))
    }
    fn rebuild(&self, regs: &mut dyn Iterator<Item = Reg>) -> Self {
        std::array::from_fn(|i| self[i].rebuild(regs))
    }
    fn static_diff(&self, other: &Self) -> Option<String> {
        slice_static_diff(self, other)
    }
}

macro_rules! tuple_carry {
    ($($name:ident $idx:tt),+) => {
        impl<$($name: Carry),+> Carry for ($($name,)+) {
            fn regs(&self, out: &mut Vec<Reg>) {
                $(self.$idx.regs(out);)+
            }
            fn rebuild(&self, regs: &mut dyn Iterator<Item = Reg>) -> Self {
                ($(self.$idx.rebuild(regs),)+)
            }
            fn static_diff(&self, other: &Self) -> Option<String> {
                $(if let Some(d) = self.$idx.static_diff(&other.$idx) {
                    return Some(format!("#{}: {d}", $idx));
                })+
                None
            }
        }
    };
}

tuple_carry!(A 0);
tuple_carry!(A 0, B 1);
tuple_carry!(A 0, B 1, C 2);
tuple_carry!(A 0, B 1, C 2, D 3);
tuple_carry!(A 0, B 1, C 2, D 3, E 4);
tuple_carry!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_carry!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_carry!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_carry!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple_carry!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple_carry!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple_carry!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);

/// The condition of an `if` or `while`: a `bool` (compile time) or a [`Pred`] (runtime).
pub trait Cond: Copy {
    /// Whether this condition type makes a runtime construct.
    const RUNTIME: bool;
    fn static_value(self) -> Option<bool>;
    fn runtime_value(self) -> Option<Pred>;
}

impl Cond for bool {
    const RUNTIME: bool = false;
    fn static_value(self) -> Option<bool> {
        Some(self)
    }
    fn runtime_value(self) -> Option<Pred> {
        None
    }
}

impl Cond for Pred {
    const RUNTIME: bool = true;
    fn static_value(self) -> Option<bool> {
        None
    }
    fn runtime_value(self) -> Option<Pred> {
        Some(self)
    }
}

/// Reports a compile-time value that changed inside a runtime region, naming the variable.
fn check_static<S: Carry>(before: &S, after: &S, names: &[&str], loc: SourceLoc, region: &str) {
    let Some(diff) = before.static_diff(after) else {
        return;
    };
    let (name, detail) = match diff.strip_prefix('#').and_then(|d| d.split_once(": ")) {
        Some((index, detail)) => {
            let name = index
                .parse::<usize>()
                .ok()
                .and_then(|i| names.get(i))
                .copied()
                .unwrap_or("a carried value");
            (name, detail.to_string())
        }
        None => (names.first().copied().unwrap_or("a carried value"), diff),
    };
    let message = format!(
        "the compile-time value `{name}` is changed inside a runtime {region} ({detail}); \
         a runtime branch or loop cannot change a compile-time value: make it a runtime \
         value (e.g. `Val::constant(..)`) or move the change out of the {region}"
    );
    trace_error_at(message, loc);
}

/// An `if`/`else` whose arms are traced by `arms(is_then, state)`. With a `bool` condition
/// only the taken arm runs; with a [`Pred`] both arms are traced into a PTX branch and the
/// state and result they return are merged.
pub fn branch<C: Cond, S: Carry, R: Carry>(
    cond: C,
    state: S,
    names: &[&str],
    loc: SourceLoc,
    mut arms: impl FnMut(bool, S) -> (S, R),
) -> (S, R) {
    let Some(pred) = cond.runtime_value() else {
        return arms(cond.static_value().expect("a static condition"), state);
    };
    with_builder(|b| b.begin_if(pred.reg(), loc));
    let before = state.clone();
    let (s_then, r_then) = arms(true, state.clone());
    with_builder(|b| b.begin_else());
    let (s_else, r_else) = arms(false, state);
    if before.static_diff(&s_then).is_some() {
        check_static(&before, &s_then, names, loc, "if");
    } else {
        check_static(&before, &s_else, names, loc, "if");
    }
    check_static(
        &(r_then.clone(),),
        &(r_else.clone(),),
        &["value of the if expression"],
        loc,
        "if",
    );
    let mut then_regs = Vec::new();
    s_then.regs(&mut then_regs);
    r_then.regs(&mut then_regs);
    let mut else_regs = Vec::new();
    s_else.regs(&mut else_regs);
    r_else.regs(&mut else_regs);
    if then_regs.len() != else_regs.len() {
        with_builder(|b| b.end_if(&[]));
        return (s_then, r_then);
    }
    let pairs: Vec<(Reg, Reg)> = then_regs.into_iter().zip(else_regs).collect();
    let merged = with_builder(|b| b.end_if(&pairs));
    let mut it = merged.into_iter();
    let s = s_then.rebuild(&mut it);
    let r = r_then.rebuild(&mut it);
    (s, r)
}

/// Copies each register of `state` into a fresh one (the loop-carried registers).
fn carried_copy<S: Carry>(state: &S, loc: SourceLoc) -> (S, Vec<Reg>) {
    let mut init = Vec::new();
    state.regs(&mut init);
    let carried: Vec<Reg> = with_builder(|b| {
        init.iter()
            .map(|&r| {
                let c = b.new_reg(b.reg_ty(r));
                b.push(
                    Op::Alu(AluOp::Mov {
                        dst: c,
                        src: Operand::Reg(r),
                    }),
                    loc,
                );
                c
            })
            .collect()
    });
    let rebuilt = state.rebuild(&mut carried.iter().copied());
    (rebuilt, carried)
}

/// Ends a runtime loop: the compile-time parts of the state must be unchanged by the body,
/// and each carried register is written from its new value.
fn close_loop<S: Carry>(
    initial: &S,
    after_body: &S,
    carried: &[Reg],
    mut new: Vec<Reg>,
    names: &[&str],
    loc: SourceLoc,
) {
    check_static(initial, after_body, names, loc, "loop");
    after_body.regs(&mut new);
    let copies: Vec<(Reg, Reg)> = if new.len() == carried.len() {
        carried.iter().copied().zip(new).collect()
    } else {
        Vec::new()
    };
    with_builder(|b| b.end_loop(&copies));
}

/// A `while` loop traced by `step(is_condition, state)`: with `is_condition` it evaluates the
/// condition, otherwise it runs the body. A `bool` condition unrolls at trace time; a
/// [`Pred`] makes a runtime loop.
pub fn while_loop<S: Carry, C: Cond>(
    state: S,
    names: &[&str],
    loc: SourceLoc,
    mut step: impl FnMut(bool, S) -> (S, Option<C>),
) -> S {
    if !C::RUNTIME {
        let mut state = state;
        loop {
            let (s, cond) = step(true, state);
            let go = cond
                .and_then(Cond::static_value)
                .expect("the condition step returns the condition");
            if !go {
                return s;
            }
            state = step(false, s).0;
        }
    }
    let (looped, carried) = carried_copy(&state, loc);
    with_builder(|b| b.begin_loop(loc));
    let (after_cond, cond) = step(true, looped.clone());
    let pred = cond
        .and_then(Cond::runtime_value)
        .expect("the condition step returns the condition");
    let (mut before, mut after) = (Vec::new(), Vec::new());
    looped.regs(&mut before);
    after_cond.regs(&mut after);
    if before != after {
        trace_error_at(
            "the condition of a runtime `while` assigns a variable; compute it in the body",
            loc,
        );
    }
    with_builder(|b| b.begin_loop_body(pred.reg()));
    let (after_body, _) = step(false, after_cond);
    close_loop(&state, &after_body, &carried, Vec::new(), names, loc);
    looped
}

/// A runtime range `start..end` (step `step`) for a `for` loop that becomes a PTX loop.
#[derive(Clone, Copy, Debug)]
pub struct DynRange<T: Number> {
    start: Operand,
    end: Operand,
    step: T,
}

/// A runtime `for` range: `for i in dyn_range(0, n) { .. }` is a PTX loop with `i` a
/// [`Val`]. (A plain Rust range in a `for` unrolls at trace time.)
pub fn dyn_range<T: Number + From<u8>>(
    start: impl IntoVal<T>,
    end: impl IntoVal<T>,
) -> DynRange<T> {
    DynRange {
        start: start.operand(),
        end: end.operand(),
        step: T::from(1),
    }
}

impl<T: Number> DynRange<T> {
    /// Steps by `step` instead of 1.
    pub fn step_by(self, step: T) -> Self {
        DynRange { step, ..self }
    }
}

/// What a `for` loop iterates: a Rust iterator (unrolled) or a [`DynRange`] (runtime).
pub trait LoopSource {
    type Item;
    fn run<S: Carry>(
        self,
        state: S,
        names: &[&str],
        loc: SourceLoc,
        body: impl FnMut(Self::Item, S) -> S,
    ) -> S;
}

impl<I: IntoIterator> LoopSource for I {
    type Item = I::Item;
    fn run<S: Carry>(
        self,
        state: S,
        _names: &[&str],
        _loc: SourceLoc,
        mut body: impl FnMut(Self::Item, S) -> S,
    ) -> S {
        let mut state = state;
        for item in self {
            state = body(item, state);
        }
        state
    }
}

impl<T: Number> LoopSource for DynRange<T>
where
    Val<T>: std::ops::Add<T, Output = Val<T>>,
{
    type Item = Val<T>;
    fn run<S: Carry>(
        self,
        state: S,
        names: &[&str],
        loc: SourceLoc,
        mut body: impl FnMut(Val<T>, S) -> S,
    ) -> S {
        let start: Val<T> = Val::from_reg(emit_at(T::TY, loc, |dst| {
            Op::Alu(AluOp::Mov {
                dst,
                src: self.start,
            })
        }));
        let (looped, carried) = carried_copy(&(start, state.clone()), loc);
        with_builder(|b| b.begin_loop(loc));
        let index = looped.0;
        let cond = emit_at(crate::ir::Ty::Pred, loc, |dst| {
            Op::Alu(AluOp::Setp {
                cmp: crate::ir::CmpOp::Lt,
                ty: T::TY,
                dst,
                a: Operand::Reg(index.reg()),
                b: self.end,
            })
        });
        with_builder(|b| b.begin_loop_body(cond));
        let after = body(index, looped.1.clone());
        let next = index + self.step;
        close_loop(&state, &after, &carried, vec![next.reg()], names, loc);
        looped.1
    }
}

/// A `for` loop over `source` with body `body(item, state)`.
pub fn for_loop<L: LoopSource, S: Carry>(
    source: L,
    state: S,
    names: &[&str],
    loc: SourceLoc,
    body: impl FnMut(L::Item, S) -> S,
) -> S {
    source.run(state, names, loc, body)
}

/// `==` and `!=` as rewritten by `#[kernel]`: `bool` for Rust values, [`Pred`] for DSL values.
pub trait DslEq<Rhs: ?Sized> {
    type Out;
    fn dsl_eq(&self, rhs: &Rhs) -> Self::Out;
    fn dsl_ne(&self, rhs: &Rhs) -> Self::Out;
}

/// `<`, `<=`, `>`, `>=` as rewritten by `#[kernel]`.
pub trait DslOrd<Rhs: ?Sized> {
    type Out;
    fn dsl_lt(&self, rhs: &Rhs) -> Self::Out;
    fn dsl_le(&self, rhs: &Rhs) -> Self::Out;
    fn dsl_gt(&self, rhs: &Rhs) -> Self::Out;
    fn dsl_ge(&self, rhs: &Rhs) -> Self::Out;
}

impl<T: PartialEq<U> + ?Sized, U: ?Sized> DslEq<U> for T {
    type Out = bool;
    fn dsl_eq(&self, rhs: &U) -> bool {
        self == rhs
    }
    fn dsl_ne(&self, rhs: &U) -> bool {
        self != rhs
    }
}

impl<T: PartialOrd<U> + ?Sized, U: ?Sized> DslOrd<U> for T {
    type Out = bool;
    fn dsl_lt(&self, rhs: &U) -> bool {
        self < rhs
    }
    fn dsl_le(&self, rhs: &U) -> bool {
        self <= rhs
    }
    fn dsl_gt(&self, rhs: &U) -> bool {
        self > rhs
    }
    fn dsl_ge(&self, rhs: &U) -> bool {
        self >= rhs
    }
}

macro_rules! dsl_cmp_impls {
    ($($t:ty),*) => {$(
        impl DslEq<Val<$t>> for Val<$t> {
            type Out = Pred;
            #[track_caller]
            fn dsl_eq(&self, rhs: &Val<$t>) -> Pred { self.eq(*rhs) }
            #[track_caller]
            fn dsl_ne(&self, rhs: &Val<$t>) -> Pred { self.ne(*rhs) }
        }
        impl DslEq<$t> for Val<$t> {
            type Out = Pred;
            #[track_caller]
            fn dsl_eq(&self, rhs: &$t) -> Pred { self.eq(*rhs) }
            #[track_caller]
            fn dsl_ne(&self, rhs: &$t) -> Pred { self.ne(*rhs) }
        }
        impl DslEq<Val<$t>> for $t {
            type Out = Pred;
            #[track_caller]
            fn dsl_eq(&self, rhs: &Val<$t>) -> Pred { rhs.eq(*self) }
            #[track_caller]
            fn dsl_ne(&self, rhs: &Val<$t>) -> Pred { rhs.ne(*self) }
        }
        impl DslOrd<Val<$t>> for Val<$t> {
            type Out = Pred;
            #[track_caller]
            fn dsl_lt(&self, rhs: &Val<$t>) -> Pred { self.lt(*rhs) }
            #[track_caller]
            fn dsl_le(&self, rhs: &Val<$t>) -> Pred { self.le(*rhs) }
            #[track_caller]
            fn dsl_gt(&self, rhs: &Val<$t>) -> Pred { self.gt(*rhs) }
            #[track_caller]
            fn dsl_ge(&self, rhs: &Val<$t>) -> Pred { self.ge(*rhs) }
        }
        impl DslOrd<$t> for Val<$t> {
            type Out = Pred;
            #[track_caller]
            fn dsl_lt(&self, rhs: &$t) -> Pred { self.lt(*rhs) }
            #[track_caller]
            fn dsl_le(&self, rhs: &$t) -> Pred { self.le(*rhs) }
            #[track_caller]
            fn dsl_gt(&self, rhs: &$t) -> Pred { self.gt(*rhs) }
            #[track_caller]
            fn dsl_ge(&self, rhs: &$t) -> Pred { self.ge(*rhs) }
        }
        impl DslOrd<Val<$t>> for $t {
            type Out = Pred;
            #[track_caller]
            fn dsl_lt(&self, rhs: &Val<$t>) -> Pred { rhs.gt(*self) }
            #[track_caller]
            fn dsl_le(&self, rhs: &Val<$t>) -> Pred { rhs.ge(*self) }
            #[track_caller]
            fn dsl_gt(&self, rhs: &Val<$t>) -> Pred { rhs.lt(*self) }
            #[track_caller]
            fn dsl_ge(&self, rhs: &Val<$t>) -> Pred { rhs.le(*self) }
        }
    )*};
}

dsl_cmp_impls!(u32, i32, u64, i64, f32);

/// `&&` as rewritten by `#[kernel]`: short-circuits at trace time when the left side is a
/// `bool`; with a [`Pred`] on the left both sides are evaluated (`and.pred`).
pub trait DslAnd<R> {
    type Out;
    fn dsl_and(self, rhs: impl FnOnce() -> R) -> Self::Out;
}

/// `||` as rewritten by `#[kernel]`, like [`DslAnd`].
pub trait DslOr<R> {
    type Out;
    fn dsl_or(self, rhs: impl FnOnce() -> R) -> Self::Out;
}

impl DslAnd<bool> for bool {
    type Out = bool;
    fn dsl_and(self, rhs: impl FnOnce() -> bool) -> bool {
        self && rhs()
    }
}
impl DslAnd<Pred> for bool {
    type Out = Pred;
    #[track_caller]
    fn dsl_and(self, rhs: impl FnOnce() -> Pred) -> Pred {
        if self { rhs() } else { Pred::constant(false) }
    }
}
impl DslAnd<bool> for Pred {
    type Out = Pred;
    #[track_caller]
    fn dsl_and(self, rhs: impl FnOnce() -> bool) -> Pred {
        self & rhs()
    }
}
impl DslAnd<Pred> for Pred {
    type Out = Pred;
    #[track_caller]
    fn dsl_and(self, rhs: impl FnOnce() -> Pred) -> Pred {
        self & rhs()
    }
}
impl DslOr<bool> for bool {
    type Out = bool;
    fn dsl_or(self, rhs: impl FnOnce() -> bool) -> bool {
        self || rhs()
    }
}
impl DslOr<Pred> for bool {
    type Out = Pred;
    #[track_caller]
    fn dsl_or(self, rhs: impl FnOnce() -> Pred) -> Pred {
        if self { Pred::constant(true) } else { rhs() }
    }
}
impl DslOr<bool> for Pred {
    type Out = Pred;
    #[track_caller]
    fn dsl_or(self, rhs: impl FnOnce() -> bool) -> Pred {
        self | rhs()
    }
}
impl DslOr<Pred> for Pred {
    type Out = Pred;
    #[track_caller]
    fn dsl_or(self, rhs: impl FnOnce() -> Pred) -> Pred {
        self | rhs()
    }
}

/// Only a `bool` can guard `break`, `continue` or `return`: those cannot leave a runtime
/// branch. `#[kernel]` routes such `if`s through this check.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the condition of an `if` that contains `break`, `continue`, `return` or `?`",
    label = "a runtime condition",
    note = "a runtime branch cannot leave the loop or the function; restructure the body so the exit happens at trace time, or compute a flag and branch on it"
)]
pub trait StaticCond {
    fn value(self) -> bool;
}

impl StaticCond for bool {
    fn value(self) -> bool {
        self
    }
}

/// The iterable of a `for` loop that `#[kernel]` keeps as a plain Rust loop (its body has a
/// `break`, `continue`, `return`, `?` or a label): only a compile-time iterator can be one.
pub fn static_iter<I: StaticIter>(iter: I) -> I::IntoIter {
    iter.into_static_iter()
}

/// A compile-time iterable; see [`static_iter`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot drive a `for` loop that contains `break`, `continue`, `return`, `?` or a label",
    label = "a runtime range",
    note = "a runtime loop cannot be left early: loop over the whole range and skip work with a runtime `if`"
)]
pub trait StaticIter {
    type IntoIter: Iterator;
    fn into_static_iter(self) -> Self::IntoIter;
}

#[diagnostic::do_not_recommend]
impl<I: IntoIterator> StaticIter for I {
    type IntoIter = I::IntoIter;
    fn into_static_iter(self) -> I::IntoIter {
        self.into_iter()
    }
}
