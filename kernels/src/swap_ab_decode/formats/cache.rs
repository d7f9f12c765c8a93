//! Paged KV caches: `[num_blocks, page, record]` bytes whose blocks may lie further apart than
//! `page * record` bytes.

use dsl_core::layout::{DynInt, Int, IntTuple, Layout, StaticOnly};
use dsl_core::tensor::{self, Global};
use dsl_core::trace::Tensor;

use crate::swap_ab_decode::problem::ProblemError;
use crate::swap_ab_decode::{ExtraRecord, HEAD_DIM, record};

/// Bytes of the chunks a record is gathered in (one 16-byte load each).
pub const CHUNK_BYTES: i64 = 16;

/// A paged cache's layout in bytes: `(slot, byte of the record)` with the slot a
/// `(page, num_blocks)` mode (slot in its block, block) and the byte a `(16, record / 16)`
/// mode (byte in its 16-byte chunk, chunk), i.e.
/// `((page, num_blocks), (16, record / 16)) : ((record, block_stride), (1, 16))`.
/// Slot id `s` is the flat slot coordinate `s % page + page * (s / page)`.
pub fn layout<D: DynInt>(
    num_blocks: Int<D>,
    page: i64,
    record: i64,
    block_stride: Int<D>,
) -> Layout<D> {
    Layout::new(
        IntTuple::tuple([
            IntTuple::tuple([page.into(), num_blocks.into()]),
            IntTuple::tuple([CHUNK_BYTES.into(), (record / CHUNK_BYTES).into()]),
        ]),
        IntTuple::tuple([
            IntTuple::tuple([record.into(), block_stride.into()]),
            IntTuple::tuple([1i64.into(), CHUNK_BYTES.into()]),
        ]),
    )
    .expect("shape and stride of one profile")
}

/// The strides of a static layout's leaves, in order (the modes of its flattening).
pub fn flat_strides(layout: &Layout) -> Vec<usize> {
    layout
        .stride()
        .leaves()
        .iter()
        .map(|s| s.value() as usize)
        .collect()
}

/// The strides of the rank-3 description `[num_blocks, page, record]` (bytes) that host
/// APIs pass a cache as, read off `layout`.
pub fn described_strides(layout: &Layout) -> [usize; 3] {
    let flat = flat_strides(layout);
    [flat[1], flat[0], flat[2]]
}

/// A slot list's layout in i32 elements: `(token, slot) : (row_stride, 1)` over
/// `[rows, width]`.
pub fn slot_list_layout<D: DynInt>(rows: Int<D>, width: Int<D>, row_stride: Int<D>) -> Layout<D> {
    Layout::new(
        IntTuple::tuple([rows.into(), width.into()]),
        IntTuple::tuple([row_stride.into(), 1i64.into()]),
    )
    .expect("shape and stride of one profile")
}

/// A kernel's slot-list parameter (`[s_q, width]` i32, row stride `stride[0]`) through
/// [`slot_list_layout`].
#[track_caller]
pub fn slot_list_view(idx: &Tensor<i32, 2>) -> tensor::Tensor<i32, Global> {
    idx.view_as(slot_list_layout(
        Int::Dynamic(idx.extent(0)),
        Int::Dynamic(idx.extent(1)),
        Int::Dynamic(idx.stride(0)),
    ))
}

/// A kernel's cache parameter (`[num_blocks, page, record]` bytes, block stride
/// `stride[0]`) through [`layout`], for the key's `page` and `record` bytes.
#[track_caller]
pub fn device_view(cache: &Tensor<u8, 3>, page: u32, record: u32) -> tensor::Tensor<u8, Global> {
    cache.view_as(layout(
        Int::Dynamic(cache.extent(0)),
        i64::from(page),
        i64::from(record),
        Int::Dynamic(cache.stride(0)),
    ))
}

/// One paged cache of V4.1 records. Slot id `s` (`block * page + offset`) lives at byte
/// `(s >> log2(page)) * block_stride + (s & (page - 1)) * record` of `bytes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PagedCache {
    /// Record format of every slot.
    pub format: ExtraRecord,
    /// Blocks (pages) in the cache.
    pub num_blocks: usize,
    /// Slots per block, a power of two.
    pub page: usize,
    /// Bytes from one block to the next (the tensor's `stride[0]`), at least `page * record`.
    pub block_stride: usize,
    /// `num_blocks * block_stride` bytes.
    pub bytes: Vec<u8>,
}

impl PagedCache {
    /// A cache filled with `fill` bytes (padding between blocks included).
    pub fn new(
        format: ExtraRecord,
        num_blocks: usize,
        page: usize,
        block_stride: usize,
        fill: u8,
    ) -> Result<Self, ProblemError> {
        let cache = PagedCache {
            format,
            num_blocks,
            page,
            block_stride,
            bytes: vec![fill; num_blocks * block_stride],
        };
        cache.validate("cache")?;
        Ok(cache)
    }

