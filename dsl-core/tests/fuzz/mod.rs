//! Random small kernels for differential testing: a seed picks a program, which is traced
//! through the DSL the way kernels are written, so it is valid by construction. Each
//! thread computes from its indices, a scalar parameter and one or two tensors of random
//! words, and stores every value the top level of the program holds into its own column of
//! `out` (values made inside a runtime `if` or loop reach it through the carried values,
//! one of which hashes everything the region computed).
//!
//! Only ops whose results PTX defines exactly, and the interpreter models bit for bit, are
//! generated. Left out: `ex2.approx` (the interpreter rounds 2^x from f64; the hardware's
//! bits are not published), `elect.sync` (PTX does not say which lane it elects), and
//! `neg`/`abs` of a NaN f32 (PTX leaves the NaN's bits unspecified; the generator maps NaN
//! to 0 first). Which NaN an f32 op returns is unspecified in PTX too, and ptxas may fold
//! an op that returns an operand's bits (`x * 1`, `min(x, x)`): so the only NaN a kernel
//! sees is the canonical `0x7fffffff` the hardware's arithmetic writes (and the interpreter
//! models); random words read as f32 have their NaNs made canonical, and `-0.0 - x` (which
//! a compiler may turn into a sign flip) is not generated. Integer division never sees a
//! zero divisor (a fault in the interpreter, unspecified in PTX) nor a signed `MIN / -1`.
//! Shuffles, `ballot` and `bar.sync` appear only at the top level, where every thread of
//! the CTA is converged.
//!
//! Two patterns are kept out because ptxas miscompiles them (ptxas 13.5, and the H200's
//! driver JIT, which the differential test caught on them):
//! - f32 -> u32 -> f32 -> u32 is folded into the last f32 -> u32 conversion alone
//!   (`cvt.rmi.u32.f32`, `cvt.rp.f32.u32`, `cvt.rpi.u32.f32` assemble to one
//!   `F2I.U32.CEIL`, so 0.25 gives 1 where PTX says 0). A u32 converted from an f32 is not
//!   converted back to an f32.
//! - A signed comparison of -|x| with a constant is folded to a constant
//!   (`abs.s32`, `neg.s32`, `setp.ge.s32 .., -1` stores 0 for every x, where PTX says 1 for
//!   x in -1..=1). The negation of an `abs` is not formed.
//!
//! PTX does not say what `abs.s32` of i32::MIN is, and ptxas takes every `abs` to be
//! non-negative (a `rem.s32` of one by a constant becomes an unsigned remainder, which
//! differs for i32::MIN), so `abs` is taken of values clamped to -i32::MAX first.

pub mod run;

use std::collections::HashSet;

use dsl_core::Target;
use dsl_core::arch::memory::{Gmem, load, store};
use dsl_core::arch::sync::sync_threads;
use dsl_core::arch::thread::{
    ballot, block_idx_x, lane_id, shfl_down, shfl_idx, shfl_up, shfl_xor, thread_idx_x, warp_id,
};
use dsl_core::ir::{Kernel, Reg, Rounding, SourceLoc};
use dsl_core::trace::control::{branch, for_loop};
use dsl_core::trace::{
    Carry, KernelParam, Pred, Tensor, Val, dyn_range, smem_alloc, threads, trace_kernel,
};

