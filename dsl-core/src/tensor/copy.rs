//! Moving a tensor's elements between memory and registers through `arch::memory`, as
//! few accesses as the layouts allow: a run of elements is moved by one vector access when
//! both layouts make it contiguous and aligned (checked on the layouts, never assumed).

use super::compose::gcd;
use super::engine::{MemEngine, Regs};
use super::view::Tensor;
use crate::arch::memory::{LoadOpts, load_with, store_with};
use crate::ir::{Operand, Reg, Ty};
use crate::layout::{IntTuple, Layout};
use crate::trace::{Element, Val, trace_error};

/// How a copy walks a per-thread tensor: the flattened leaves' extents, the leaf `inner`
/// that is contiguous (static stride 1) and moved `width` elements per access.
struct Plan {
    extents: Vec<i64>,
    inner: usize,
    width: i64,
}

impl Plan {
    /// The first flat index of every access, and the flat-index step between the elements
    /// of one access.
    fn accesses(&self) -> (Vec<i64>, i64) {
        let step: i64 = self.extents[..self.inner].iter().product();
        let mut firsts = vec![0i64];
        let mut unit = 1;
        for (k, &e) in self.extents.iter().enumerate() {
            let (count, stride) = if k == self.inner {
                (e / self.width, unit * self.width)
            } else {
                (e, unit)
            };
            firsts = (0..count)
                .flat_map(|c| firsts.iter().map(move |f| f + c * stride))
                .collect();
            unit *= e;
        }
        firsts.sort_unstable();
        (firsts, step)
    }

    /// A compact layout over the flattened leaves with `inner` fastest: registers in the
    /// order accesses fill them.
    fn fragment_layout(&self) -> Layout {
        let mut strides = vec![0; self.extents.len()];
        strides[self.inner] = 1;
        let mut running = self.extents[self.inner];
        for (k, &e) in self.extents.iter().enumerate() {
            if k != self.inner {
                strides[k] = running;
                running *= e;
            }
        }
        Layout::new(IntTuple::of(&self.extents), IntTuple::of(&strides)).expect("congruent")
    }
}

/// The plan of `t`: its first contiguous leaf, moved as wide as alignment and the memory
/// allow (`limit` caps it, for the other side of a copy).
fn plan_of<E, En: MemEngine>(
    t: &Tensor<E, En>,
    elem_bytes: i64,
    limit: Option<(usize, i64)>,
) -> Option<Plan> {
    let flat = t.layout.flatten();
    let mut extents = Vec::new();
    let mut strides = Vec::new();
    for i in 0..flat.rank() {
        let m = flat.mode(i).expect("mode below rank");
        extents.push(m.shape().static_product_if_known()?);
        strides.push(m.stride().leaves()[0].as_static());
    }
    let inner = match limit {
        Some((inner, _)) => inner,
        None => (0..extents.len())
            .find(|&k| strides[k] == Some(1) && extents[k] > 1)
            .unwrap_or(0),
    };
    let contiguous = strides.get(inner) == Some(&Some(1));
    let mut align = 0;
    for (k, s) in strides.iter().enumerate() {
        if k != inner && extents[k] > 1 {
            align = gcd(align, s.unwrap_or(t.stride_align));
        }
    }
    align = gcd(align, t.offset.constant);
    if t.offset.dynamic.is_some() {
        align = gcd(align, t.dyn_align);
    }
    align = gcd(
        align,
        t.engine.base_align_bytes(t.stride_align, elem_bytes) / elem_bytes,
    );
    let run = if contiguous {
        extents.get(inner).copied().unwrap_or(1)
    } else {
        1
    };
    let cap = (t.engine.max_contiguous_bytes() / elem_bytes)
        .max(1)
        .min(limit.map_or(i64::MAX, |l| l.1));
    let mut width = 1;
    while width * 2 <= cap && run % (width * 2) == 0 && (align == 0 || align % (width * 2) == 0) {
        width *= 2;
    }
    if extents.is_empty() {
        extents.push(1);
    }
    Some(Plan {
        extents,
        inner,
        width,
    })
}

/// The register class of a fragment of `E`: f32 values stay f32, anything else is moved
/// as 32-bit words.
fn reg_ty<E: Element>() -> Ty {
    if E::ELEM == crate::ir::ElemTy::F32 {
        Ty::F32
    } else {
        Ty::U32
    }
}

#[track_caller]
fn load_words<A: crate::arch::memory::Address>(addr: A, words: usize, ty: Ty) -> Vec<Reg> {
    macro_rules! ld {
        ($t:ty, $n:literal) => {
            load_with::<$t, $n, A>(addr, LoadOpts::default(), None)
                .iter()
                .map(|v| v.reg())
                .collect()
        };
    }
    match (ty == Ty::F32, words) {
        (true, 1) => ld!(f32, 1),
        (true, 2) => ld!(f32, 2),
        (true, _) => ld!(f32, 4),
        (false, 1) => ld!(u32, 1),
        (false, 2) => ld!(u32, 2),
        (false, _) => ld!(u32, 4),
    }
}

#[track_caller]
fn store_words<A: crate::arch::memory::Address>(addr: A, regs: &[Reg]) {
    let op = |i: usize| Operand::Reg(regs[i]);
    match regs.len() {
        1 => store_with::<u32, 1, A>(addr, [op(0)], None),
        2 => store_with::<u32, 2, A>(addr, [op(0), op(1)], None),
        _ => store_with::<u32, 4, A>(addr, [op(0), op(1), op(2), op(3)], None),
    }
}

