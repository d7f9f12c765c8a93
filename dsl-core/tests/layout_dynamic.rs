//! Layouts evaluated at runtime coordinates: static parts fold at trace time and exactly the
//! expected runtime operations are emitted. `Sym` stands in for the DSL's register values:
//! it records every operation and prints the expression it built.

use std::cell::RefCell;

use dsl_core::int_tuple;
use dsl_core::layout::{
    DynInt, Int, IntTuple, Layout, LayoutErrorKind, StaticOnly, Swizzle, canonical, fragment,
};

thread_local! {
    static EMITTED: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

/// A runtime integer: the expression that computes it.
#[derive(Clone, Debug, PartialEq)]
struct Sym(String);

fn var(name: &str) -> Int<Sym> {
    Int::Dynamic(Sym(name.to_string()))
}

fn emit(op: &'static str, text: String) -> Sym {
    EMITTED.with(|e| e.borrow_mut().push(op));
    Sym(text)
}

/// The operations emitted since the last call.
fn take_emitted() -> Vec<&'static str> {
    EMITTED.with(|e| std::mem::take(&mut *e.borrow_mut()))
}

impl From<StaticOnly> for Sym {
    fn from(never: StaticOnly) -> Sym {
        match never {}
    }
}

impl DynInt for Sym {
    fn add(self, o: Sym) -> Sym {
        emit("add", format!("({} + {})", self.0, o.0))
    }
    fn mul(self, o: Sym) -> Sym {
        emit("mul", format!("({} * {})", self.0, o.0))
    }
    fn add_const(self, c: i64) -> Sym {
        emit("add_const", format!("({} + {c})", self.0))
    }
    fn mul_const(self, c: i64) -> Sym {
        emit("mul_const", format!("({} * {c})", self.0))
    }
    fn div_const(self, c: i64) -> Sym {
        emit("div_const", format!("({} / {c})", self.0))
    }
    fn rem_const(self, c: i64) -> Sym {
        emit("rem_const", format!("({} % {c})", self.0))
    }
    fn shr_const(self, bits: u32) -> Sym {
        emit("shr_const", format!("({} >> {bits})", self.0))
    }
    fn and_const(self, mask: i64) -> Sym {
        emit("and_const", format!("({} & {mask:#x})", self.0))
    }
    fn xor(self, o: Sym) -> Sym {
        emit("xor", format!("({} ^ {})", self.0, o.0))
    }
}

fn expr(v: Int<Sym>) -> String {
    match v {
        Int::Dynamic(Sym(text)) => text,
        Int::Static(c) => panic!("expected a runtime value, got the constant {c}"),
    }
}

#[test]
fn fully_static_coordinates_emit_nothing() {
    take_emitted();
    let tile = canonical::k_major(Swizzle::B128, 128, 512, 2).unwrap();
    for (r, c) in [(0, 0), (21, 70), (127, 511)] {
        let coord: IntTuple<Sym> = int_tuple!(r, c);
        let byte = tile.byte_offset(&coord).unwrap();
        assert_eq!(byte, Int::Static(tile.byte_offset_at(&[r, c]).unwrap()));
    }
    let nested: IntTuple<Sym> = int_tuple!((5, 2), (6, 1));
    assert!(tile.layout().offset(&nested).unwrap().is_static());
    assert!(take_emitted().is_empty());
}

#[test]
fn runtime_row_of_a_swizzled_tile_costs_layout_math_and_one_swizzle() {
    take_emitted();
    // K-major SW128 bf16 [128, 512]: ((8,16),(64,8)):((64,512),(1,8192)), strides scaled to
    // bytes: row r -> (r % 8) * 128 + (r / 8) * 1024; column 5 -> 10 bytes, folded into one
    // add_const; then Sw<3,4,3>: x ^ ((x >> 3) & 0x70).
    let tile = canonical::k_major(Swizzle::B128, 128, 512, 2).unwrap();
    let byte = tile
        .byte_offset(&IntTuple::tuple([var("r").into(), IntTuple::from(5)]))
        .unwrap();
    let x = "((((r % 8) * 128) + ((r / 8) * 1024)) + 10)";
    assert_eq!(expr(byte), format!("({x} ^ (({x} >> 3) & 0x70))"));
    assert_eq!(
        take_emitted(),
        [
            "rem_const",
            "mul_const",
            "div_const",
            "mul_const",
            "add",
            "add_const",
            "shr_const",
            "and_const",
            "xor"
        ]
    );
}