/// splitmix64: small, and the same sequence on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn word(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `num / den`.
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next_u64() % den < num
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// A generated kernel with what it takes to launch it.
pub struct Case {
    pub seed: u64,
    pub kernel: Kernel,
    pub threads: u32,
    pub grid: u32,
    /// Words in each input tensor and in each column of `out`: the grid's threads, rounded
    /// up to a power of two so that an index masks into range.
    pub len: u32,
    /// The input tensors by parameter name (`a`, and `b` in some cases).
    pub inputs: Vec<(&'static str, Vec<u32>)>,
    /// The scalar parameter `n`.
    pub n: u32,
    /// What each column of `out` holds: `%reg:type`, for failure messages.
    pub columns: Vec<String>,
}

impl Case {
    /// Words in `out`: one column of `len` words per stored value.
    pub fn out_words(&self) -> usize {
        self.columns.len() * self.len as usize
    }
}

/// The values a program has computed, by type.
#[derive(Clone, Default)]
struct Pool {
    u: Vec<Val<u32>>,
    i: Vec<Val<i32>>,
    f: Vec<Val<f32>>,
    p: Vec<Pred>,
}

impl Carry for Pool {
    fn regs(&self, out: &mut Vec<Reg>) {
        self.u.regs(out);
        self.i.regs(out);
        self.f.regs(out);
        self.p.regs(out);
    }
    fn rebuild(&self, regs: &mut dyn Iterator<Item = Reg>) -> Self {
        Pool {
            u: self.u.rebuild(regs),
            i: self.i.rebuild(regs),
            f: self.f.rebuild(regs),
            p: self.p.rebuild(regs),
        }
    }
    fn static_diff(&self, other: &Self) -> Option<String> {
        self.u
            .static_diff(&other.u)
            .or_else(|| self.i.static_diff(&other.i))
            .or_else(|| self.f.static_diff(&other.f))
            .or_else(|| self.p.static_diff(&other.p))
    }
}

impl Pool {
    fn extend(&mut self, other: &Pool) {
        self.u.extend(&other.u);
        self.i.extend(&other.i);
        self.f.extend(&other.f);
        self.p.extend(&other.p);
    }

    fn lens(&self) -> [usize; 4] {
        [self.u.len(), self.i.len(), self.f.len(), self.p.len()]
    }
}

/// The NaN NVIDIA's f32 arithmetic returns.
const CANONICAL_NAN: u32 = 0x7fff_ffff;

/// Literal f32 operands: the values where rounding, signed zeros, subnormals, overflow
/// and NaN behave specially, and a few ordinary ones.
const F32_LITERALS: [f32; 14] = [
    0.0,
    -0.0,
    1.0,
    -1.5,
    0.5,
    3.0,
    65536.5,
    1e10,
    1e-40,
    f32::MIN_POSITIVE,
    f32::MAX,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::from_bits(CANONICAL_NAN),
];

const ROUNDINGS: [Rounding; 4] = [
    Rounding::Nearest,
    Rounding::Zero,
    Rounding::Down,
    Rounding::Up,
];

/// Nesting of runtime `if`s and loops.
const MAX_DEPTH: u32 = 2;

struct Gen {
    rng: Rng,
    threads: u32,
    len: u32,
    a: Gmem,
    b: Option<Gmem>,
    tid: Val<u32>,
    smem_regions: u32,
    /// The u32 values converted from an f32, and the s32 values that are an `abs`: what
    /// the module docs' ptxas miscompiles start from.
    from_f32: HashSet<Reg>,
    abs: HashSet<Reg>,
}

impl Gen {
    /// A value of the pool, recent ones more often so that chains grow deep.
    fn choose<T: Copy>(&mut self, vals: &[T]) -> T {
        let n = vals.len();
        if self.rng.chance(1, 2) {
            vals[n - 1 - self.rng.below(n.min(4))]
        } else {
            vals[self.rng.below(n)]
        }
    }

    fn u(&mut self, pool: &Pool) -> Val<u32> {
        self.choose(&pool.u)
    }
    fn i(&mut self, pool: &Pool) -> Val<i32> {
        self.choose(&pool.i)
    }
    fn f(&mut self, pool: &Pool) -> Val<f32> {
        self.choose(&pool.f)
    }
    fn p(&mut self, pool: &Pool) -> Pred {
        self.choose(&pool.p)
    }

    /// A u32 of the pool that was not converted from an f32 (see the module docs): the
    /// first one, the thread index, when the choice falls on one.
    fn not_from_f32(&mut self, pool: &Pool) -> Val<u32> {
        let v = self.u(pool);
        if self.from_f32.contains(&v.reg()) {
            pool.u[0]
        } else {
            v
        }
    }

    /// An s32 of the pool that is not an `abs` (see the module docs): the first one, which
    /// is a loaded word, when the choice falls on one.
    fn not_abs(&mut self, pool: &Pool) -> Val<i32> {
        let v = self.i(pool);
        if self.abs.contains(&v.reg()) {
            pool.i[0]
        } else {
            v
        }
    }

    fn lit_u(&mut self) -> u32 {
        match self.rng.below(4) {
            0 => self.rng.below(33) as u32,
            1 => u32::MAX - self.rng.below(4) as u32,
            2 => 1 << self.rng.below(32),
            _ => self.rng.word(),
        }
    }

