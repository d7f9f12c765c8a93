//! The layout algebra checked against its definition over whole domains (CuTe's
//! `test/unit/cute/core/composition.cpp` style): every coordinate of every generated case.

use dsl_core::layout::{ComposedLayout, IntTuple, Layout, LayoutErrorKind, Swizzle};

/// Deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A random layout with 1-3 top-level modes, some nested, extents from `extents`, strides
/// from `strides`.
fn random_layout(rng: &mut Rng, extents: &[i64], strides: &[i64]) -> Layout {
    let mut shapes = Vec::new();
    let mut strides_out = Vec::new();
    for _ in 0..1 + rng.below(3) {
        if rng.below(3) == 0 {
            let n = 2 + rng.below(2);
            shapes.push(IntTuple::tuple(
                (0..n).map(|_| IntTuple::from(rng.pick(extents))),
            ));
            strides_out.push(IntTuple::tuple(
                (0..n).map(|_| IntTuple::from(rng.pick(strides))),
            ));
        } else {
            shapes.push(IntTuple::from(rng.pick(extents)));
            strides_out.push(IntTuple::from(rng.pick(strides)));
        }
    }
    Layout::new(IntTuple::tuple(shapes), IntTuple::tuple(strides_out)).unwrap()
}

fn offsets(layout: &Layout) -> Vec<i64> {
    (0..layout.static_size())
        .map(|i| layout.offset_of_index(i).unwrap())
        .collect()
}

#[test]
fn composition_agrees_with_function_composition_everywhere() {
    let mut rng = Rng(1);
    let mut composed = 0;
    for _ in 0..3000 {
        let a = random_layout(&mut rng, &[1, 2, 4, 8], &[0, 1, 2, 4, 8, 16, 32, 64]);
        let b = random_layout(&mut rng, &[1, 2, 4, 8], &[0, 1, 2, 4, 8, 16]);
        if b.cosize() > a.static_size() {
            continue;
        }
        // Power-of-two extents and strides always divide each other: composition must
        // succeed unless B's modes overlap, and then R(c) == A(B(c)) for every c.
        let r = match a.composition(&b) {
            Ok(r) => r,
            Err(e) if e.message().contains("overlap or interleave") => continue,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(r.static_size(), b.static_size(), "{a} o {b} = {r}");
        for c in 0..b.static_size() {
            let via_b = a.offset_of_index(b.offset_of_index(c).unwrap()).unwrap();
            assert_eq!(
                r.offset_of_index(c).unwrap(),
                via_b,
                "{a} o {b} = {r} at {c}"
            );
        }
        composed += 1;
    }
    assert!(
        composed > 1000,
        "only {composed} compositions were exercised"
    );
}

#[test]
fn composition_with_other_extents_is_exact_or_refused() {
    let mut rng = Rng(2);
    let (mut exact, mut refused) = (0, 0);
    for _ in 0..3000 {
        let a = random_layout(&mut rng, &[1, 2, 3, 4, 6], &[0, 1, 2, 3, 6, 12]);
        let b = random_layout(&mut rng, &[1, 2, 3, 4, 6], &[0, 1, 2, 3, 4]);
        if b.cosize() > a.static_size() {
            continue;
        }
        match a.composition(&b) {
            Ok(r) => {
                for c in 0..b.static_size() {
                    let via_b = a.offset_of_index(b.offset_of_index(c).unwrap()).unwrap();
                    assert_eq!(
                        r.offset_of_index(c).unwrap(),
                        via_b,
                        "{a} o {b} = {r} at {c}"
                    );
                }
                exact += 1;
            }
            Err(e) => {
                assert_eq!(e.kind(), LayoutErrorKind::NotDivisible, "{e}");
                refused += 1;
            }
        }
    }
    assert!(
        exact > 500 && refused > 10,
        "exact {exact}, refused {refused}"
    );
}

#[test]
fn coalesce_keeps_the_function() {
    let mut rng = Rng(3);
    for _ in 0..2000 {
        let a = random_layout(&mut rng, &[1, 2, 3, 4], &[0, 1, 2, 3, 4, 8, 12]);
        let c = a.coalesce();
        assert_eq!(offsets(&a), offsets(&c), "coalesce({a}) = {c}");
        assert!(c.depth() <= 1, "coalesce({a}) = {c} is not flat");
    }
}

/// Some of the modes of a compact column-major layout, in random order: an injective
/// layout whose complement exists. Also returns the size of the compact layout.
fn random_injective(rng: &mut Rng, extents: &[i64]) -> (Layout, i64) {
    let extents: Vec<i64> = (0..2 + rng.below(3)).map(|_| rng.pick(extents)).collect();
    let full = Layout::col_major(IntTuple::of(&extents)).flatten();
    let mut modes: Vec<Layout> = (0..extents.len())
        .filter(|_| rng.below(3) != 0)
        .map(|i| full.mode(i).unwrap())
        .collect();
    for i in (1..modes.len()).rev() {
        modes.swap(i, rng.below(i as u64 + 1) as usize);
    }
    if modes.is_empty() {
        modes.push(full.mode(0).unwrap());
    }
    (Layout::from_modes(modes), full.static_size())
}

#[test]
fn a_layout_and_its_complement_tile_the_cotarget_exactly_once() {
    let mut rng = Rng(4);
    for _ in 0..2000 {
        let (a, cotarget) = random_injective(&mut rng, &[2, 3, 4]);
        let c = a.complement(cotarget).unwrap_or_else(|e| panic!("{e}"));
        let both = Layout::from_modes([a.clone(), c.clone()]);
        let mut seen = offsets(&both);
        seen.sort();
        assert_eq!(
            seen,
            (0..cotarget).collect::<Vec<_>>(),
            "({a}, complement {c}) does not cover 0..{cotarget} once"
        );
    }
}

#[test]
fn logical_divide_reorders_the_same_offsets() {
    let mut rng = Rng(5);
    let mut divided = 0;
    for _ in 0..2000 {
        let a = random_layout(&mut rng, &[2, 4, 8], &[1, 2, 4, 8, 16, 32, 64]);
        // A tiler cut from a compact layout whose size divides size(A): (tiler, complement)
        // then re-indexes 0..size(A) exactly.
        let (tiler, span) = random_injective(&mut rng, &[2, 4]);
        if a.static_size() % span != 0 {
            continue;
        }
        let r = a.logical_divide(&tiler).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.rank(), 2);
        assert_eq!(r.mode(0).unwrap().static_size(), tiler.static_size());
        // Mode 0 at coordinate c is A(tiler(c)).
        let first = r.mode(0).unwrap();
        for c in 0..tiler.static_size() {
            let want = a
                .offset_of_index(tiler.offset_of_index(c).unwrap())
                .unwrap();
            assert_eq!(
                first.offset_of_index(c).unwrap(),
                want,
                "{a} / {tiler} = {r}"
            );
        }
        // All tiles together are A's offsets, each once.
        let (mut got, mut want) = (offsets(&r), offsets(&a));
        got.sort();
        want.sort();
        assert_eq!(got, want, "{a} / {tiler} = {r}");
        divided += 1;
    }
    assert!(divided > 200, "only {divided} divides were exercised");
}