    /// Checks the geometry; `name` says which cache in the message.
    pub fn validate(&self, name: &'static str) -> Result<(), ProblemError> {
        let fail = |problem: String| {
            Err(ProblemError::Shape {
                tensor: name,
                problem,
            })
        };
        if !self.page.is_power_of_two() {
            return fail(format!("page {} is not a power of two", self.page));
        }
        let packed = self.page * self.format.bytes();
        if self.block_stride < packed {
            return fail(format!(
                "block stride {} is below page * record = {packed} bytes: blocks would overlap",
                self.block_stride
            ));
        }
        if self.bytes.len() != self.num_blocks * self.block_stride {
            return fail(format!(
                "holds {} bytes, expected num_blocks * block_stride = {} * {}",
                self.bytes.len(),
                self.num_blocks,
                self.block_stride
            ));
        }
        Ok(())
    }

    /// The cache's [`layout`].
    pub fn layout(&self) -> Layout {
        let int = |v: usize| Int::<StaticOnly>::Static(v as i64);
        let (page, record) = (self.page as i64, self.record_bytes() as i64);
        layout(int(self.num_blocks), page, record, int(self.block_stride))
    }

    /// Bytes of one record.
    pub fn record_bytes(&self) -> usize {
        self.format.bytes()
    }

    /// Addressable slots, `num_blocks * page`.
    pub fn slots(&self) -> usize {
        self.num_blocks * self.page
    }

    /// The slot a slot id names, or `None` for ids the kernel must not read (negative, or at
    /// or past `num_blocks * page`).
    pub fn slot(&self, id: i32) -> Option<usize> {
        usize::try_from(id).ok().filter(|&s| s < self.slots())
    }

    /// Byte offset of a slot's record.
    pub fn record_offset(&self, slot: usize) -> usize {
        assert!(
            slot < self.slots(),
            "slot {slot} past the cache's {} slots",
            self.slots()
        );
        self.layout()
            .offset_at(&[slot as i64, 0])
            .expect("a coordinate of the layout's rank") as usize
    }

    /// A slot's record bytes.
    pub fn record(&self, slot: usize) -> &[u8] {
        let start = self.record_offset(slot);
        &self.bytes[start..start + self.record_bytes()]
    }

    /// A slot's record bytes, writable.
    pub fn record_mut(&mut self, slot: usize) -> &mut [u8] {
        let start = self.record_offset(slot);
        let len = self.record_bytes();
        &mut self.bytes[start..start + len]
    }

    /// Encodes `row` into a slot, like a cache writer ([`record::encode`]).
    pub fn write_row(&mut self, slot: usize, row: &[f32; HEAD_DIM]) {
        let format = self.format;
        record::encode(format, row, self.record_mut(slot));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_addresses_follow_the_block_stride() {
        let cache = PagedCache::new(ExtraRecord::Nvfp4, 3, 4, 4 * 288 + 100, 0).unwrap();
        assert_eq!(cache.slots(), 12);
        assert_eq!(cache.record_offset(0), 0);
        assert_eq!(cache.record_offset(3), 3 * 288);
        assert_eq!(cache.record_offset(4), 1252);
        assert_eq!(cache.record_offset(11), 2 * 1252 + 3 * 288);
        assert_eq!(cache.record(11).len(), 288);
    }

    #[test]
    fn the_rank_3_description_has_the_layouts_strides() {
        let cache = PagedCache::new(ExtraRecord::Nvfp4, 3, 4, 4 * 288 + 32, 0).unwrap();
        assert_eq!(described_strides(&cache.layout()), [4 * 288 + 32, 288, 1]);
    }

    #[test]
    fn ids_outside_the_cache_name_no_slot() {
        let cache = PagedCache::new(ExtraRecord::Fp8, 2, 64, 64 * 528, 0).unwrap();
        assert_eq!(cache.slot(0), Some(0));
        assert_eq!(cache.slot(127), Some(127));
        assert_eq!(cache.slot(128), None);
        assert_eq!(cache.slot(-1), None);
        assert_eq!(cache.slot(i32::MIN), None);
        assert_eq!(cache.slot(i32::MAX), None);
    }

    #[test]
    fn rows_land_in_their_slot_only() {
        let mut cache = PagedCache::new(ExtraRecord::Fp8, 2, 2, 2 * 528 + 16, 0xAB).unwrap();
        let row = [1.5f32; HEAD_DIM];
        cache.write_row(2, &row);
        assert_eq!(record::decode(ExtraRecord::Fp8, cache.record(2)), row);
        assert!(cache.record(1).iter().all(|&b| b == 0xAB));
        assert!(cache.record(3).iter().all(|&b| b == 0xAB));
        assert!(
            cache.bytes[2 * 528..2 * 528 + 16]
                .iter()
                .all(|&b| b == 0xAB)
        );
    }

    #[test]
    fn bad_geometry_is_an_error_that_says_why() {
        let err = PagedCache::new(ExtraRecord::Fp8, 2, 64, 64 * 528 - 1, 0).unwrap_err();
        assert!(err.to_string().contains("blocks would overlap"), "{err}");
        let err = PagedCache::new(ExtraRecord::Fp8, 2, 48, 48 * 528, 0).unwrap_err();
        assert!(err.to_string().contains("power of two"), "{err}");
    }
}