    fn lit_f(&mut self) -> f32 {
        if self.rng.chance(3, 4) {
            self.rng.pick(&F32_LITERALS)
        } else {
            let x = f32::from_bits(self.rng.word());
            if x.is_nan() {
                f32::from_bits(CANONICAL_NAN)
            } else {
                x
            }
        }
    }

    /// The address of word `index & (len - 1)` of an input tensor.
    fn input_word(&mut self, index: Val<u32>) -> Val<u32> {
        let base = match self.b {
            Some(b) if self.rng.chance(1, 2) => b,
            _ => self.a,
        };
        load(base + ((index & (self.len - 1)) << 2u32))
    }

    /// A nonzero u32 divisor.
    fn divisor_u(&mut self, pool: &Pool) -> Val<u32> {
        self.u(pool) | 1u32
    }

    /// An i32 divisor that is neither 0 nor -1: even, with bit 1 set.
    fn divisor_i(&mut self, pool: &Pool) -> Val<i32> {
        (self.i(pool) & !1i32) | 2i32
    }

    fn lit_divisor_i(&mut self) -> i32 {
        let v = self.rng.word() as i32 >> self.rng.below(31);
        if v == 0 || v == -1 { 7 } else { v }
    }

    fn op_u(&mut self, pool: &mut Pool) {
        let a = self.u(pool);
        let imm = self.rng.chance(1, 3);
        let v = match self.rng.below(20) {
            0 if imm => a + self.lit_u(),
            0 => a + self.u(pool),
            1 if imm => a - self.lit_u(),
            1 => a - self.u(pool),
            2 if imm => a * self.lit_u(),
            2 => a * self.u(pool),
            3 => a.mul_hi(self.u(pool)),
            4 => a & self.u(pool),
            5 if imm => a | self.lit_u(),
            5 => a | self.u(pool),
            6 => a ^ self.u(pool),
            // Shift amounts past the width too: PTX clamps them.
            7 if imm => a << (self.lit_u() % 40),
            7 => a << self.u(pool),
            8 if imm => a >> (self.lit_u() % 40),
            8 => a >> self.u(pool),
            9 if imm => a / (self.lit_u() | 1),
            9 => a / self.divisor_u(pool),
            10 => a % self.divisor_u(pool),
            11 => a.min(self.u(pool)),
            12 if imm => a.max(self.lit_u()),
            12 => a.max(self.u(pool)),
            13 => a.fma(self.u(pool), self.u(pool)),
            14 => !a,
            15 => self.p(pool).select(a, self.u(pool)),
            16 => {
                let wide = a.mul_wide(self.u(pool));
                (wide >> self.rng.below(33) as u32).cast::<u32>()
            }
            17 => {
                let v = self.f(pool).cast_rounded::<u32>(self.rng.pick(&ROUNDINGS));
                self.from_f32.insert(v.reg());
                v
            }
            18 => self.i(pool).bitcast::<u32>(),
            _ => self.p(pool).to_u32(),
        };
        pool.u.push(v);
    }

    fn op_i(&mut self, pool: &mut Pool) {
        let a = self.i(pool);
        let imm = self.rng.chance(1, 3);
        let v = match self.rng.below(18) {
            0 if imm => a + self.lit_u() as i32,
            0 => a + self.i(pool),
            1 => a - self.not_abs(pool),
            2 if imm => a * self.lit_u() as i32,
            2 => a * self.i(pool),
            3 => a.mul_hi(self.i(pool)),
            4 => a.min(self.i(pool)),
            5 if imm => a.max(self.lit_u() as i32),
            5 => a.max(self.i(pool)),
            6 if imm => a >> (self.lit_u() % 40),
            6 => a >> self.u(pool),
            7 => a << self.u(pool),
            8 if imm => a / self.lit_divisor_i(),
            8 => a / self.divisor_i(pool),
            9 if imm => a % self.lit_divisor_i(),
            9 => a % self.divisor_i(pool),
            10 => -self.not_abs(pool),
            11 => {
                let v = a.max(-i32::MAX).abs();
                self.abs.insert(v.reg());
                v
            }
            12 => a ^ self.i(pool),
            13 => a.fma(self.i(pool), self.i(pool)),
            14 => self.p(pool).select(a, self.i(pool)),
            15 => {
                let wide = a.mul_wide(self.i(pool));
                (wide >> self.rng.below(33) as u32).cast::<i32>()
            }
            16 => self.f(pool).cast_rounded::<i32>(self.rng.pick(&ROUNDINGS)),
            _ => self.u(pool).bitcast::<i32>(),
        };
        pool.i.push(v);
    }

