//! The analytical estimates that rank the candidates: per operator and partition, the figures of
//! its busiest tile (compute, exchange, memory by region, resident bytes).
//!
//! Contract: every estimate uses the target's closed-form costs (`Target::amp_cycles`,
//! `Target::epilogue_cycles` and the vector estimates), the same the device's timing is checked
//! against by `calibrate`; `homes` is the share of every weight's home pieces a tile may hold.

use crate::ir::{
    AssembleOp, Attention, AttentionPartition, AttentionShape, CODE_RESERVE_BYTES, Graph, Grid,
    LayerNorm, Mapping, MatMul, OperatorEstimate, Resident, VectorOp,
};
use crate::isa::Spread;
use crate::target::Target;

/// The largest buffer the standard region holds beside the code.
fn standard_capacity(target: &Target) -> u64 {
    u64::from(target.interleaved_base - target.memory_base).saturating_sub(CODE_RESERVE_BYTES)
}

/// The busiest tile's figures for a layer norm on row blocks: its rows (or their column block),
/// gamma and beta gathered, then the vector unit over them; split into column blocks, each block's
/// moments, then every other block's moments of its rows gathered and the block normalized.
pub(super) fn layer_norm_estimate(
    op: &LayerNorm,
    p: &Grid,
    target: &Target,
    homes: u64,
) -> OperatorEstimate {
    let (rows, cols) = (u64::from(p.block_rows), u64::from(p.block_depth));
    let blocks = u64::from(p.depth_blocks);
    let row_bytes = cols.next_multiple_of(4) * 2;
    let moments_bytes = if blocks > 1 {
        rows * (2 * blocks * 4).next_multiple_of(8)
    } else {
        0
    };
    let receive_bytes = rows * cols * 2 + 2 * cols * 2;
    let (switch, transit) = (
        u64::from(target.mux_switch_cycles),
        u64::from(target.exchange_transit_cycles),
    );
    // The rows arrive from the producer's blocks across the row (at most one per column block of a
    // matmul's grid, taken as the AMP width's share of the row), gamma and beta from their homes.
    let pieces = cols
        .div_ceil(u64::from(target.amp_block_width))
        .min(rows * cols)
        + 2;
    let mut exchange = target.exchange_words(receive_bytes) + pieces * switch + transit;
    // The other blocks' moments, a piece from each of their tiles.
    let moments_in = blocks.saturating_sub(1) * rows * 8;
    let (compute, steps) = if blocks > 1 {
        exchange += target.exchange_words(moments_in) + (blocks - 1) * switch + transit;
        let (r, c, b) = (p.block_rows, p.block_depth, p.depth_blocks);
        let compute =
            target.layer_norm_moments_cycles(r, c) + target.layer_norm_apply_cycles(r, c, b);
        (compute, 4)
    } else {
        (target.layer_norm_cycles(p.block_rows, op.cols), 2)
    };
    OperatorEstimate {
        compute_cycles: compute,
        vector_cycles: compute,
        exchange_cycles: exchange,
        receive_bytes: receive_bytes + moments_in,
        panel_bytes: rows * row_bytes,
        other_bytes: rows * row_bytes + 2 * row_bytes + moments_bytes + homes,
        interleaved_bytes: 0,
        resident: Resident::default(),
        cycles: compute + exchange + target.sync_estimate(steps),
    }
}

/// The busiest tile's figures for a general vector operator on row blocks: each operand's block
/// gathered (a whole operand's rows from up to a piece per AMP-wide column block of its producer, a
/// spread one's row, column or value from its holder), then the vector unit over the rows.
pub(super) fn vector_estimate(
    op: &VectorOp,
    p: &Grid,
    target: &Target,
    homes: u64,
) -> OperatorEstimate {
    let rows = u64::from(p.block_rows);
    let stored = |r: u64, c: u64| r * c.next_multiple_of(4) * 2;
    let (switch, transit) = (
        u64::from(target.mux_switch_cycles),
        u64::from(target.exchange_transit_cycles),
    );
    let (mut receive_bytes, mut pieces, mut panel_bytes, mut other_bytes) = (0, 0, 0, 0);
    let first = op.operands.first().map(|&(v, _)| v);
    for &(v, spread) in &op.operands {
        let (r, c) = spread.extent(p.block_rows, op.cols);
        let (r, c) = (u64::from(r), u64::from(c));
        receive_bytes += r * c * 2;
        pieces += if spread == Spread::Whole {
            c.div_ceil(u64::from(target.amp_block_width)).min(r * c)
        } else {
            1
        };
        if Some(v) == first && spread == Spread::Whole {
            panel_bytes = stored(r, c);
        } else {
            other_bytes += stored(r, c);
        }
    }
    let exchange = target.exchange_words(receive_bytes) + pieces * switch + transit;
    let compute = target.vector_op_cycles(op.function, p.block_rows, op.cols, &op.spreads());
    OperatorEstimate {
        compute_cycles: compute,
        vector_cycles: compute,
        exchange_cycles: exchange,
        receive_bytes,
        panel_bytes,
        other_bytes: other_bytes + stored(rows, u64::from(op.out_cols())) + homes,
        interleaved_bytes: 0,
        resident: Resident::default(),
        cycles: compute + exchange + target.sync_estimate(2),
    }
}