#[test]
fn whole_swizzle_patterns_are_added_after_the_xor() {
    take_emitted();
    // k-block 3 starts 3 * 16384 bytes in: a multiple of the 1024-byte pattern, so it is one
    // add_const after the swizzle instead of entering the XOR. Dividing also coalesced the
    // rows, (8,16):(64,512) -> 128:64, so a runtime row is one multiply.
    let tile = canonical::k_major(Swizzle::B128, 128, 512, 2).unwrap();
    let block = tile.tile(&[128, 64], &[0, 3]).unwrap();
    assert_eq!(block.offset_bytes(), 3 * 16384);
    let byte = block
        .byte_offset(&IntTuple::tuple([var("r").into(), var("c").into()]))
        .unwrap();
    assert_eq!(block.layout().to_string(), "(128,64):(64,1)");
    let x = "((r * 128) + (c * 2))";
    assert_eq!(expr(byte), format!("(({x} ^ (({x} >> 3) & 0x70)) + 49152)"));
    let ops = take_emitted();
    assert_eq!(ops.iter().filter(|op| **op == "add_const").count(), 1);
    assert_eq!(ops.last(), Some(&"add_const"));
}

#[test]
fn neutral_strides_and_extents_emit_nothing() {
    take_emitted();
    // (r, c) over (4,8):(0,1): r * 0 vanishes, c * 1 is c itself.
    let l: Layout = "(4,8):(0,1)".parse().unwrap();
    let v = l
        .offset(&IntTuple::tuple([var("r").into(), var("c").into()]))
        .unwrap();
    assert_eq!(expr(v), "c");
    // A runtime index over (1,8):(7,1): the extent-1 sub-mode needs no % and no /.
    let l: Layout = "((1,8)):((7,1))".parse().unwrap();
    assert_eq!(expr(l.offset(&var("i").into()).unwrap()), "i");
    // The identity swizzle is free.
    assert_eq!(expr(Swizzle::NONE.apply_int(var("a"))), "a");
    assert!(take_emitted().is_empty());
}

#[test]
fn runtime_thread_index_in_the_wgmma_accumulator_fragment() {
    take_emitted();
    // Rows: ((4,8,4),(2,2,16)):((0,1,16),(0,8,0)). t % 4 has stride 0 and is never
    // computed; register 5 = (1,0,1) adds 0. Columns: ((2,0,0),(1,0,8)): register 5 adds
    // 1 + 8.
    let frag = fragment::wgmma_accumulator_f32(128).unwrap();
    let (row, col) = frag.coord(var("t"), 5).unwrap();
    assert_eq!(expr(row), "(((t / 4) % 8) + ((t / 32) * 16))");
    assert_eq!(expr(col), "(((t % 4) * 2) + 9)");
    assert_eq!(
        take_emitted(),
        [
            "div_const",
            "rem_const",
            "div_const",
            "mul_const",
            "add",
            "rem_const",
            "mul_const",
            "add_const"
        ]
    );
}

#[test]
fn runtime_strides_multiply_runtime_coordinates() {
    take_emitted();
    // A global [rows, 512] tensor whose row stride is a kernel parameter.
    let l = Layout::new(
        int_tuple!({ var("rows") }, 512),
        int_tuple!({ var("stride") }, 1),
    )
    .unwrap();
    let v = l
        .offset(&IntTuple::tuple([var("b").into(), IntTuple::from(3)]))
        .unwrap();
    assert_eq!(expr(v), "((b * stride) + 3)");
    let v = l.offset(&int_tuple!(2, 3)).unwrap();
    assert_eq!(expr(v), "((stride * 2) + 3)");
    assert_eq!(
        take_emitted(),
        ["mul", "add_const", "mul_const", "add_const"]
    );
    // Splitting a flat index across the runtime extent would need a runtime division; the
    // refusal emits nothing, and neither do bounds checks on nested runtime extents.
    let e = l.offset(&var("i").into()).unwrap_err();
    assert_eq!(e.kind(), LayoutErrorKind::NotStatic);
    assert!(
        e.message().contains("pass one coordinate per sub-mode"),
        "{e}"
    );
    // Index 5 over (4,rows):(1,stride) is (1,1): the extent 4*rows is unknown, so the
    // bounds check is skipped rather than computed at run time.
    let nested = Layout::new(
        int_tuple!((4, { var("rows") }), 512),
        int_tuple!((1, { var("stride") }), 1),
    )
    .unwrap();
    let v = nested.offset(&int_tuple!(5, 3)).unwrap();
    assert_eq!(expr(v), "(stride + 4)");
    assert_eq!(take_emitted(), ["add_const"]);
    assert!(!l.is_static());
    assert_eq!(
        l.to_static().unwrap_err().kind(),
        LayoutErrorKind::NotStatic
    );
}