    fn op_f(&mut self, pool: &mut Pool) {
        let a = self.f(pool);
        let imm = self.rng.chance(1, 3);
        let v = match self.rng.below(16) {
            0 if imm => a + self.lit_f(),
            0 => a + self.f(pool),
            1 if imm => {
                let lit = self.lit_f();
                if lit.to_bits() == (-0.0f32).to_bits() {
                    a - lit
                } else {
                    lit - a
                }
            }
            1 => a - self.f(pool),
            2 if imm => a * self.lit_f(),
            2 => a * self.f(pool),
            3 => a / self.f(pool),
            4 if imm => a.fma(self.lit_f(), self.f(pool)),
            4 => a.fma(self.f(pool), self.f(pool)),
            5 => a.min(self.f(pool)),
            6 if imm => a.max(self.lit_f()),
            6 => a.max(self.f(pool)),
            7 => a.rcp(),
            8 => not_nan(a).abs(),
            9 => -not_nan(a),
            10 => self.p(pool).select(a, self.f(pool)),
            11 => self
                .not_from_f32(pool)
                .cast_rounded::<f32>(self.rng.pick(&ROUNDINGS)),
            12 => self.i(pool).cast_rounded::<f32>(self.rng.pick(&ROUNDINGS)),
            13 => {
                let bits = self.u(pool);
                as_f32(bits)
            }
            14 => self.i(pool).cast::<f32>() * self.lit_f(),
            _ => (a - self.f(pool)) * self.f(pool),
        };
        pool.f.push(v);
    }

    fn op_p(&mut self, pool: &mut Pool) {
        let imm = self.rng.chance(1, 3);
        let v = match self.rng.below(8) {
            0 => self.compare_u(pool, imm),
            1 => {
                let a = self.i(pool);
                let b = if imm {
                    Val::constant(self.lit_u() as i32)
                } else {
                    self.i(pool)
                };
                self.compare(a, b)
            }
            2 => {
                let a = self.f(pool);
                let b = if imm {
                    Val::constant(self.lit_f())
                } else {
                    self.f(pool)
                };
                self.compare(a, b)
            }
            3 => self.p(pool) & self.p(pool),
            4 => self.p(pool) | self.p(pool),
            5 => self.p(pool) ^ self.p(pool),
            6 => !self.p(pool),
            _ => (self.u(pool) & 1u32).eq(0u32),
        };
        pool.p.push(v);
    }

    fn compare_u(&mut self, pool: &Pool, imm: bool) -> Pred {
        let a = self.u(pool);
        let b = if imm {
            Val::constant(self.lit_u())
        } else {
            self.u(pool)
        };
        self.compare(a, b)
    }

    fn compare<T: dsl_core::trace::Number>(&mut self, a: Val<T>, b: Val<T>) -> Pred {
        match self.rng.below(6) {
            0 => a.lt(b),
            1 => a.le(b),
            2 => a.gt(b),
            3 => a.ge(b),
            4 => a.eq(b),
            _ => a.ne(b),
        }
    }

    /// A warp shuffle, a ballot or a shared-memory exchange: top level only.
    fn collective(&mut self, pool: &mut Pool) {
        match self.rng.below(6) {
            0 => {
                let v = self.u(pool);
                pool.u.push(shfl_xor(v, 1 << self.rng.below(5)));
            }
            1 => {
                let v = self.f(pool);
                let lane = self.u(pool);
                pool.f.push(shfl_idx(v, lane));
            }
            2 => {
                let v = self.i(pool);
                pool.i.push(shfl_down(v, 1 + self.rng.below(31) as u32));
            }
            3 => {
                let v = self.u(pool);
                pool.u.push(shfl_up(v, 1 + self.rng.below(31) as u32));
            }
            4 => {
                let p = self.p(pool);
                pool.u.push(ballot(p));
            }
            _ if self.smem_regions < 3 => self.exchange(pool),
            _ => {
                let v = self.u(pool);
                pool.u.push(shfl_idx(v, self.rng.below(32) as u32));
            }
        }
    }

