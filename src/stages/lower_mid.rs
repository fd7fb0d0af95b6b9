//! `lower_mid`: graph + target -> `mid`.
//!
//! Lowers the graph's device operations to tileable operators (a matmul with its bias, GELU and
//! residual add fused into the epilogue; an attention as a flash attention; a layer norm over row
//! blocks); the host's operations (`OpKind::on_host`) are left to the host. It enumerates candidate partitions of every operator over
//! the tiles, costs each analytically with the target model (compute, exchange, per-tile memory) and
//! keeps the best `finalists` whole-program plans. A matmul is partitioned into row blocks x column
//! blocks of its output (column blocks a multiple of the AMP block width) x depth blocks of its
//! reduction (a multiple of the AMP block depth); an attention into batch-and-head groups of query
//! blocks x key blocks, with the key sub-block its online softmax steps by.
//!
//! Invariants (checked by [`Mid::verify`], which `select_finalist` runs on its input too): every device
//! operation of the graph is covered by exactly one operator, no host operation by any; every partition covers its output and its reduction
//! (`row_blocks * block_rows >= m`, `col_blocks * block_cols >= n`, `depth_blocks * block_depth >= k`;
//! query and key blocks likewise) with no empty block and uses at most `target.tiles` tiles; every
//! finalist's estimated memory fits a tile.

use crate::ids::{OpId, ValueId};
use crate::ir::{
    Attention, AttentionPartition, CODE_RESERVE_BYTES, Graph, Grid, LayerNorm, MatMul, Mid, OpKind,
    Operator, OperatorEstimate, Partition, Plan, PlanEstimate,
};
use crate::isa::Activation;
use crate::target::Target;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LowerMidConfig {
    /// How many whole-program plans to keep for `select_finalist`.
    pub finalists: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum LowerMidError {
    #[error(
        "{op} ({name}): operation {kind} cannot be lowered on its own; it must follow a matmul (a \
         bias add, then a GELU, then a residual add of a value computed before the matmul)"
    )]
    Unfusable {
        op: OpId,
        name: String,
        kind: &'static str,
    },
    #[error(
        "{name} ({shape}) does not fit in tile memory: its leanest partition ({partition}) needs \
         {needed} bytes on its busiest tile (tile0 and every tile of its grid alike), {over} bytes over the \
         {capacity} bytes a tile has; {advice}"
    )]
    DoesNotFit {
        name: String,
        shape: String,
        partition: String,
        needed: u64,
        over: u64,
        capacity: u64,
        advice: &'static str,
    },
    #[error(
        "{name}: no partition fits the target's {tiles} tiles (more batch-and-head groups than tiles)"
    )]
    NoPartition { name: String, tiles: u32 },
    #[error(
        "{name} reads {value} row by row, but an attention reads it as its queries or values, which \
         the producing matmul stores transposed"
    )]
    Layout { name: String, value: String },
    #[error("lower_mid produced an invalid mid:\n{0}")]
    Invalid(String),
}