#[test]
fn k_block_tiles_enumerate_exactly_the_tile_bytes() {
    // K-major bf16 tiles of 128 rows: rows of one swizzle width, 8-row groups, k-blocks of
    // one row width after the whole MN extent (the SW128 one is the seed's KV tile).
    for (swizzle, k, text) in [
        (Swizzle::B128, 512, "((8,16),(64,8)):((64,512),(1,8192))"),
        (Swizzle::B64, 256, "((8,16),(32,8)):((32,256),(1,4096))"),
        (Swizzle::B32, 64, "((8,16),(16,4)):((16,128),(1,2048))"),
    ] {
        let tile = ComposedLayout::new(swizzle, 0, text.parse().unwrap(), 2).unwrap();
        let block_k = 16;
        let mut seen = Vec::new();
        for kb in 0..k / block_k {
            let block = tile.tile(&[128, block_k], &[0, kb]).unwrap();
            for r in 0..128 {
                for c in 0..block_k {
                    let byte = block.byte_offset_at(&[r, c]).unwrap();
                    assert_eq!(byte, tile.byte_offset_at(&[r, kb * block_k + c]).unwrap());
                    seen.push(byte);
                }
            }
        }
        let mut all: Vec<i64> = (0..128)
            .flat_map(|r| (0..k).map(move |c| (r, c)))
            .map(|(r, c)| tile.byte_offset_at(&[r, c]).unwrap())
            .collect();
        seen.sort();
        all.sort();
        assert_eq!(seen, all, "{tile}");
        // Swizzling permutes bytes: the 2-byte elements are exactly the even bytes below
        // the footprint.
        assert_eq!(
            all,
            (0..128 * k).map(|e| 2 * e).collect::<Vec<_>>(),
            "{tile}"
        );
        assert_eq!(tile.end_bytes(), 2 * 128 * k);
        assert_eq!(tile.alignment(), swizzle.period());
    }
}