    /// Every thread writes a word to its own slot of a fresh shared buffer and, after
    /// `bar.sync`, reads another thread's.
    fn exchange(&mut self, pool: &mut Pool) {
        let region = smem_alloc(
            &format!("exchange{}", self.smem_regions),
            self.threads * 4,
            16,
        );
        self.smem_regions += 1;
        let tid = self.tid;
        let v = self.u(pool);
        store(region.addr() + (tid << 2u32), v);
        sync_threads();
        let from = if self.rng.chance(1, 2) {
            (tid + (1 + self.rng.below(self.threads as usize - 1)) as u32) % self.threads
        } else {
            self.u(pool) % self.threads
        };
        pool.u.push(load(region.addr() + (from << 2u32)));
    }

    /// One step of a block: an op, or at shallow depth a runtime `if` or loop.
    fn step(&mut self, pool: &mut Pool, depth: u32) {
        let roll = self.rng.below(100);
        match roll {
            0..=5 if depth < MAX_DEPTH => self.runtime_if(pool, depth),
            6..=10 if depth < MAX_DEPTH => self.runtime_loop(pool, depth),
            11..=17 if depth == 0 => self.collective(pool),
            18..=21 => {
                let index = self.u(pool);
                let w = self.input_word(index);
                pool.u.push(w);
            }
            22..=45 => self.op_u(pool),
            46..=63 => self.op_i(pool),
            64..=85 => self.op_f(pool),
            _ => self.op_p(pool),
        }
    }

    fn block(&mut self, pool: &mut Pool, depth: u32, steps: usize) {
        for _ in 0..steps {
            self.step(pool, depth);
        }
    }

    /// The values a runtime region carries: one to three of each type from the pool.
    fn carried(&mut self, pool: &Pool) -> Pool {
        let mut vars = Pool::default();
        for _ in 0..1 + self.rng.below(3) {
            vars.u.push(self.u(pool));
        }
        for _ in 0..self.rng.below(3) {
            vars.i.push(self.i(pool));
        }
        for _ in 0..self.rng.below(3) {
            vars.f.push(self.f(pool));
        }
        for _ in 0..self.rng.below(2) {
            vars.p.push(self.p(pool));
        }
        vars
    }

    /// The body of an `if` arm or a loop: a few steps over the outer values, the carried
    /// ones (and the loop index), then new carried values, the first a hash of every value
    /// the body made.
    fn region(&mut self, outer: &Pool, vars: Pool, index: Option<Val<u32>>, depth: u32) -> Pool {
        let mut local = outer.clone();
        local.extend(&vars);
        local.u.extend(index);
        let [u0, i0, f0, p0] = local.lens();
        let steps = 2 + self.rng.below(7);
        self.block(&mut local, depth + 1, steps);
        let mut hash = vars.u[0];
        for &v in &local.u[u0..] {
            hash = mix(hash, v);
        }
        for &v in &local.i[i0..] {
            hash = mix(hash, v.bitcast());
        }
        for &v in &local.f[f0..] {
            hash = mix(hash, v.bitcast());
        }
        for &v in &local.p[p0..] {
            hash = mix(hash, v.to_u32());
        }
        let mut out = Pool::default();
        out.u.push(hash);
        for _ in 1..vars.u.len() {
            out.u.push(self.u(&local));
        }
        for _ in 0..vars.i.len() {
            out.i.push(self.i(&local));
        }
        for _ in 0..vars.f.len() {
            out.f.push(self.f(&local));
        }
        for _ in 0..vars.p.len() {
            out.p.push(self.p(&local));
        }
        out
    }

    fn runtime_if(&mut self, pool: &mut Pool, depth: u32) {
        let cond = self.p(pool);
        let vars = self.carried(pool);
        let outer = pool.clone();
        let (merged, ()) = branch(cond, vars, &[], SourceLoc::caller(), |_, vars| {
            (self.region(&outer, vars, None, depth), ())
        });
        pool.extend(&merged);
    }