pub fn lower_mid(
    graph: &Graph,
    target: &Target,
    cfg: &LowerMidConfig,
) -> Result<Mid, LowerMidError> {
    let operators = lower_operators(graph)?;
    let weight_bytes: u64 = operators
        .iter()
        .map(|o| match o {
            Operator::MatMul(o) => {
                graph.value(o.b).bytes() + o.bias.map_or(0, |b| graph.value(b).bytes())
            }
            Operator::LayerNorm(o) => graph.value(o.gamma).bytes() + graph.value(o.beta).bytes(),
            Operator::Attention(_) => 0,
        })
        .sum();
    // Resident weights, spread over the tiles, with room for uneven pieces.
    let resident = 2 * weight_bytes.div_ceil(u64::from(target.tiles)) + 1024;
    let mut ranked: Vec<Vec<(Partition, OperatorEstimate)>> = Vec::new();
    for op in &operators {
        let estimates: Vec<(Partition, OperatorEstimate)> = match op {
            Operator::MatMul(o) => grid_partitions(o, target)
                .into_iter()
                .map(|p| (Partition::Grid(p), grid_estimate(o, &p, target, resident)))
                .collect(),
            Operator::Attention(a) => attention_partitions(a, target)
                .into_iter()
                .map(|p| (Partition::Attention(p), attention_estimate(a, &p, target)))
                .collect(),
            Operator::LayerNorm(o) => row_partitions(o.rows, o.cols, target)
                .into_iter()
                .map(|p| {
                    (
                        Partition::Grid(p),
                        layer_norm_estimate(o, &p, target, resident),
                    )
                })
                .collect(),
        };
        let (mut candidates, too_big): (Vec<_>, Vec<_>) =
            estimates.into_iter().partition(|(_, e)| e.fits(target));
        if candidates.is_empty() {
            let capacity = u64::from(target.memory_end - target.memory_base);
            let Some((p, e)) = too_big.into_iter().min_by_key(|(_, e)| e.total_bytes()) else {
                return Err(LowerMidError::NoPartition {
                    name: op.name().to_string(),
                    tiles: target.tiles,
                });
            };
            let needed = e.total_bytes() + CODE_RESERVE_BYTES;
            let shape = match op {
                Operator::MatMul(o) => format!("{}x{} times {}x{}", o.m, o.k, o.k, o.n),
                Operator::LayerNorm(o) => format!("{} rows of {}", o.rows, o.cols),
                Operator::Attention(a) => format!(
                    "{} queries x {} keys, head dimension {}",
                    a.shape.queries, a.shape.keys, a.shape.head_dim
                ),
            };
            let advice = match op {
                Operator::MatMul(_) | Operator::LayerNorm(_) => {
                    "use fewer tokens or a smaller dimension"
                }
                Operator::Attention(_) => "use shorter queries or keys or a smaller head dimension",
            };
            return Err(LowerMidError::DoesNotFit {
                name: op.name().to_string(),
                shape,
                partition: p.to_string(),
                needed,
                over: needed.saturating_sub(capacity),
                capacity,
                advice,
            });
        }
        candidates.sort_by_key(|(p, e)| (e.cycles, p.tiles(), e.total_bytes(), *p));
        ranked.push(candidates);
    }
    let finalists = (0..cfg.finalists.max(1) as usize)
        .map(|f| {
            let chosen: Vec<&(Partition, OperatorEstimate)> =
                ranked.iter().map(|c| &c[f.min(c.len() - 1)]).collect();
            plan(&chosen)
        })
        .fold(Vec::<Plan>::new(), |mut acc, p| {
            if !acc.contains(&p) {
                acc.push(p);
            }
            acc
        });
    let mid = Mid {
        workload: graph.workload.clone(),
        operators,
        finalists,
    };
    let errors = mid.verify(graph, target);
    if !errors.is_empty() {
        return Err(LowerMidError::Invalid(errors.join("\n")));
    }
    Ok(mid)
}

fn plan(chosen: &[&(Partition, OperatorEstimate)]) -> Plan {
    let estimate = PlanEstimate {
        cycles: chosen.iter().map(|(_, e)| e.cycles).sum(),
        exchange_cycles: chosen.iter().map(|(_, e)| e.exchange_cycles).sum(),
        exchange_row_bytes: chosen
            .iter()
            .map(|(_, e)| e.receive_bytes)
            .max()
            .unwrap_or(0),
        peak_standard_bytes: chosen
            .iter()
            .map(|(_, e)| e.standard_bytes())
            .max()
            .unwrap_or(0),
        peak_interleaved_bytes: chosen
            .iter()
            .map(|(_, e)| e.interleaved_bytes)
            .max()
            .unwrap_or(0),
        peak_total_bytes: chosen
            .iter()
            .map(|(_, e)| e.total_bytes())
            .max()
            .unwrap_or(0),
        active_tiles: chosen.iter().map(|(p, _)| p.tiles()).max().unwrap_or(0),
    };
    Plan {
        partitions: chosen.iter().map(|(p, _)| *p).collect(),
        operators: chosen.iter().map(|(_, e)| e.clone()).collect(),
        estimate,
    }
}