/// The busiest tile's figures for a data movement on row blocks, of its first, middle and last
/// blocks (`AssembleOp::block`: the rectangles each gathers, the pieces it copies): the rectangles
/// gathered (each from up to a piece per AMP-wide column block of its producer), then the copies.
pub(super) fn assemble_estimate(
    graph: &Graph,
    op: &AssembleOp,
    p: &Grid,
    target: &Target,
    homes: u64,
) -> OperatorEstimate {
    let stored = |r: u64, c: u64| r * c.next_multiple_of(4) * 2;
    let (switch, transit) = (
        u64::from(target.mux_switch_cycles),
        u64::from(target.exchange_transit_cycles),
    );
    let mut busiest: Option<OperatorEstimate> = None;
    let mut blocks = vec![0, p.row_blocks / 2, p.row_blocks.saturating_sub(1)];
    blocks.dedup();
    for rb in blocks {
        let (r0, r1) = (rb * p.block_rows, ((rb + 1) * p.block_rows).min(op.rows));
        if r0 >= r1 {
            continue;
        }
        let block = op.block(graph, r0, r1);
        let (mut receive_bytes, mut pieces, mut panel_bytes) = (0, 0, 0);
        for (_, rect) in &block.gathers {
            let (r, c) = (u64::from(rect.rows()), u64::from(rect.cols()));
            receive_bytes += r * c * 2;
            pieces += c.div_ceil(u64::from(target.amp_block_width)).min(r * c);
            panel_bytes += stored(r, c);
        }
        let exchange = target.exchange_words(receive_bytes) + pieces * switch + transit;
        let compute = target.assemble_cycles(&block.pieces);
        let estimate = OperatorEstimate {
            compute_cycles: compute,
            vector_cycles: compute,
            exchange_cycles: exchange,
            receive_bytes,
            panel_bytes,
            other_bytes: stored(u64::from(r1 - r0), u64::from(op.cols)) + homes,
            interleaved_bytes: 0,
            resident: Resident::default(),
            cycles: compute + exchange + target.sync_estimate(2),
        };
        if busiest
            .as_ref()
            .is_none_or(|b| (estimate.cycles, estimate.total_bytes()) > (b.cycles, b.total_bytes()))
        {
            busiest = Some(estimate);
        }
    }
    busiest.unwrap_or(OperatorEstimate {
        compute_cycles: 0,
        vector_cycles: 0,
        exchange_cycles: 0,
        receive_bytes: 0,
        panel_bytes: 0,
        other_bytes: homes,
        interleaved_bytes: 0,
        resident: Resident::default(),
        cycles: target.sync_estimate(2),
    })
}

