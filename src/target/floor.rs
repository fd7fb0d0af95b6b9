//! A floor under every plan of one matmul on this target: the least cycles over every grid of row,
//! depth and column blocks of its `m` x `k` times `k` x `n` product (a plan's partition), one block
//! a tile on at most `tiles` tiles, in either operand form (tokens or weight rows as the AMP's
//! rows), of the block's AMP vertex (`Target::amp_cycles`) and, when the depth is split over tiles,
//! the partials' reduction: every output element's partials but one cross the exchange, at most a
//! word a tile a cycle over the whole chip (a supertile pair's wide bus carries its two tiles'
//! words), and one more sync.
//! Everything else a plan does (gathering the operands, the reduction's additions, the epilogue,
//! the first sync) is left out, so no plan of the compiler costs less on the device.

use super::Target;
use crate::elements::DType;

/// The tiling a [`Target::matmul_floor`] found, and its cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulFloor {
    pub cycles: u64,
    /// The AMP's rows a block: tokens in the normal form, weight columns in the transposed.
    pub rows: u32,
    pub depth: u32,
    pub cols: u32,
    /// Tiles used: row blocks x depth blocks x column blocks.
    pub tiles: u32,
    pub transposed: bool,
}

impl Target {
    /// The floor of an `m` x `k` times `k` x `n` matmul over `tiles` tiles, with `partials` the
    /// type its depth partials are summed in (module docs).
    pub fn matmul_floor(&self, m: u32, k: u32, n: u32, partials: DType, tiles: u32) -> MatmulFloor {
        let normal = self.floor_in_form(m, k, n, partials, tiles, false);
        let transposed = self.floor_in_form(n, k, m, partials, tiles, true);
        if transposed.cycles < normal.cycles {
            transposed
        } else {
            normal
        }
    }

    /// The floor with `rows` as the AMP's rows. Cycles rise with each of a block's rows, depth and
    /// columns, and only whole AMP blocks count in depth and columns: so for each count of depth and
    /// column blocks a tile holds, the fewest depth and column blocks holding them, then as many row
    /// blocks as the tiles left allow.
    fn floor_in_form(
        &self,
        rows: u32,
        k: u32,
        cols: u32,
        partials: DType,
        tiles: u32,
        transposed: bool,
    ) -> MatmulFloor {
        let (bd, bw) = (self.amp_block_depth.max(1), self.amp_block_width.max(1));
        let mut best = MatmulFloor {
            cycles: u64::MAX,
            rows,
            depth: k,
            cols,
            tiles: 1,
            transposed,
        };
        for depth_groups in 1..=k.div_ceil(bd).max(1) {
            let depth_blocks = k.div_ceil(bd.saturating_mul(depth_groups)).max(1);
            let depth = k.div_ceil(depth_blocks);
            for col_groups in 1..=cols.div_ceil(bw).max(1) {
                let col_blocks = cols.div_ceil(bw.saturating_mul(col_groups)).max(1);
                let width = cols.div_ceil(col_blocks);
                let shared = u64::from(depth_blocks) * u64::from(col_blocks);
                let row_blocks = (u64::from(tiles) / shared).min(u64::from(rows.max(1))) as u32;
                if row_blocks == 0 {
                    continue;
                }
                let height = rows.div_ceil(row_blocks);
                let cycles = self.amp_cycles(height, depth, width, partials)
                    + self.reduction_floor(rows, cols, depth_blocks, partials, tiles);
                if cycles < best.cycles {
                    best = MatmulFloor {
                        cycles,
                        rows: height,
                        depth,
                        cols: width,
                        tiles: row_blocks * depth_blocks * col_blocks, // at most `tiles`
                        transposed,
                    };
                }
            }
        }
        best
    }

    /// The reduction's exchange and sync of a `rows` x `cols` output whose depth is split in
    /// `depth_blocks`: nothing when it is not split.
    fn reduction_floor(
        &self,
        rows: u32,
        cols: u32,
        depth_blocks: u32,
        partials: DType,
        tiles: u32,
    ) -> u64 {
        if depth_blocks <= 1 {
            return 0;
        }
        let bytes = u64::from(rows)
            * u64::from(cols)
            * u64::from(depth_blocks - 1)
            * u64::from(partials.bytes());
        let per_cycle = u64::from(self.exchange_bytes_per_cycle.max(1)) * u64::from(tiles.max(1));
        bytes.div_ceil(per_cycle) + self.sync_cycles
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every grid of row, depth and column blocks that fits, each block as large as its grid needs:
    /// the least found, with no pruning.
    fn every_grid(t: &Target, m: u32, k: u32, n: u32, p: DType, tiles: u32) -> u64 {
        let mut least = u64::MAX;
        for (rows, cols) in [(m, n), (n, m)] {
            for r in 1..=rows {
                for d in 1..=k {
                    for c in 1..=cols {
                        if r * d * c > tiles {
                            continue;
                        }
                        let amp =
                            t.amp_cycles(rows.div_ceil(r), k.div_ceil(d), cols.div_ceil(c), p);
                        least = least.min(amp + t.reduction_floor(rows, cols, d, p, tiles));
                    }
                }
            }
        }
        least
    }

    #[test]
    fn the_floor_is_the_least_over_every_grid_that_fits() {
        let t = Target::preset("mk2-1500").unwrap();
        for (m, k, n, tiles) in [
            (21, 40, 72, 30),
            (48, 96, 20, 64),
            (7, 130, 33, 17),
            (64, 64, 64, 1),
            (40, 200, 16, 100),
        ] {
            for p in [DType::F16, DType::F32] {
                let floor = t.matmul_floor(m, k, n, p, tiles);
                assert_eq!(
                    floor.cycles,
                    every_grid(&t, m, k, n, p, tiles),
                    "{m}x{k}x{n} on {tiles}"
                );
                assert!(floor.tiles <= tiles, "{floor:?}");
                let (rows, cols) = if floor.transposed { (n, m) } else { (m, n) };
                let depth_blocks = k.div_ceil(floor.depth);
                let amp = t.amp_cycles(floor.rows, floor.depth, floor.cols, p);
                let reduction = t.reduction_floor(rows, cols, depth_blocks, p, tiles);
                assert_eq!(floor.cycles, amp + reduction, "{floor:?}");
            }
        }
    }

    #[test]
    fn a_split_depth_pays_for_its_partials_crossing_the_exchange() {
        let t = Target::preset("mk2-1500").unwrap();
        assert_eq!(t.reduction_floor(128, 384, 1, DType::F32, 1472), 0);
        // 128 x 384 outputs, 7 partials each of 4 bytes cross, 4 bytes a cycle on each of 1472 tiles.
        let words = (128 * 384 * 7 * 4_u64).div_ceil(4 * 1472);
        assert_eq!(
            t.reduction_floor(128, 384, 8, DType::F32, 1472),
            words + t.sync_cycles
        );
    }
}