/// Fuses each matmul with the bias add, the GELU and the residual add that follow it; an attention
/// and a layer norm are operators of their own; host operations are no operator's.
fn lower_operators(graph: &Graph) -> Result<Vec<Operator>, LowerMidError> {
    let consumers = |v: ValueId| {
        graph
            .ops
            .iter()
            .filter(move |op| op.kind.inputs().contains(&v))
    };
    let single = |v: ValueId| {
        let mut it = consumers(v);
        match (it.next(), it.next()) {
            (Some(c), None) => Some(c),
            _ => None,
        }
    };
    let mut covered: Vec<bool> = graph.ops.iter().map(|op| op.kind.on_host()).collect();
    let mut operators = Vec::new();
    for (index, op) in graph.ops.iter().enumerate() {
        let id = OpId::from_index(operators.len());
        match op.kind {
            OpKind::Attention {
                q,
                k,
                v,
                scale,
                mask,
                ..
            } => {
                let Some(shape) = graph.attention_shape(op) else {
                    continue;
                };
                covered[op.id.index()] = true;
                operators.push(Operator::Attention(Attention {
                    id,
                    name: op.name.clone(),
                    q,
                    k,
                    v,
                    out: op.out,
                    shape,
                    scale_bits: scale.to_bits(),
                    mask,
                    transposed_out: !consumers(op.out).any(|c| !c.kind.on_host()),
                    partials: graph.partials,
                    covers: vec![op.id],
                }));
                continue;
            }
            OpKind::LayerNorm {
                x,
                gamma,
                beta,
                epsilon,
            } => {
                covered[op.id.index()] = true;
                let xv = graph.value(x);
                operators.push(Operator::LayerNorm(LayerNorm {
                    id,
                    name: op.name.clone(),
                    x,
                    gamma,
                    beta,
                    out: op.out,
                    rows: xv.rows,
                    cols: xv.cols,
                    epsilon_bits: epsilon.to_bits(),
                    covers: vec![op.id],
                }));
                continue;
            }
            OpKind::MatMul { .. } => {}
            _ => continue,
        }
        let OpKind::MatMul { a, b } = op.kind else {
            continue;
        };
        let mut covers = vec![op.id];
        let mut out = op.out;
        let mut bias = None;
        let mut activation = None;
        let mut residual = None;
        if let Some(next) = single(out)
            && let OpKind::AddBias { x, bias: b } = next.kind
            && x == out
        {
            bias = Some(b);
            covers.push(next.id);
            out = next.out;
        }
        if let Some(next) = single(out) {
            activation = match next.kind {
                OpKind::GeluTanh { .. } => Some(Activation::GeluTanh),
                OpKind::GeluErf { .. } => Some(Activation::GeluErf),
                _ => None,
            };
            if activation.is_some() {
                covers.push(next.id);
                out = next.out;
            }
        }
        if let Some(next) = single(out)
            && let OpKind::Add { a: x, b: y } = next.kind
        {
            let other = if x == out { y } else { x };
            // The residual must exist before the matmul runs.
            let earlier = graph.producer(other).is_none_or(|p| p.id.index() < index);
            if other != out && earlier {
                residual = Some(other);
                covers.push(next.id);
                out = next.out;
            }
        }
        for c in &covers {
            covered[c.index()] = true;
        }
        let (av, bv) = (graph.value(a), graph.value(b));
        operators.push(Operator::MatMul(MatMul {
            id,
            name: op.name.clone(),
            a,
            b,
            bias,
            activation,
            residual,
            out,
            transposed_out: false,
            m: av.rows,
            k: av.cols,
            n: bv.cols,
            partials: graph.partials,
            covers,
        }));
    }
    if let Some(op) = graph.ops.iter().find(|op| !covered[op.id.index()]) {
        return Err(LowerMidError::Unfusable {
            op: op.id,
            name: op.name.clone(),
            kind: op.kind.name(),
        });
    }
    transpose_attention_operands(graph, &mut operators)?;
    Ok(operators)
}