/// The busiest tile's figures for a matmul on a grid, its output stored in the other order than its
/// partials when `transpose`: the AMP over its block (the AMP's rows and columns swapped in the
/// transposed form) and the epilogue over its share of the AMP's rows; the gathers: the activation
/// panel at two words a cycle when column blocks share it (the shared-panels mapping puts them on
/// supertile pairs), the weight panel and the bias at one word a cycle unless resident; the
/// reduction of the partials' shares; and memory by region, a resident weight panel as what the
/// tile keeps for the whole program.
pub(super) fn grid_estimate(
    op: &MatMul,
    p: &Grid,
    target: &Target,
    homes: u64,
    transpose: bool,
) -> OperatorEstimate {
    let t = p.transposed;
    let (m_rows, n_cols) = (u64::from(p.block_rows), u64::from(p.block_cols));
    let depth = u64::from(p.block_depth);
    let padded = depth.next_multiple_of(u64::from(target.amp_block_depth));
    let (amp_rows, amp_cols) = if t {
        (n_cols, m_rows)
    } else {
        (m_rows, n_cols)
    };
    let element = u64::from(target.memory_element_bytes);
    let partials_bytes = u64::from(op.partials.bytes());
    // Stored sizes: rows of 8-byte multiples, 16 for interleaved buffers.
    let stored = |rows: u64, cols: u64, bytes: u64, interleaved: bool| {
        rows * (cols * bytes).next_multiple_of(if interleaved { 16 } else { 8 })
    };
    let activation = if t {
        stored(depth, m_rows, 2, true)
    } else {
        stored(m_rows, padded, 2, false)
    };
    let weights = if t {
        stored(n_cols, depth, 2, false)
    } else {
        stored(depth, n_cols, 2, true)
    };
    let partials = stored(amp_rows, amp_cols, partials_bytes, true).next_multiple_of(element);
    // With a split depth, each tile of an output block sums a share of the AMP's rows.
    let share = amp_rows.div_ceil(u64::from(p.depth_blocks));
    let epilogue = op.has_epilogue(p.depth_blocks, transpose);
    let epilogue_rows = if p.depth_blocks > 1 { share } else { amp_rows };
    let out = if epilogue {
        epilogue_rows * amp_cols * 2
    } else {
        0
    };
    let vector = if epilogue {
        op.epilogue_cycles(target, epilogue_rows as u32, amp_cols as u32, p, transpose)
    } else {
        0
    };
    let compute =
        target.amp_cycles(amp_rows as u32, padded as u32, amp_cols as u32, op.partials) + vector;
    let activation_bytes = m_rows * depth * 2;
    let gathered = if p.resident {
        0
    } else {
        depth * n_cols * 2 + if op.has_bias() { n_cols * 2 } else { 0 }
    };
    // Under the shared-panels mapping a (row block, depth block)'s column blocks are adjacent
    // tiles: with an even count every supertile pair lies inside one and shares its panel; with an
    // odd count one pair of two such groups straddles them and takes two panels narrow (a single
    // group's last tile has an idle mate).
    let groups = p.row_blocks * p.depth_blocks;
    let shared = p.col_blocks > 1 && (p.col_blocks.is_multiple_of(2) || groups == 1);
    let activation_cycles =
        target
            .exchange_words(activation_bytes)
            .div_ceil(if shared { 2 } else { 1 });
    // Pieces: the activation panel arrives from the pieces of its rows (input homes or the
    // producer's blocks), a gathered weight panel from the weight's homes down its depth block.
    let pieces = u64::from(p.col_blocks + if p.resident { 0 } else { p.row_blocks });
    let (switch, transit) = (
        u64::from(target.mux_switch_cycles),
        u64::from(target.exchange_transit_cycles),
    );
    let mut exchange =
        activation_cycles + target.exchange_words(gathered) + pieces * switch + transit;
    // With a split depth, each tile receives a share of the others' partials.
    let split = p.depth_blocks > 1;
    let copies = u64::from(p.depth_blocks - 1);
    // Sent exactly, stored in rows of 8 bytes.
    let shares = copies * share * amp_cols * partials_bytes;
    let share_bytes = stored(share, amp_cols, partials_bytes, false);
    if split {
        exchange += target.exchange_words(shares) + copies * switch + transit;
    }
    let steps = if split { 4 } else { 2 };
    let standard = standard_capacity(target);
    let bias = if op.has_bias() {
        stored(1, n_cols, 2, false)
    } else {
        0
    };
    let mut resident = Resident::default();
    // The one large buffer in either region (the activation panel in the normal form, a gathered
    // weight panel in the transposed form) and the interleaved-only panels, live from the gather
    // to the compute step.
    let (mut panel_bytes, mut panels_interleaved) = (0, 0);
    match (t, p.resident) {
        // The weights are the AMP's stationary operand: interleaved.
        (false, true) => resident.interleaved += weights,
        (false, false) => panels_interleaved += weights,
        // The weights are the AMP's rows: one buffer in either region, if one holds it.
        (true, true) if weights > standard => resident.interleaved += weights,
        (true, true) => resident.either += weights,
        (true, false) => panel_bytes = weights,
    }
    if t {
        panels_interleaved += activation;
    } else {
        panel_bytes = activation;
    }
    let residual = op.residual.map_or(0, |_| epilogue_rows * amp_cols * 2);
    let bias_gathered = if p.resident {
        resident.either += bias;
        0
    } else {
        bias
    };
    // Live besides the panels, superstep by superstep: at the gather, the holder the activation
    // panel comes from (an input home or the producer's output, taken as large as the panel); at the
    // compute step the output when the depth is not split; at the reduction the others' partials and
    // the output. The bias and the residual live throughout. A buffer the standard region cannot
    // hold whole counts as interleaved.
    let place = |bytes: u64| {
        if bytes > standard {
            [bytes, 0]
        } else {
            [0, bytes]
        }
    };
    let sum = |buffers: &[u64]| {
        buffers
            .iter()
            .map(|&b| place(b))
            .fold([0, 0], |a, b| [a[0] + b[0], a[1] + b[1]])
    };
    let mut at_gather = sum(&[activation, bias_gathered, residual]);
    let mut at_compute = sum(&[if split { 0 } else { out }, bias_gathered, residual]);
    let mut at_reduce = sum(&[out, bias_gathered, residual]);
    // The others' shares of the partials at the reduction, where they fit.
    let [a, b] = place(share_bytes);
    (at_reduce[0], at_reduce[1]) = (at_reduce[0] + copies * a, at_reduce[1] + copies * b);
    // The interleaved-only panels from the gather to the compute step, the partials from the
    // compute step on.
    at_gather[0] += panels_interleaved;
    at_compute[0] += panels_interleaved + partials;
    at_reduce[0] += partials;
    let steps_live = if split {
        vec![at_gather, at_compute, at_reduce]
    } else {
        vec![at_gather, at_compute]
    };
    let interleaved_bytes = steps_live.iter().map(|l| l[0]).max().unwrap_or(0);
    let either = steps_live.iter().map(|l| l[1]).max().unwrap_or(0) + homes;
    OperatorEstimate {
        compute_cycles: compute,
        vector_cycles: vector,
        exchange_cycles: exchange,
        receive_bytes: (activation_bytes + gathered).max(shares),
        panel_bytes,
        other_bytes: either,
        interleaved_bytes,
        resident,
        cycles: compute + exchange + target.sync_estimate(steps),
    }
}

