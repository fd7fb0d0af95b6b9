//! The candidate partitions of each operator kind: every distinct one, in a fixed order.
//!
//! Contract: a matmul's grids tile its output and depth in either operand form, no column block
//! straddling two of its parts (`grid_partitions`),
//! a vector operator's and a data movement's their rows (`row_partitions`), a layer norm's its rows
//! whole or in equal column blocks (`layer_norm_partitions`), an attention's its queries and keys per
//! batch-and-head group (`attention_partitions`); none has an empty block or uses more than the
//! target's tiles.

use crate::ir::{Attention, AttentionPartition, Grid, MatMul};
use crate::target::Target;

/// Every distinct split of `rows` whole rows of `cols` into row blocks, one tile each: a [`Grid`]
/// with one column block and one depth block.
pub(super) fn row_partitions(rows: u32, cols: u32, target: &Target) -> Vec<Grid> {
    (1..=rows.min(target.tiles))
        .filter_map(|row_blocks| {
            let block_rows = rows.div_ceil(row_blocks);
            (rows.div_ceil(block_rows) == row_blocks).then_some(Grid {
                row_blocks,
                block_rows,
                col_blocks: 1,
                block_cols: cols,
                depth_blocks: 1,
                block_depth: cols,
                transposed: false,
                resident: false,
            })
        })
        .collect()
}

/// A layer norm's grids: every row partition, its rows whole or split into equal column blocks of
/// at least a vector of four (the statistics then reduced across the blocks' tiles), on at most the
/// target's tiles.
pub(super) fn layer_norm_partitions(rows: u32, cols: u32, target: &Target) -> Vec<Grid> {
    let lanes = u32::try_from(target.vector_f16_lanes.max(1)).unwrap_or(u32::MAX);
    row_partitions(rows, cols, target)
        .into_iter()
        .flat_map(|p| {
            (1..=cols / lanes)
                .filter(move |&d| {
                    cols.is_multiple_of(d)
                        && u64::from(p.row_blocks) * u64::from(d) <= u64::from(target.tiles)
                })
                .map(move |d| Grid {
                    depth_blocks: d,
                    block_depth: cols / d,
                    ..p
                })
        })
        .collect()
}

/// Every distinct grid in both operand forms: blocks of the AMP's stationary dimension (the output's
/// columns in the normal form, its rows in the transposed form) of a multiple of the AMP width, the
/// narrowest of each block count; every block count of the other output dimension; every split of
/// the depth into blocks of a multiple of the AMP block depth; and, when `b` is a weight, with the
/// weights resident or gathered. Column blocks straddling two parts are left out.
pub(super) fn grid_partitions(op: &MatMul, weights: bool, target: &Target) -> Vec<Grid> {
    let (width, depth, tiles) = (target.amp_block_width, target.amp_block_depth, target.tiles);
    let (m, k, n) = (op.m, op.k, op.n);
    let mut out = Vec::new();
    for transposed in [false, true] {
        // (stationary length, other length)
        let (stationary, other) = if transposed { (m, n) } else { (n, m) };
        for w in 1..=stationary.div_ceil(width) {
            let block_stationary = w * width;
            let stationary_blocks = stationary.div_ceil(block_stationary);
            // The narrowest width of each block count: wider ones only waste the AMP (but with
            // several parts along the stationary columns, a wider width may be the one tiling them).
            let parted = !transposed && op.parts.len() > 1;
            if stationary_blocks > tiles
                || (!parted && w > 1 && stationary.div_ceil((w - 1) * width) == stationary_blocks)
            {
                continue;
            }
            for other_blocks in 1..=(tiles / stationary_blocks).min(other) {
                let block_other = other.div_ceil(other_blocks);
                if other.div_ceil(block_other) != other_blocks {
                    continue;
                }
                let most = (tiles / (stationary_blocks * other_blocks)).min(k.div_ceil(depth));
                for depth_blocks in 1..=most {
                    let block_depth = if depth_blocks == 1 {
                        k
                    } else {
                        k.div_ceil(depth_blocks).next_multiple_of(depth)
                    };
                    if k.div_ceil(block_depth) != depth_blocks {
                        continue;
                    }
                    let ((row_blocks, block_rows), (col_blocks, block_cols)) = if transposed {
                        (
                            (stationary_blocks, block_stationary),
                            (other_blocks, block_other),
                        )
                    } else {
                        (
                            (other_blocks, block_other),
                            (stationary_blocks, block_stationary),
                        )
                    };
                    if !op.tiles_parts(block_cols) {
                        continue;
                    }
                    for resident in [false, true].into_iter().take(1 + usize::from(weights)) {
                        out.push(Grid {
                            row_blocks,
                            block_rows,
                            col_blocks,
                            block_cols,
                            depth_blocks,
                            block_depth,
                            transposed,
                            resident,
                        });
                    }
                }
            }
        }
    }
    out
}

/// Key sub-block lengths the online softmax may step by: multiples of the AMP block depth.
const SUB_BLOCKS: [u32; 4] = [32, 64, 128, 256];

/// Every distinct attention partition: query-block and key-block counts (over the keys some query
/// sees) whose visible cells fit the tiles of a group, with paired columns where those fit too, and
/// each sub-block length shorter than the key block, and the whole key block.
pub(super) fn attention_partitions(a: &Attention, target: &Target) -> Vec<AttentionPartition> {
    let (s, groups) = (a.shape, a.groups());
    if groups > target.tiles {
        return Vec::new();
    }
    let per_group = target.tiles / groups;
    let mut out = Vec::new();
    for query_blocks in 1..=per_group.min(s.queries) {
        let block_queries = s.queries.div_ceil(query_blocks);
        if s.queries.div_ceil(block_queries) != query_blocks {
            continue;
        }
        let seen = s.seen_keys();
        for key_blocks in 1..=seen {
            let block_keys = seen.div_ceil(key_blocks);
            if seen.div_ceil(block_keys) != key_blocks {
                continue;
            }
            let mut p = AttentionPartition {
                groups,
                query_blocks,
                block_queries,
                key_blocks,
                block_keys,
                sub_block: 0,
                paired_columns: true,
                tiles_per_group: 0,
            };
            // Columns are paired when the padded columns fit, and cells only grow with the
            // key-block count.
            p.tiles_per_group = p.group_tiles(&s);
            if p.tiles_per_group > per_group {
                p.paired_columns = false;
                p.tiles_per_group = p.group_tiles(&s);
                if p.tiles_per_group > per_group {
                    break;
                }
            }
            for sub_block in SUB_BLOCKS
                .into_iter()
                .filter(|&b| b < block_keys)
                .chain([block_keys])
            {
                out.push(AttentionPartition { sub_block, ..p });
            }
        }
    }
    out
}