/// An attention reads its queries and values transposed: the matmuls producing them store their
/// outputs so, which no other device operator may then read.
fn transpose_attention_operands(
    graph: &Graph,
    operators: &mut [Operator],
) -> Result<(), LowerMidError> {
    let transposed: Vec<ValueId> = operators
        .iter()
        .filter_map(|o| match o {
            Operator::Attention(a) => Some([a.q, a.v]),
            _ => None,
        })
        .flatten()
        .collect();
    for o in operators.iter_mut() {
        if let Operator::MatMul(m) = o
            && transposed.contains(&m.out)
        {
            m.transposed_out = true;
        }
    }
    for o in operators.iter() {
        let reads: Vec<ValueId> = match o {
            Operator::MatMul(m) => [m.a, m.b].into_iter().chain(m.residual).collect(),
            Operator::LayerNorm(l) => vec![l.x],
            Operator::Attention(a) => vec![a.k],
        };
        if let Some(v) = reads.into_iter().find(|v| {
            transposed.contains(v) && graph.producer(*v).is_some_and(|p| !p.kind.on_host())
        }) {
            return Err(LowerMidError::Layout {
                name: o.name().to_string(),
                value: graph.value(v).name.clone(),
            });
        }
    }
    Ok(())
}

/// Every distinct split of `rows` whole rows of `cols` into row blocks, one tile each: a [`Grid`]
/// with one column block and one depth block.
fn row_partitions(rows: u32, cols: u32, target: &Target) -> Vec<Grid> {
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
            })
        })
        .collect()
}

/// The busiest tile's figures for a layer norm on row blocks: its rows, gamma and beta gathered, then
/// the vector unit over its rows.
fn layer_norm_estimate(
    op: &LayerNorm,
    p: &Grid,
    target: &Target,
    resident: u64,
) -> OperatorEstimate {
    let (rows, cols) = (u64::from(p.block_rows), u64::from(op.cols));
    let row_bytes = cols.next_multiple_of(4) * 2;
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
    let exchange = target.exchange_words(receive_bytes) + pieces * switch + transit;
    let compute = target.layer_norm_cycles(p.block_rows, op.cols);
    OperatorEstimate {
        compute_cycles: compute,
        exchange_cycles: exchange,
        receive_bytes,
        panel_bytes: rows * row_bytes,
        other_bytes: rows * row_bytes + 2 * row_bytes + resident,
        interleaved_bytes: 0,
        cycles: compute + exchange + 2 * target.sync_cycles,
    }
}

/// Every distinct grid: column blocks of a multiple of the AMP width, every row-block count, and every
/// split of the depth into blocks of a multiple of the AMP block depth.
fn grid_partitions(op: &MatMul, target: &Target) -> Vec<Grid> {
    let (width, depth, tiles) = (target.amp_block_width, target.amp_block_depth, target.tiles);
    let (m, k, n) = (op.m, op.k, op.n);
    let mut out = Vec::new();
    for w in 1..=n.div_ceil(width) {
        let block_cols = w * width;
        let col_blocks = n.div_ceil(block_cols);
        // The narrowest width of each column-block count: wider ones only waste columns.
        if col_blocks > tiles || (w > 1 && n.div_ceil((w - 1) * width) == col_blocks) {
            continue;
        }
        for row_blocks in 1..=(tiles / col_blocks).min(m) {
            let block_rows = m.div_ceil(row_blocks);
            if m.div_ceil(block_rows) != row_blocks {
                continue;
            }
            let most = (tiles / (col_blocks * row_blocks)).min(k.div_ceil(depth));
            for depth_blocks in 1..=most {
                let block_depth = if depth_blocks == 1 {
                    k
                } else {
                    k.div_ceil(depth_blocks).next_multiple_of(depth)
                };
                if k.div_ceil(block_depth) != depth_blocks {
                    continue;
                }
                out.push(Grid {
                    row_blocks,
                    block_rows,
                    col_blocks,
                    block_cols,
                    depth_blocks,
                    block_depth,
                });
            }
        }
    }
    out
}