/// The busiest tile's figures for an attention partition: a tile with a whole query block and a whole key
/// block (nothing masked), which also merges its share of the queries from the other key blocks' states.
pub(super) fn attention_estimate(
    a: &Attention,
    p: &AttentionPartition,
    target: &Target,
) -> OperatorEstimate {
    let (s, pt) = (a.shape, a.partials);
    let (bq, bk, d, sub) = (p.block_queries, p.block_keys, s.head_dim, p.sub_block);
    // One step of the online softmax over `keys` keys: (AMP cycles, vector cycles). The first
    // step's float partials are the accumulator, with nothing to accumulate.
    let accumulated = |first: bool| !(first && a.partials_are_accumulator());
    let step = |keys: u32, first: bool| {
        (
            target.amp_cycles(keys, d, bq, pt) + target.amp_cycles(d, keys, bq, pt),
            target.softmax_cycles(keys, bq, pt, s.causal, a.mask.is_some(), first)
                + if accumulated(first) {
                    target.accumulate_cycles(d, bq, first, pt)
                } else {
                    0
                },
        )
    };
    let (full, rest) = (bk / sub, bk % sub);
    let steps_taken = if full == 0 {
        vec![(step(rest, true), 1)]
    } else {
        vec![
            (step(sub, true), 1),
            (step(sub, false), u64::from(full - 1)),
            (if rest > 0 { step(rest, false) } else { (0, 0) }, 1),
        ]
    };
    let amp: u64 = steps_taken.iter().map(|((a, _), n)| a * n).sum();
    let mut vector: u64 = steps_taken.iter().map(|((_, v), n)| v * n).sum();
    // Each of a query block's tiles merges its share of the queries from the states of the key
    // blocks it sees: (states, share) of each count of states a query block has (under a causal mask
    // the first query blocks see fewer key blocks than the last, and merge larger shares).
    let merges: Vec<(u32, u32)> = (0..p.query_blocks)
        .map(|q| p.visible_blocks(&s, q))
        .collect::<std::collections::BTreeSet<u32>>()
        .into_iter()
        .map(|v| (v, bq.div_ceil(v).next_multiple_of(2)))
        .collect();
    vector += (merges.iter())
        .map(|&(v, share)| target.combine_cycles(v, d, share, !a.transposed_out))
        .max()
        .unwrap_or(0);
    let compute = amp + vector;
    let (switch, transit) = (
        u64::from(target.mux_switch_cycles),
        u64::from(target.exchange_transit_cycles),
    );
    // Stored rows as `select_finalist` lays them out: f16 rows of a multiple of 4 elements (8 bytes),
    // 8 for the AMP's weights (16 bytes), f32 rows of a multiple of 2 (4 for what the AMP writes).
    let (bq, bk, d, sub) = (u64::from(bq), u64::from(bk), u64::from(d), u64::from(sub));
    let keys_panel = bk * d.next_multiple_of(4) * 2;
    let values_panel = d * bk.next_multiple_of(4) * 2;
    // The queries from their home, keys and values from a home piece on each tile of the key block's
    // column: the fewest tiles of any column hold the largest pieces.
    // Keys and values go to every tile of the key block's column, at two words a cycle over a
    // supertile pair's bus (`busiest_pair_keys`).
    let receive_bytes = d * bq * 2 + 2 * bk * d * 2;
    let pair_keys = u64::from(busiest_pair_keys(p, &s));
    let mut exchange = target.exchange_words(d * bq * 2)
        + target.exchange_words(2 * pair_keys * d * 2).div_ceil(2)
        + (1 + 2 * u64::from(p.query_blocks)) * switch
        + transit;
    // Per count of states: the other states' shares a tile receives, and its output.
    let received = |&(v, share): &(u32, u32)| u64::from(v - 1) * (d + 2) * u64::from(share) * 4;
    let merged = merges.iter().map(received).max().unwrap_or(0);
    let share = merges
        .iter()
        .map(|&(_, sh)| u64::from(sh))
        .max()
        .unwrap_or(0);
    let split = p.key_blocks > 1;
    if split {
        exchange += (merges.iter())
            .map(|m| target.exchange_words(received(m)) + u64::from(m.0 - 1) * switch)
            .max()
            .unwrap_or(0)
            + transit;
    }
    let steps = if split { 4 } else { 2 };
    let element = u64::from(target.memory_element_bytes);
    // The tile's flash state; with float partials, whose first sub-block the AMP writes into it,
    // stored as its partials are: 16-byte rows in whole memory elements of interleaved memory.
    let (state, interleaved_state) = if a.partials_are_accumulator() {
        (
            0,
            ((d + 2) * bq.next_multiple_of(4) * 4).next_multiple_of(element),
        )
    } else {
        ((d + 2) * bq.next_multiple_of(2) * 4, 0)
    };
    let scores = |rows: u64| {
        (rows * bq.next_multiple_of(8) * u64::from(pt.bytes())).next_multiple_of(element)
    };
    let chunk = bk.div_ceil(u64::from(p.smallest_column(&s)));
    let homes = d * bq.next_multiple_of(4) * 2
        + chunk * d.next_multiple_of(4) * 2
        + d * chunk.next_multiple_of(4) * 2;
    let output = d * share.next_multiple_of(4) * 2;
    // The smaller of the keys and values panels goes where it fits: interleaved memory when the
    // standard region cannot hold it whole.
    let second = keys_panel.min(values_panel);
    let second_interleaved = second > standard_capacity(target);
    OperatorEstimate {
        compute_cycles: compute,
        vector_cycles: vector,
        exchange_cycles: exchange,
        receive_bytes: receive_bytes.max(merged),
        panel_bytes: keys_panel.max(values_panel),
        other_bytes: if second_interleaved { 0 } else { second }
            + state
            + merged
            + output
            + homes
            + bq * 4,
        interleaved_bytes: d * bq.next_multiple_of(8) * 2
            + sub * bq.next_multiple_of(8) * 2
            + scores(sub)
            // The weighted values: none for a tile of one sub-block the AMP writes into the state.
            + if !a.partials_are_accumulator() || bk > sub {
                scores(d)
            } else {
                0
            }
            + interleaved_state
            + if second_interleaved { second } else { 0 },
        resident: Resident::default(),
        cycles: compute + exchange + target.sync_estimate(steps),
    }
}

