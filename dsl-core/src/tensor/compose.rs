//! The layout algebra a tensor needs on layouts whose strides may be runtime values:
//! composition with a static layout, and the per-mode divides of `local_tile` and
//! `local_partition` built on it.
//!
//! [`Layout::composition`] needs static layouts. A tensor of global memory has runtime
//! strides (and extents), but every partition is a composition whose right-hand side is
//! static, and composition only ever *moves through* the left-hand side's modes: it never
//! multiplies two of its strides. So the left-hand side is replaced by a static probe with
//! the same extents and strides `B^j` (leaf j, `B` a power of two above every extent, so no
//! two leaves coalesce), the probe is composed, and each stride of the result is read back
//! as digits in base `B`: digit j counts steps of leaf j, which is `digit * stride_j` of the
//! real layout.

use crate::layout::{DynInt, Int, IntTuple, Layout, LayoutError, LayoutErrorKind};

/// Stands in for a runtime extent of a one-leaf mode: composition lets the last (here the
/// only) mode extend without bound, so the value only has to be larger than any tile.
const UNBOUNDED: i64 = 1 << 40;

/// `a ∘ b`: the layout `R` with `R(c) == a(b(c))`, shaped like `b`, for a layout `a` whose
/// strides may be runtime values. `a`'s extents must be static unless it has one leaf.
pub(crate) fn compose<D: DynInt>(a: &Layout<D>, b: &Layout) -> Result<Layout<D>, LayoutError> {
    let extents = a.shape().leaves();
    let strides = a.stride().leaves();
    let static_extents: Vec<i64> = match extents.as_slice() {
        [only] => vec![only.as_static().unwrap_or(UNBOUNDED)],
        _ => extents
            .iter()
            .map(|e| {
                e.as_static().ok_or_else(|| {
                    LayoutError::new(
                        LayoutErrorKind::NotStatic,
                        format!(
                            "partitioning the layout {a} needs its extents at trace time (a \
                             runtime extent is allowed only in a mode of its own)"
                        ),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let inner_max = static_extents[..static_extents.len() - 1]
        .iter()
        .copied()
        .max()
        .unwrap_or(1);
    let base = ((inner_max + 1) as u64).next_power_of_two() as i64;
    let mut digit_steps = Vec::with_capacity(static_extents.len());
    let mut step: i64 = 1;
    for (j, _) in static_extents.iter().enumerate() {
        digit_steps.push(step);
        if j + 1 < static_extents.len() {
            step = step.checked_mul(base).ok_or_else(|| {
                LayoutError::new(
                    LayoutErrorKind::Unsupported,
                    format!("the layout {a} has too many or too large modes to partition"),
                )
            })?;
        }
    }
    let probe = Layout::new(
        IntTuple::tuple(static_extents.iter().map(|&e| IntTuple::from(e))),
        IntTuple::tuple(digit_steps.iter().map(|&d| IntTuple::from(d))),
    )?;
    let r = probe.composition(b)?;
    let decode = |d: i64| -> Int<D> {
        let last = digit_steps.len() - 1;
        let mut acc = Int::Static(0);
        for (j, (&unit, s)) in digit_steps.iter().zip(&strides).enumerate() {
            let digit = if j == last {
                d / unit
            } else {
                (d / unit) % base
            };
            if digit != 0 {
                acc = acc + (*s).clone() * digit;
            }
        }
        acc
    };
    let stride = map_static(r.stride(), &decode);
    Layout::new(r.shape().clone().lift(), stride)
}

/// The same tree as `t` with every leaf mapped by `f`.
fn map_static<D: DynInt>(t: &IntTuple, f: &impl Fn(i64) -> Int<D>) -> IntTuple<D> {
    match t {
        IntTuple::Leaf(v) => IntTuple::Leaf(f(v.value())),
        IntTuple::Tuple(elements) => {
            IntTuple::Tuple(elements.iter().map(|e| map_static(e, f)).collect())
        }
    }
}

/// The static extent of a mode, or `None` for a runtime one.
pub(crate) fn static_extent<D: DynInt>(mode: &Layout<D>) -> Option<i64> {
    mode.shape().static_product_if_known()
}

/// A layout whose top-level modes are `modes`.
pub(crate) fn from_modes<D: DynInt>(modes: Vec<Layout<D>>) -> Layout<D> {
    let (shapes, strides): (Vec<_>, Vec<_>) = modes
        .into_iter()
        .map(|m| (m.shape().clone(), m.stride().clone()))
        .unzip();
    Layout::new(IntTuple::Tuple(shapes), IntTuple::Tuple(strides))
        .expect("modes of layouts are congruent")
}

/// The top-level modes of `layout` (an integer layout is its own only mode).
pub(crate) fn modes<D: DynInt>(layout: &Layout<D>) -> Vec<Layout<D>> {
    match layout.shape() {
        IntTuple::Leaf(_) => vec![layout.clone()],
        IntTuple::Tuple(_) => (0..layout.rank())
            .map(|i| layout.mode(i).expect("mode below rank"))
            .collect(),
    }
}

pub(crate) fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a.abs() } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::StaticOnly;

    /// On static layouts the probe gives exactly what the static algebra gives.
    #[test]
    fn agrees_with_static_composition() {
        let cases = [
            ("(6,2):(8,2)", "(4,3):(3,1)"),
            ("(10,2):(16,4)", "(5,4):(1,5)"),
            (
                "((8,16),(64,8)):((64,512),(1,8192))",
                "((4,8),(8,2)):((1,4),(32,256))",
            ),
            (
                "(128,64):(64,1)",
                "((4,8,4),(2,2,4)):((256,1,16),(128,8,1024))",
            ),
        ];
        for (a, b) in cases {
            let (a, b): (Layout, Layout) = (a.parse().unwrap(), b.parse().unwrap());
            let got = compose::<StaticOnly>(&a, &b).unwrap();
            for i in 0..b.static_size() {
                assert_eq!(
                    got.offset_of_index(i).unwrap(),
                    a.offset_of_index(b.offset_of_index(i).unwrap()).unwrap(),
                    "{a} o {b} at {i}"
                );
            }
        }
    }
}