/// The busiest tile's figures for a matmul on a grid.
fn grid_estimate(op: &MatMul, p: &Grid, target: &Target, resident: u64) -> OperatorEstimate {
    let depth = u64::from(p.block_depth.next_multiple_of(target.amp_block_depth));
    let (rows, cols) = (u64::from(p.block_rows), u64::from(p.block_cols));
    let element = u64::from(target.memory_element_bytes);
    let a_panel = rows * depth * 2;
    let b_panel = depth * cols * 2;
    let partials_bytes = u64::from(op.partials.bytes());
    let partials = (rows * cols * partials_bytes).next_multiple_of(element);
    // With a split depth, each tile of an output block sums a share of its rows from every depth block.
    let share = rows.div_ceil(u64::from(p.depth_blocks));
    let epilogue_rows = if p.depth_blocks > 1 { share } else { rows };
    let epilogue = op.has_epilogue(p.depth_blocks);
    let out = if epilogue {
        epilogue_rows * cols * 2
    } else {
        0
    };
    let mut compute = target.amp_cycles(p.block_rows, depth as u32, p.block_cols, op.partials);
    if epilogue {
        compute += op.epilogue_cycles(target, epilogue_rows as u32, cols as u32, p.depth_blocks);
    }
    let block_depth = u64::from(p.block_depth);
    let receive_bytes =
        rows * block_depth * 2 + block_depth * cols * 2 + op.bias.map_or(0, |_| cols * 2);
    // Pieces: the A panel arrives from the pieces of its rows (input homes or the producer's blocks),
    // the B panel from the weight's homes down its depth block.
    let pieces = u64::from(p.col_blocks + p.row_blocks);
    let (switch, transit) = (
        u64::from(target.mux_switch_cycles),
        u64::from(target.exchange_transit_cycles),
    );
    let mut exchange = target.exchange_words(receive_bytes) + pieces * switch + transit;
    let others = u64::from(p.depth_blocks - 1);
    let shares = others * share * cols.next_multiple_of(4) * partials_bytes;
    let mut steps = 2;
    if others > 0 {
        exchange += target.exchange_words(shares) + others * switch + transit;
        steps = 4;
    }
    OperatorEstimate {
        compute_cycles: compute,
        exchange_cycles: exchange,
        receive_bytes: receive_bytes.max(shares),
        panel_bytes: a_panel,
        // The holder the A panel is gathered from (an input home or the producer's output) may sit on
        // the same tile, as large as the panel.
        other_bytes: out + resident + shares + a_panel,
        interleaved_bytes: b_panel + partials,
        cycles: compute + exchange + steps * target.sync_cycles,
    }
}

/// Key sub-block lengths the online softmax may step by: multiples of the AMP block depth.
const SUB_BLOCKS: [u32; 4] = [32, 64, 128, 256];

/// Every distinct attention partition: query-block and key-block counts (over the keys some query
/// sees) whose visible cells fit the tiles of a group, and each sub-block length shorter than the key
/// block (or the whole key block when short).
fn attention_partitions(a: &Attention, target: &Target) -> Vec<AttentionPartition> {
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
                tiles_per_group: 0,
            };
            // Cells only grow with the key-block count.
            p.tiles_per_group = p.cells(&s);
            if p.tiles_per_group > per_group {
                break;
            }
            let whole = (block_keys <= SUB_BLOCKS[SUB_BLOCKS.len() - 1]).then_some(block_keys);
            for sub_block in SUB_BLOCKS
                .into_iter()
                .filter(|&b| b < block_keys)
                .chain(whole)
            {
                out.push(AttentionPartition { sub_block, ..p });
            }
        }
    }
    out
}