/// The plan of a copy of `t`, or a trace error when its layout cannot be moved in whole
/// 32-bit words.
#[track_caller]
fn plan<E: Element, En: MemEngine>(t: &Tensor<E, En>, limit: Option<(usize, i64)>) -> Option<Plan> {
    let eb = E::ELEM.bytes() as i64;
    let Some(p) = plan_of(t, eb, limit) else {
        trace_error(format!(
            "copying the tensor {t:?} needs its size at trace time: partition it first"
        ));
        return None;
    };
    if (p.width * eb) % 4 != 0 {
        trace_error(format!(
            "the tensor {t:?} of {}-byte {} gives runs of {} contiguous aligned element(s), \
             less than a 32-bit word: lay it out (or partition it with a `vector`) so that each \
             thread moves at least {} consecutive elements",
            eb,
            E::ELEM.name(),
            p.width,
            4 / eb
        ));
        return None;
    }
    Some(p)
}

impl<E: Element, En: MemEngine> Tensor<E, En> {
    /// Loads every element of this (per-thread) tensor into a register fragment of the same
    /// size, in as few accesses as the layout allows.
    #[track_caller]
    pub fn load(&self) -> Tensor<E, Regs> {
        let eb = E::ELEM.bytes() as i64;
        let ty = reg_ty::<E>();
        let Some(p) = plan(self, None) else {
            return Tensor::registers(Vec::new(), ty, Layout::contiguous(1).expect("1:1"));
        };
        let mut regs = Vec::new();
        let (firsts, _) = p.accesses();
        let layout = p.fragment_layout();
        let mut order: Vec<(i64, i64)> = firsts
            .iter()
            .map(|&f| (layout.offset_of_index(f).expect("inside"), f))
            .collect();
        order.sort_unstable();
        for (_, first) in order {
            let addr = self.at(IntTuple::from(first));
            regs.extend(load_words(addr, (p.width * eb / 4) as usize, ty));
        }
        Tensor::registers(regs, ty, layout)
    }

    /// Stores the register fragment `src` (of this tensor's size) into this tensor.
    #[track_caller]
    pub fn store(&self, src: &Tensor<E, Regs>) {
        let eb = E::ELEM.bytes() as i64;
        let Some(p) = plan(self, None) else { return };
        let size: i64 = p.extents.iter().product();
        let words = src.regs().len() as i64;
        if words * 4 != size * eb {
            trace_error(format!(
                "storing a fragment of {} bytes into the tensor {self:?} of {} bytes",
                words * 4,
                size * eb
            ));
            return;
        }
        let (firsts, step) = p.accesses();
        let per_word = (4 / eb).max(1);
        for first in firsts {
            let mut regs: Vec<Reg> = Vec::new();
            for u in (0..p.width).step_by(per_word as usize) {
                let (e0, e_last) = (first + u * step, first + (u + per_word - 1) * step);
                let (w0, wl) = (src.words_of(e0, eb), src.words_of(e_last, eb));
                if w0 != wl || (per_word > 1 && src.element_of(e0) % per_word != 0) {
                    trace_error(format!(
                        "the fragment's elements {e0} and {e_last} are not one register's, \
                         as a packed store into {self:?} needs"
                    ));
                    return;
                }
                regs.extend(w0);
            }
            store_words(self.at(IntTuple::from(first)), &regs);
        }
    }

    /// Copies this tensor into `dst` (same size, element by flat index) through registers,
    /// with the widest accesses both layouts allow.
    #[track_caller]
    pub fn copy_to<F: MemEngine>(&self, dst: &Tensor<E, F>) {
        let eb = E::ELEM.bytes() as i64;
        let Some(d) = plan(dst, None) else { return };
        let Some(p) = plan(self, Some((d.inner, d.width))) else {
            return;
        };
        if p.extents != d.extents {
            trace_error(format!(
                "copying {self:?} into {dst:?}, which has another shape"
            ));
            return;
        }
        let ty = reg_ty::<E>();
        let (firsts, _) = p.accesses();
        for first in firsts {
            let regs = load_words(
                self.at(IntTuple::from(first)),
                (p.width * eb / 4) as usize,
                ty,
            );
            store_words(dst.at(IntTuple::from(first)), &regs);
        }
    }
}

impl<E> Tensor<E, Regs> {
    /// The fragment's element index (in register order) of flat element `i`.
    pub(crate) fn element_of(&self, i: i64) -> i64 {
        self.offset.constant
            + self
                .layout
                .offset_of_index(i)
                .expect("a register fragment is indexed inside its size")
    }

    /// The registers holding flat element `i` (one, or two for an 8-byte element).
    pub(crate) fn words_of(&self, i: i64, elem_bytes: i64) -> Vec<Reg> {
        let element = self.element_of(i);
        let first = (element * elem_bytes / 4) as usize;
        let n = (elem_bytes / 4).max(1) as usize;
        self.engine.regs[first..first + n].to_vec()
    }
}

impl Tensor<f32, Regs> {
    /// Element `i` (flat) of an f32 fragment.
    #[track_caller]
    pub fn get(&self, i: i64) -> Val<f32> {
        let reg = self.words_of(i, 4)[0];
        if self.engine.ty == Ty::F32 {
            Val::from_reg(reg)
        } else {
            Val::<u32>::from_reg(reg).bitcast()
        }
    }
}
