//! The state spaces the interpreter models, each with its checks: global memory as named
//! host buffers at synthetic device addresses with unmapped gaps between them, a CTA's
//! shared memory with a written bit per byte, and a CTA's tensor memory (128 lanes x 512
//! columns of 32-bit cells) with a written bit per cell.

use std::fmt::Write as _;

/// Where the first buffer starts: a plausible device address, far from 0 so that small
/// integers used as pointers fault.
const GLOBAL_BASE: u64 = 0x7f00_0000_0000;
/// Unmapped bytes between two buffers: an index that runs past a buffer's end faults
/// instead of landing in its neighbour.
const GUARD: u64 = 1 << 20;
/// Alignment of every buffer (cudaMalloc gives at least 256 bytes).
const ALIGN: u64 = 256;

/// A handle on a buffer of a [`Memory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferId(pub(crate) usize);

/// A plain value type that can be copied in and out of buffers as little-endian bytes.
pub trait Plain: Copy {
    const BYTES: usize;
    fn write_le(self, out: &mut [u8]);
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! plain_int {
    ($($t:ty),*) => {$(
        impl Plain for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            fn write_le(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("exact size"))
            }
        }
    )*};
}

plain_int!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

impl Plain for half::bf16 {
    const BYTES: usize = 2;
    fn write_le(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_bits().to_le_bytes());
    }
    fn read_le(bytes: &[u8]) -> Self {
        half::bf16::from_bits(u16::read_le(bytes))
    }
}

impl Plain for half::f16 {
    const BYTES: usize = 2;
    fn write_le(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_bits().to_le_bytes());
    }
    fn read_le(bytes: &[u8]) -> Self {
        half::f16::from_bits(u16::read_le(bytes))
    }
}

struct Buffer {
    name: String,
    addr: u64,
    data: Vec<u8>,
}

/// The global memory of a run: named buffers the host fills before and reads after.
#[derive(Default)]
pub struct Memory {
    buffers: Vec<Buffer>,
    next: u64,
}

/// Why a global access failed.
#[derive(Debug)]
pub(crate) enum GlobalFault {
    OutOfBounds(String),
}

impl Memory {
    pub fn new() -> Self {
        Memory {
            buffers: Vec::new(),
            next: GLOBAL_BASE,
        }
    }

    /// A zero-filled buffer of `bytes` bytes.
    pub fn alloc(&mut self, name: &str, bytes: usize) -> BufferId {
        let addr = self.next;
        self.next = (addr + bytes as u64 + GUARD).next_multiple_of(ALIGN);
        self.buffers.push(Buffer {
            name: name.to_string(),
            addr,
            data: vec![0; bytes],
        });
        BufferId(self.buffers.len() - 1)
    }

    /// A buffer holding `values`.
    pub fn alloc_from<T: Plain>(&mut self, name: &str, values: &[T]) -> BufferId {
        let id = self.alloc(name, values.len() * T::BYTES);
        self.write(id, 0, values);
        id
    }

    /// Writes `values` at byte `offset` of the buffer.
    ///
    /// # Panics
    /// When they do not fit: a host-side bug in the test.
    pub fn write<T: Plain>(&mut self, id: BufferId, offset: usize, values: &[T]) {
        let buf = &mut self.buffers[id.0];
        let end = offset + values.len() * T::BYTES;
        assert!(
            end <= buf.data.len(),
            "writing bytes [{offset}, {end}) of buffer `{}` of {} bytes",
            buf.name,
            buf.data.len()
        );
        for (i, v) in values.iter().enumerate() {
            let at = offset + i * T::BYTES;
            v.write_le(&mut buf.data[at..at + T::BYTES]);
        }
    }

    /// The whole buffer as values of `T` (its length must be a multiple of `T`'s size).
    pub fn read<T: Plain>(&self, id: BufferId) -> Vec<T> {
        self.bytes(id)
            .chunks_exact(T::BYTES)
            .map(T::read_le)
            .collect()
    }

    pub fn bytes(&self, id: BufferId) -> &[u8] {
        &self.buffers[id.0].data
    }

