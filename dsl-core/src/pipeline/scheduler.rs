//! A persistent tile scheduler: a grid of (about) one CTA per SM walks the output tiles in
//! a static round-robin, so one CTA's epilogue overlaps the next tile's loads and the
//! launch costs one wave.

use crate::arch::thread::{block_idx_x, grid_dim_x};
use crate::trace::{Pred, Val};

/// Tiles `0..tiles_m * tiles_n` of an output, visited by CTA `c` as `c, c + grid, ...`.
/// Tile `t` is `(m, n)` with `m` fastest inside bands of `group_m` rows of tiles, so the
/// CTAs running at once share the same few B tiles and a band of A tiles in L2.
#[derive(Clone, Copy, Debug)]
pub struct TileScheduler {
    tiles_m: Val<u32>,
    tiles_n: Val<u32>,
    total: Val<u32>,
    group_m: u32,
}

/// The output tile a CTA works on.
#[derive(Clone, Copy, Debug)]
pub struct Tile {
    /// Row of tiles.
    pub m: Val<u32>,
    /// Column of tiles.
    pub n: Val<u32>,
}

impl TileScheduler {
    /// `tiles_m x tiles_n` tiles rastered in bands of `group_m` tile rows (1: column-major).
    #[track_caller]
    pub fn new(tiles_m: Val<u32>, tiles_n: Val<u32>, group_m: u32) -> Self {
        TileScheduler {
            tiles_m,
            tiles_n,
            total: tiles_m * tiles_n,
            group_m: group_m.max(1),
        }
    }

    /// Tiles in all, computed once where the scheduler is made (not in every loop test).
    pub fn total(&self) -> Val<u32> {
        self.total
    }

    /// This CTA's first tile index.
    #[track_caller]
    pub fn first(&self) -> Val<u32> {
        block_idx_x()
    }

    /// The tile index after `t` for this CTA.
    #[track_caller]
    pub fn next(&self, t: Val<u32>) -> Val<u32> {
        t + grid_dim_x()
    }

    /// Whether `t` is a tile (the loop condition).
    #[track_caller]
    pub fn is_valid(&self, t: Val<u32>) -> Pred {
        t.lt(self.total)
    }

    /// Tile index `t` as (row, column) of tiles.
    #[track_caller]
    pub fn tile(&self, t: Val<u32>) -> Tile {
        if self.group_m == 1 {
            return Tile {
                m: t % self.tiles_m,
                n: t / self.tiles_m,
            };
        }
        // A band is group_m rows of tiles (fewer in the last band) times all columns.
        let band_tiles = self.tiles_n * self.group_m;
        let band = t / band_tiles;
        let first_m = band * self.group_m;
        let rows = (self.tiles_m - first_m).min(self.group_m);
        let within = t - band * band_tiles;
        Tile {
            m: first_m + within % rows,
            n: within / rows,
        }
    }
}