/// The most keys (each with its values) any supertile pair of an attention's tiles receives under the
/// column-major mapping: a pair inside one column takes its tiles' keys once for both, the larger
/// tile's; a pair that straddles two columns, or two groups when a group's tile count is odd, takes
/// each tile's own; a tile beside an idle one takes its own.
fn busiest_pair_keys(p: &AttentionPartition, s: &AttentionShape) -> u32 {
    let mut group: Vec<Option<(u32, u32)>> = vec![None; p.tiles_per_group as usize];
    for (q, row) in Mapping::ColumnMajor
        .attention_cells(p, s)
        .iter()
        .enumerate()
    {
        for (k, &tile) in row.iter().enumerate() {
            let (q, k) = (q as u32, k as u32);
            group[tile as usize] = Some((k, p.cell_keys(s, q, k)));
        }
    }
    // Two groups side by side hold every kind of pair the groups make: (group, key block, keys).
    let tiles: Vec<Option<(u32, u32, u32)>> = (0..p.groups.min(2))
        .flat_map(|g| group.iter().map(move |t| t.map(|(k, keys)| (g, k, keys))))
        .collect();
    tiles
        .chunks(2)
        .map(|pair| match pair {
            [Some((ga, ka, a)), Some((gb, kb, b))] if (ga, ka) == (gb, kb) => *a.max(b),
            [Some((_, _, a)), Some((_, _, b))] => a + b,
            [Some((_, _, a)), ..] | [_, Some((_, _, a))] => *a,
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::{busiest_pair_keys, grid_estimate};
    use crate::elements::DType;
    use crate::ids::{OpId, ValueId};
    use crate::ir::{AttentionPartition, AttentionShape, Grid, MatMul, MatMulPart};
    use crate::target::Target;

    /// A 96x256x192 matmul in the transposed form: six blocks of 16 tokens, `col_blocks` blocks of
    /// the output's columns, the whole depth; the weights resident.
    fn matmul_on(col_blocks: u32) -> (MatMul, Grid) {
        let v = ValueId::from_index;
        let op = MatMul {
            id: OpId(0),
            name: "fc".into(),
            a: v(0),
            parts: vec![MatMulPart {
                b: v(1),
                bias: None,
                out: v(2),
                start: 0,
                cols: 192,
            }],
            activation: None,
            residual: None,
            m: 96,
            k: 256,
            n: 192,
            partials: DType::F16,
            covers: Vec::new(),
        };
        let grid = Grid {
            row_blocks: 6,
            block_rows: 16,
            col_blocks,
            block_cols: 192 / col_blocks,
            depth_blocks: 1,
            block_depth: 256,
            transposed: true,
            resident: true,
        };
        (op, grid)
    }

    /// Column blocks share their activation panel over supertile pairs only when their count is
    /// even: with an odd count a pair straddles two groups and takes two panels at a word a cycle.
    #[test]
    fn an_odd_count_of_column_blocks_gathers_its_panel_narrow() {
        let t = Target::preset("mk2-1500").unwrap();
        let exchange = |col_blocks| {
            let (op, grid) = matmul_on(col_blocks);
            grid_estimate(&op, &grid, &t, 0, false).exchange_cycles
        };
        // A panel of 16 tokens by 256 depth: 2,048 words, 1,024 cycles shared by a pair; three
        // column blocks gather from one fewer piece, a mux switch less.
        let (even, odd) = (exchange(4), exchange(3));
        let switch = u64::from(t.mux_switch_cycles);
        assert_eq!(odd - even, 1024 - switch, "3 blocks {odd}, 4 blocks {even}");
    }

    fn partition(query_blocks: u32, key_blocks: u32, paired_columns: bool) -> AttentionPartition {
        let s = shape();
        let mut p = AttentionPartition {
            groups: 2,
            query_blocks,
            block_queries: s.queries / query_blocks,
            key_blocks,
            block_keys: s.keys / key_blocks,
            sub_block: s.keys / key_blocks,
            paired_columns,
            tiles_per_group: 0,
        };
        p.tiles_per_group = p.group_tiles(&s);
        p
    }

    fn shape() -> AttentionShape {
        AttentionShape {
            batch: 1,
            heads: 2,
            queries: 90,
            keys: 75,
            head_dim: 8,
            causal: false,
        }
    }

    /// A pair inside a column or beside an idle tile takes one key block; a pair straddling two
    /// columns, or two groups, takes two.
    #[test]
    fn a_pair_that_straddles_columns_or_groups_takes_both_tiles_keys() {
        let s = shape();
        assert_eq!(busiest_pair_keys(&partition(5, 3, true), &s), 25);
        assert_eq!(busiest_pair_keys(&partition(5, 3, false), &s), 50);
        assert_eq!(busiest_pair_keys(&partition(15, 1, true), &s), 75);
        assert_eq!(busiest_pair_keys(&partition(15, 1, false), &s), 150);
        assert_eq!(busiest_pair_keys(&partition(6, 3, false), &s), 25);
    }
}