    pub fn bytes_mut(&mut self, id: BufferId) -> &mut [u8] {
        &mut self.buffers[id.0].data
    }

    /// The device address of the buffer's first byte.
    pub fn address(&self, id: BufferId) -> u64 {
        self.buffers[id.0].addr
    }

    pub fn len(&self, id: BufferId) -> usize {
        self.buffers[id.0].data.len()
    }

    pub fn name(&self, id: BufferId) -> &str {
        &self.buffers[id.0].name
    }

    pub fn is_empty(&self) -> bool {
        self.buffers.is_empty()
    }

    /// The buffer holding `[addr, addr + len)` and the offset of `addr` in it.
    #[inline]
    fn locate(&self, addr: u64, len: u64) -> Result<(usize, usize), GlobalFault> {
        // Buffers are allocated at increasing addresses: binary search the last start <= addr.
        let i = self.buffers.partition_point(|b| b.addr <= addr);
        if i > 0 {
            let b = &self.buffers[i - 1];
            let end = b.addr + b.data.len() as u64;
            if addr.checked_add(len).is_some_and(|e| e <= end) {
                return Ok((i - 1, (addr - b.addr) as usize));
            }
        }
        Err(GlobalFault::OutOfBounds(self.describe(addr, len)))
    }

    /// Where an out-of-bounds address lies relative to the buffers.
    fn describe(&self, addr: u64, len: u64) -> String {
        let mut out = String::new();
        let i = self.buffers.partition_point(|b| b.addr <= addr);
        if i > 0 {
            let b = &self.buffers[i - 1];
            let end = b.addr + b.data.len() as u64;
            if addr < end {
                let _ = write!(
                    out,
                    "the access [{addr:#x}, {:#x}) runs {} byte(s) past the end of buffer `{}` \
                     [{:#x}, {end:#x}) ({} bytes)",
                    addr + len,
                    addr + len - end,
                    b.name,
                    b.addr,
                    b.data.len()
                );
            } else {
                let _ = write!(
                    out,
                    "the address is {} byte(s) after the end of buffer `{}` [{:#x}, {end:#x}) \
                     ({} bytes)",
                    addr - end,
                    b.name,
                    b.addr,
                    b.data.len()
                );
            }
            if let Some(next) = self.buffers.get(i) {
                let _ = write!(
                    out,
                    " and {} byte(s) before buffer `{}`",
                    next.addr - addr,
                    next.name
                );
            }
        } else if let Some(first) = self.buffers.first() {
            let _ = write!(
                out,
                "the address is {} byte(s) before the first buffer `{}` at {:#x}",
                first.addr.wrapping_sub(addr),
                first.name,
                first.addr
            );
        } else {
            out.push_str("no global buffer is bound");
        }
        out
    }

    /// Whether `len` bytes at `addr` lie inside one buffer, without reading them.
    pub(crate) fn check_global(&self, addr: u64, len: u64) -> Result<(), GlobalFault> {
        self.locate(addr, len).map(|_| ())
    }

    #[inline]
    pub(crate) fn read_global(&self, addr: u64, out: &mut [u8]) -> Result<(), GlobalFault> {
        let (b, off) = self.locate(addr, out.len() as u64)?;
        out.copy_from_slice(&self.buffers[b].data[off..off + out.len()]);
        Ok(())
    }