    /// A loop of 0 to 7 iterations, the count differing between threads.
    fn runtime_loop(&mut self, pool: &mut Pool, depth: u32) {
        let end = self.u(pool) & 7u32;
        let start = self.rng.below(2) as u32;
        let range = dyn_range(start, end).step_by(1 + self.rng.below(2) as u32);
        let vars = self.carried(pool);
        let outer = pool.clone();
        let after = for_loop(range, vars, &[], SourceLoc::caller(), |i, vars| {
            self.region(&outer, vars, Some(i), depth)
        });
        pool.extend(&after);
    }
}

/// `acc` folded with `v` (FNV-1a's step): the hash of a region's values.
fn mix(acc: Val<u32>, v: Val<u32>) -> Val<u32> {
    (acc ^ v) * 0x0100_0193u32
}

/// The f32 of `bits`, a NaN made canonical.
fn as_f32(bits: Val<u32>) -> Val<f32> {
    let x = bits.bitcast::<f32>();
    x.ne(x).select(f32::from_bits(CANONICAL_NAN), x)
}

/// `x`, with a NaN replaced by 0.
fn not_nan(x: Val<f32>) -> Val<f32> {
    x.ne(x).select(0.0f32, x)
}

/// The kernel and launch of `seed`, traced for `target`.
pub fn generate(seed: u64, target: Target) -> Result<Case, String> {
    let mut rng = Rng::new(seed);
    let threads_per_cta = rng.pick(&[64u32, 96, 128]);
    let grid = if rng.chance(1, 4) { 2 } else { 1 };
    let len = (threads_per_cta * grid).next_power_of_two();
    let two_inputs = rng.chance(1, 2);
    let mut inputs = vec![("a", (0..len).map(|_| rng.word()).collect::<Vec<_>>())];
    if two_inputs {
        inputs.push(("b", (0..len).map(|_| rng.word()).collect()));
    }
    let n = rng.word() >> rng.below(32);
    let steps = 24 + rng.below(32);
    let mut columns = Vec::new();
    let kernel = trace_kernel(&format!("fuzz_{seed}"), target, || {
        threads(threads_per_cta, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let a = Tensor::<u32, 1>::declare("a");
        let b = two_inputs.then(|| Tensor::<u32, 1>::declare("b"));
        let n = Val::<u32>::declare("n");
        let tid = thread_idx_x();
        let gtid = block_idx_x() * threads_per_cta + tid;
        let mut g = Gen {
            rng,
            threads: threads_per_cta,
            len,
            a: a.base(),
            b: b.map(|b| b.base()),
            tid,
            smem_regions: 0,
            from_f32: HashSet::new(),
            abs: HashSet::new(),
        };
        let mut pool = Pool::default();
        let mine = g.input_word(gtid);
        pool.u
            .extend([tid, block_idx_x(), lane_id(), warp_id(), n, mine]);
        let other = g.input_word(gtid * 37u32 + 11u32);
        pool.u.push(other);
        pool.i.push(mine.bitcast());
        pool.f.push(as_f32(mine));
        pool.f.push(tid.cast::<f32>() * 0.25f32 - 7.0f32);
        pool.p.push(tid.lt(n & 127u32));
        pool.p.push((other & 1u32).eq(0u32));
        g.block(&mut pool, 0, steps);

        let at = out.base() + (gtid << 2u32);
        let mut column = 0i64;
        let mut put = |v: Val<u32>, name: String| {
            store(at + column * i64::from(len) * 4, v);
            columns.push(name);
            column += 1;
        };
        for v in &pool.u {
            put(*v, format!("%{}:u32", v.reg().0));
        }
        for v in &pool.i {
            put(v.bitcast(), format!("%{}:s32", v.reg().0));
        }
        for v in &pool.f {
            put(v.bitcast(), format!("%{}:f32", v.reg().0));
        }
        for v in &pool.p {
            put(v.to_u32(), format!("%{}:pred", v.reg().0));
        }
    })
    .map_err(|e| format!("seed {seed}: the generated kernel does not trace: {e}"))?;
    Ok(Case {
        seed,
        kernel,
        threads: threads_per_cta,
        grid,
        len,
        inputs,
        n,
        columns,
    })
}

/// The seeds `KESTREL_FUZZ_SEEDS` names (`a..b` or one seed), if it is set.
pub fn seeds_from_env() -> Option<std::ops::Range<u64>> {
    let spec = std::env::var("KESTREL_FUZZ_SEEDS").ok()?;
    let parse = |s: &str| {
        s.trim()
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("KESTREL_FUZZ_SEEDS=`{spec}`: expected `a..b` or a seed"))
    };
    Some(match spec.split_once("..") {
        Some((a, b)) => parse(a)..parse(b),
        None => {
            let s = parse(&spec);
            s..s + 1
        }
    })
}