/// The busiest tile's figures for an attention partition: a tile with a whole query block and a whole key
/// block (nothing masked), which also merges its share of the queries from the other key blocks' states.
fn attention_estimate(a: &Attention, p: &AttentionPartition, target: &Target) -> OperatorEstimate {
    let (s, pt) = (a.shape, a.partials);
    let (bq, bk, d, sub) = (p.block_queries, p.block_keys, s.head_dim, p.sub_block);
    // One step of the online softmax over `keys` keys.
    let step = |keys: u32, first: bool| {
        target.amp_cycles(keys, d, bq, pt)
            + target.softmax_cycles(keys, bq, pt, s.causal)
            + target.amp_cycles(d, keys, bq, pt)
            + target.accumulate_cycles(d, bq, first)
    };
    let (full, rest) = (bk / sub, bk % sub);
    let mut compute = if full == 0 {
        step(rest, true)
    } else {
        step(sub, true)
            + u64::from(full - 1) * step(sub, false)
            + if rest > 0 { step(rest, false) } else { 0 }
    };
    // Each of a query block's tiles merges its share of the queries from every key block's state.
    let share = bq.div_ceil(p.key_blocks).next_multiple_of(2);
    compute += target.combine_cycles(p.key_blocks, d, share);
    let (switch, transit) = (
        u64::from(target.mux_switch_cycles),
        u64::from(target.exchange_transit_cycles),
    );
    // Stored rows as `select_finalist` lays them out: f16 rows of a multiple of 4 elements (8 bytes),
    // 8 for the AMP's weights (16 bytes), f32 rows of a multiple of 2.
    let (bq, bk, d, sub, share) = (
        u64::from(bq),
        u64::from(bk),
        u64::from(d),
        u64::from(sub),
        u64::from(share),
    );
    let keys_panel = bk * d.next_multiple_of(4) * 2;
    let values_panel = d * bk.next_multiple_of(4) * 2;
    // The queries from their home, keys and values from a home piece on each tile of the key block's
    // column: the fewest tiles of any column hold the largest pieces.
    let receive_bytes = d * bq * 2 + 2 * bk * d * 2;
    let mut exchange = target.exchange_words(receive_bytes)
        + (1 + 2 * u64::from(p.query_blocks)) * switch
        + transit;
    let state = (d + 2) * bq.next_multiple_of(2) * 4;
    let share_state = (d + 2) * share * 4;
    let merging = u64::from(p.key_blocks - 1);
    if merging > 0 {
        exchange += target.exchange_words(merging * share_state) + merging * switch + transit;
    }
    let steps = if merging > 0 { 4 } else { 2 };
    let element = u64::from(target.memory_element_bytes);
    let scores = |rows: u64| {
        (rows * bq.next_multiple_of(8) * u64::from(pt.bytes())).next_multiple_of(element)
    };
    let chunk = bk.div_ceil(u64::from(p.smallest_column(&s)));
    let homes = d * bq.next_multiple_of(4) * 2
        + chunk * d.next_multiple_of(4) * 2
        + d * chunk.next_multiple_of(4) * 2;
    let output = d * share.next_multiple_of(4) * 2;
    OperatorEstimate {
        compute_cycles: compute,
        exchange_cycles: exchange,
        receive_bytes: receive_bytes.max(merging * share_state),
        panel_bytes: keys_panel.max(values_panel),
        other_bytes: keys_panel.min(values_panel)
            + state
            + merging * share_state
            + output
            + homes
            + bq * 4,
        interleaved_bytes: d * bq.next_multiple_of(8) * 2
            + sub * bq.next_multiple_of(8) * 2
            + scores(sub)
            + scores(d),
        cycles: compute + exchange + steps * target.sync_cycles,
    }
}