    #[inline]
    pub(crate) fn write_global(&mut self, addr: u64, bytes: &[u8]) -> Result<(), GlobalFault> {
        let (b, off) = self.locate(addr, bytes.len() as u64)?;
        self.buffers[b].data[off..off + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }
}

/// A bit per element, for "was this ever written" checks.
#[derive(Clone, Debug)]
pub(crate) struct Bits {
    words: Vec<u64>,
}

impl Bits {
    pub(crate) fn new(n: usize) -> Self {
        Bits {
            words: vec![0; n.div_ceil(64)],
        }
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> bool {
        self.words[i / 64] >> (i % 64) & 1 != 0
    }

    #[inline]
    pub(crate) fn set_range(&mut self, start: usize, len: usize, value: bool) {
        for i in start..start + len {
            let (w, b) = (i / 64, i % 64);
            if value {
                self.words[w] |= 1 << b;
            } else {
                self.words[w] &= !(1 << b);
            }
        }
    }

    /// The first index in `[start, start + len)` whose bit is clear.
    #[inline]
    pub(crate) fn first_clear(&self, start: usize, len: usize) -> Option<usize> {
        let end = start + len;
        let mut i = start;
        while i < end {
            let (w, b) = (i / 64, i % 64);
            let n = (64 - b).min(end - i);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << b
            };
            let missing = !self.words[w] & mask;
            if missing != 0 {
                return Some(w * 64 + missing.trailing_zeros() as usize);
            }
            i += n;
        }
        None
    }
}

/// Why a shared-memory access failed.
pub(crate) enum SmemFault {
    OutOfBounds,
    Uninitialized(u32),
    Mbarrier(u32),
}

/// One CTA's dynamic shared memory: `len` bytes at shared::cta addresses
/// `[SMEM_BASE, SMEM_BASE + len)`.
pub(crate) struct Smem {
    pub(crate) data: Vec<u8>,
    pub(crate) written: Bits,
    /// One bit per 8-byte word holding a live mbarrier: ordinary accesses to it are faults.
    pub(crate) mbar_words: Bits,
    pub(crate) has_mbars: bool,
}

impl Smem {
    pub(crate) fn new(len: usize) -> Self {
        Smem {
            data: vec![0; len],
            written: Bits::new(len),
            mbar_words: Bits::new(len.div_ceil(8)),
            has_mbars: false,
        }
    }

    /// The byte offset of shared::cta address `addr` for an access of `len` bytes.
    #[inline]
    pub(crate) fn offset(&self, addr: u64, len: usize) -> Result<usize, SmemFault> {
        let base = super::SMEM_BASE as u64;
        if addr >= base && addr - base + len as u64 <= self.data.len() as u64 {
            Ok((addr - base) as usize)
        } else {
            Err(SmemFault::OutOfBounds)
        }
    }

    pub(crate) fn touches_mbar(&self, off: usize, len: usize) -> Option<u32> {
        if !self.has_mbars {
            return None;
        }
        (off / 8..(off + len).div_ceil(8))
            .find(|&w| self.mbar_words.get(w))
            .map(|w| (w * 8) as u32)
    }

    /// Reads `out.len()` bytes at `addr`, every byte of which must have been written.
    #[inline]
    pub(crate) fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), SmemFault> {
        let off = self.offset(addr, out.len())?;
        if let Some(w) = self.touches_mbar(off, out.len()) {
            return Err(SmemFault::Mbarrier(w));
        }
        if let Some(i) = self.written.first_clear(off, out.len()) {
            return Err(SmemFault::Uninitialized(i as u32));
        }
        out.copy_from_slice(&self.data[off..off + out.len()]);
        Ok(())
    }

    #[inline]
    pub(crate) fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<usize, SmemFault> {
        let off = self.offset(addr, bytes.len())?;
        if let Some(w) = self.touches_mbar(off, bytes.len()) {
            return Err(SmemFault::Mbarrier(w));
        }
        self.data[off..off + bytes.len()].copy_from_slice(bytes);
        self.written.set_range(off, bytes.len(), true);
        Ok(off)
    }
}

/// Lanes and columns of a CTA's tensor memory.
pub(crate) const TMEM_LANES: u32 = 128;
pub(crate) const TMEM_COLS: u32 = 512;

/// A live `tcgen05.alloc`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TmemAlloc {
    pub(crate) col: u32,
    pub(crate) ncols: u32,
    pub(crate) warp: u32,
}

/// One CTA's tensor memory.
pub(crate) struct Tmem {
    cells: Vec<u32>,
    written: Bits,
    pub(crate) allocs: Vec<TmemAlloc>,
    pub(crate) relinquished: bool,
}

/// Why a tensor-memory access failed.
pub(crate) enum TmemFault {
    NotAllocated { lane: u32, col: u32 },
    Uninitialized { lane: u32, col: u32 },
}

impl Tmem {
    pub(crate) fn new() -> Self {
        let n = (TMEM_LANES * TMEM_COLS) as usize;
        Tmem {
            cells: vec![0; n],
            written: Bits::new(n),
            allocs: Vec::new(),
            relinquished: false,
        }
    }

    /// The lowest free column range of `ncols` columns aligned to `ncols`.
    pub(crate) fn find_free(&self, ncols: u32) -> Option<u32> {
        (0..TMEM_COLS).step_by(ncols as usize).find(|&c| {
            self.allocs
                .iter()
                .all(|a| c + ncols <= a.col || a.col + a.ncols <= c)
        })
    }

    /// Columns `[col, col + n)` all lie in live allocations.
    fn allocated(&self, col: u32, n: u32) -> Option<u32> {
        (col..col + n).find(|&c| {
            !self
                .allocs
                .iter()
                .any(|a| c >= a.col && c < a.col + a.ncols)
        })
    }

    pub(crate) fn free(&mut self, col: u32) {
        self.allocs.retain(|a| a.col != col);
    }

    /// Forgets what was written to columns `[col, col + n)` (a fresh allocation is undefined).
    pub(crate) fn invalidate(&mut self, col: u32, n: u32) {
        for lane in 0..TMEM_LANES {
            self.written
                .set_range((lane * TMEM_COLS + col) as usize, n as usize, false);
        }
    }

    /// Checks cells `(lane, col..col + n)` exist and are allocated.
    #[inline]
    pub(crate) fn check(&self, lane: u32, col: u32, n: u32) -> Result<usize, TmemFault> {
        if lane >= TMEM_LANES || col + n > TMEM_COLS {
            return Err(TmemFault::NotAllocated { lane, col });
        }
        if let Some(c) = self.allocated(col, n) {
            return Err(TmemFault::NotAllocated { lane, col: c });
        }
        Ok((lane * TMEM_COLS + col) as usize)
    }

    #[inline]
    pub(crate) fn read(&self, lane: u32, col: u32, out: &mut [u32]) -> Result<(), TmemFault> {
        let at = self.check(lane, col, out.len() as u32)?;
        if let Some(i) = self.written.first_clear(at, out.len()) {
            return Err(TmemFault::Uninitialized {
                lane,
                col: col + (i - at) as u32,
            });
        }
        out.copy_from_slice(&self.cells[at..at + out.len()]);
        Ok(())
    }

    /// Like [`Tmem::read`], but a never-written cell is not a fault: its index is reported
    /// through `unwritten` (the first one) so the caller can poison what it loads.
    pub(crate) fn read_allocated(
        &self,
        lane: u32,
        col: u32,
        out: &mut [u32],
    ) -> Result<Option<u32>, TmemFault> {
        let at = self.check(lane, col, out.len() as u32)?;
        out.copy_from_slice(&self.cells[at..at + out.len()]);
        Ok(self
            .written
            .first_clear(at, out.len())
            .map(|i| col + (i - at) as u32))
    }

    #[inline]
    pub(crate) fn write(&mut self, lane: u32, col: u32, values: &[u32]) -> Result<(), TmemFault> {
        let at = self.check(lane, col, values.len() as u32)?;
        self.cells[at..at + values.len()].copy_from_slice(values);
        self.written.set_range(at, values.len(), true);
        Ok(())
    }

    pub(crate) fn is_written(&self, lane: u32, col: u32) -> bool {
        self.written.get((lane * TMEM_COLS + col) as usize)
    }

    /// Cells `(lane, col..col + n)` for a debug snapshot: value and whether it was written.
    pub(crate) fn peek(&self, lane: u32, col: u32, n: u32) -> Vec<Option<u32>> {
        (col..col + n)
            .map(|c| {
                if lane < TMEM_LANES && c < TMEM_COLS {
                    let i = (lane * TMEM_COLS + c) as usize;
                    self.written.get(i).then_some(self.cells[i])
                } else {
                    None
                }
            })
            .collect()
    }
}
