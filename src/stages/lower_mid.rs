//! `lower_mid`: graph + target -> `mid`.
//!
//! Lowers the graph's operations to tileable operators (a matmul with its bias and GELU fused into the
//! epilogue), enumerates candidate partitions of every operator over the tiles (row blocks x column
//! blocks of the output, column blocks a multiple of the AMP block width), costs each analytically with
//! the target model (compute, exchange, per-tile memory) and keeps the best `finalists` whole-program
//! plans.
//!
//! Invariants (checked by [`verify`]): every graph operation is covered by exactly one operator; every
//! partition covers its output (`row_blocks * block_rows >= m`, `col_blocks * block_cols >= n`) with no
//! empty block and uses at most `target.tiles` tiles; every finalist's estimated memory fits a tile.

use crate::ids::{OpId, ValueId};
use crate::ir::{DType, Graph, OpKind};
use crate::target::Target;
use crate::verify::Verifier;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LowerMidConfig {
    /// How many whole-program plans to keep for `select_finalist`.
    pub finalists: u32,
}

/// A matmul with its fused epilogue: `out = f16(gelu?(a · b + bias?))`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operator {
    pub id: OpId,
    pub name: String,
    pub a: ValueId,
    pub b: ValueId,
    pub bias: Option<ValueId>,
    pub gelu: bool,
    pub out: ValueId,
    pub m: u32,
    pub k: u32,
    pub n: u32,
    pub partials: DType,
    /// The graph operations this operator implements.
    pub covers: Vec<OpId>,
}

impl Operator {
    /// Whether the AMP's partials need a separate epilogue pass to become the f16 output.
    pub fn has_epilogue(&self) -> bool {
        self.bias.is_some() || self.gelu || self.partials != DType::F16
    }

    /// Lane operations and transcendentals per output element of the epilogue.
    pub fn epilogue_ops(&self) -> (u64, u64) {
        Target::epilogue_ops(self.partials, self.bias.is_some(), self.gelu)
    }
}

/// A partition of an operator's output over `row_blocks x col_blocks` tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Partition {
    pub row_blocks: u32,
    pub block_rows: u32,
    pub col_blocks: u32,
    pub block_cols: u32,
}

impl Partition {
    pub fn tiles(&self) -> u32 {
        self.row_blocks * self.col_blocks
    }
}

/// Analytical figures of one operator under one partition, for its busiest tile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorEstimate {
    pub compute_cycles: u64,
    pub exchange_cycles: u64,
    pub receive_bytes: u64,
    /// The A panel: one contiguous buffer, in either region.
    pub panel_bytes: u64,
    /// Output, resident weight pieces: small buffers, in either region.
    pub other_bytes: u64,
    /// Weight panel and partials: interleaved only.
    pub interleaved_bytes: u64,
    pub cycles: u64,
}

impl OperatorEstimate {
    pub fn standard_bytes(&self) -> u64 {
        self.panel_bytes + self.other_bytes
    }
    pub fn total_bytes(&self) -> u64 {
        self.panel_bytes + self.other_bytes + self.interleaved_bytes
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEstimate {
    pub cycles: u64,
    pub exchange_cycles: u64,
    pub exchange_row_bytes: u64,
    pub peak_standard_bytes: u64,
    pub peak_interleaved_bytes: u64,
    pub peak_total_bytes: u64,
    pub active_tiles: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub partitions: Vec<Partition>,
    pub operators: Vec<OperatorEstimate>,
    pub estimate: PlanEstimate,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mid {
    pub workload: String,
    pub operators: Vec<Operator>,
    pub finalists: Vec<Plan>,
}

impl crate::store::Artifact for Mid {
    const KIND: &'static str = "mid";
    const SCHEMA: u32 = 1;
}

#[derive(Debug, thiserror::Error)]
pub enum LowerMidError {
    #[error(
        "{op} ({name}): operation {kind} cannot be lowered on its own; it must follow a matmul"
    )]
    Unfusable {
        op: OpId,
        name: String,
        kind: &'static str,
    },
    #[error(
        "{name} ({m}x{k} times {k}x{n}) does not fit in tile memory: its smallest partition ({partition}) needs \
         {needed} bytes on tile0 (and every tile of its grid), {over} bytes over the {capacity} bytes a tile has; \
         use fewer tokens or a smaller dimension"
    )]
    DoesNotFit {
        name: String,
        m: u32,
        k: u32,
        n: u32,
        partition: String,
        needed: u64,
        over: u64,
        capacity: u64,
    },
    #[error("lower_mid produced an invalid mid:\n{0}")]
    Invalid(String),
}

/// Bytes each tile keeps for code and exchange tables in the analytical model (`place_storage` sizes the
/// real code).
pub const CODE_RESERVE_BYTES: u64 = 24 * 1024;

pub fn lower_mid(
    graph: &Graph,
    target: &Target,
    cfg: &LowerMidConfig,
) -> Result<Mid, LowerMidError> {
    let operators = lower_operators(graph)?;
    let weight_bytes: u64 = operators
        .iter()
        .map(|o| graph.value(o.b).bytes() + o.bias.map_or(0, |b| graph.value(b).bytes()))
        .sum();
    // Resident weights, spread over the tiles, with room for uneven pieces.
    let resident = 2 * weight_bytes.div_ceil(u64::from(target.tiles)) + 1024;
    let mut ranked: Vec<Vec<(Partition, OperatorEstimate)>> = Vec::new();
    for op in &operators {
        let mut candidates = Vec::new();
        let mut smallest: Option<(Partition, OperatorEstimate)> = None;
        for p in partitions(op, target) {
            let e = estimate(op, &p, target, resident);
            if fits(&e, target) {
                candidates.push((p, e));
            } else if smallest
                .as_ref()
                .is_none_or(|(_, s)| e.total_bytes() < s.total_bytes())
            {
                smallest = Some((p, e));
            }
        }
        if candidates.is_empty() {
            let (p, e) = smallest.expect("every operator has at least one partition");
            let capacity = u64::from(target.memory_end - target.memory_base);
            let needed = e.total_bytes() + CODE_RESERVE_BYTES;
            return Err(LowerMidError::DoesNotFit {
                name: op.name.clone(),
                m: op.m,
                k: op.k,
                n: op.n,
                partition: format!(
                    "{}x{} blocks of {}x{}",
                    p.row_blocks, p.col_blocks, p.block_rows, p.block_cols
                ),
                needed,
                over: needed.saturating_sub(capacity),
                capacity,
            });
        }
        candidates.sort_by_key(|(p, e)| (e.cycles, p.tiles(), *p));
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
    let errors = verify(&mid, graph, target);
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

/// Fuses each matmul with the bias add and GELU that follow it.
fn lower_operators(graph: &Graph) -> Result<Vec<Operator>, LowerMidError> {
    let consumers = |v: ValueId| {
        graph.ops.iter().filter(move |op| match op.kind {
            OpKind::MatMul { a, b } => a == v || b == v,
            OpKind::AddBias { x, bias } => x == v || bias == v,
            OpKind::GeluTanh { x } => x == v,
        })
    };
    let mut covered = vec![false; graph.ops.len()];
    let mut operators = Vec::new();
    for op in &graph.ops {
        let OpKind::MatMul { a, b } = op.kind else {
            continue;
        };
        let mut covers = vec![op.id];
        let mut out = op.out;
        let mut bias = None;
        let mut gelu = false;
        let single = |v: ValueId| {
            let mut it = consumers(v);
            match (it.next(), it.next()) {
                (Some(c), None) => Some(c),
                _ => None,
            }
        };
        if let Some(next) = single(out)
            && let OpKind::AddBias { x, bias: b } = next.kind
            && x == out
        {
            bias = Some(b);
            covers.push(next.id);
            out = next.out;
        }
        if let Some(next) = single(out)
            && let OpKind::GeluTanh { .. } = next.kind
        {
            gelu = true;
            covers.push(next.id);
            out = next.out;
        }
        for c in &covers {
            covered[c.index()] = true;
        }
        let (av, bv) = (graph.value(a), graph.value(b));
        operators.push(Operator {
            id: OpId::from_index(operators.len()),
            name: op.name.clone(),
            a,
            b,
            bias,
            gelu,
            out,
            m: av.rows,
            k: av.cols,
            n: bv.cols,
            partials: graph.partials,
            covers,
        });
    }
    if let Some(op) = graph.ops.iter().find(|op| !covered[op.id.index()]) {
        let kind = match op.kind {
            OpKind::MatMul { .. } => "matmul",
            OpKind::AddBias { .. } => "add_bias",
            OpKind::GeluTanh { .. } => "gelu_tanh",
        };
        return Err(LowerMidError::Unfusable {
            op: op.id,
            name: op.name.clone(),
            kind,
        });
    }
    Ok(operators)
}

/// Every distinct partition: column blocks of a multiple of the AMP width, then every row-block count.
fn partitions(op: &Operator, target: &Target) -> Vec<Partition> {
    let (width, tiles, m, n) = (target.amp_block_width, target.tiles, op.m, op.n);
    (1..=n.div_ceil(width))
        .flat_map(move |w| {
            let block_cols = w * width;
            let col_blocks = n.div_ceil(block_cols);
            let max_rows = if col_blocks > tiles {
                0
            } else {
                (tiles / col_blocks).min(m)
            };
            (1..=max_rows).filter_map(move |row_blocks| {
                let block_rows = m.div_ceil(row_blocks);
                (m.div_ceil(block_rows) == row_blocks && n.div_ceil(block_cols) == col_blocks)
                    .then_some(Partition {
                        row_blocks,
                        block_rows,
                        col_blocks,
                        block_cols,
                    })
            })
        })
        .collect()
}

/// The busiest tile's figures for an operator under a partition.
fn estimate(op: &Operator, p: &Partition, target: &Target, resident: u64) -> OperatorEstimate {
    let depth = u64::from(op.k.next_multiple_of(target.amp_block_depth));
    let (rows, cols) = (u64::from(p.block_rows), u64::from(p.block_cols));
    let element = u64::from(target.memory_element_bytes);
    let a_panel = rows * depth * 2;
    let b_panel = depth * cols * 2;
    let partials = (rows * cols * u64::from(op.partials.bytes())).next_multiple_of(element);
    let out = if op.has_epilogue() {
        rows * cols * 2
    } else {
        0
    };
    let (ops, transcendentals) = op.epilogue_ops();
    let mut compute = target.amp_cycles(p.block_rows, depth as u32, p.block_cols, op.partials);
    if op.has_epilogue() {
        compute += target.vector_cycles(rows * cols, DType::F16, ops, transcendentals);
    }
    let receive_bytes =
        rows * u64::from(op.k) * 2 + u64::from(op.k) * cols * 2 + op.bias.map_or(0, |_| cols * 2);
    // Pieces: the A panel arrives from up to `col_blocks` producers, the B panel from `row_blocks` homes.
    let pieces = u64::from(p.col_blocks + p.row_blocks);
    let exchange = target.exchange_words(receive_bytes)
        + pieces * u64::from(target.mux_switch_cycles)
        + u64::from(target.exchange_transit_cycles);
    OperatorEstimate {
        compute_cycles: compute,
        exchange_cycles: exchange,
        receive_bytes,
        panel_bytes: a_panel,
        other_bytes: out + resident,
        interleaved_bytes: b_panel + partials,
        cycles: compute + exchange + 2 * target.sync_cycles,
    }
}

/// Whether an operator's working set fits a tile: the interleaved-only buffers in interleaved memory, the
/// A panel whole in one region, the rest in what is left of both.
fn fits(e: &OperatorEstimate, target: &Target) -> bool {
    let standard =
        u64::from(target.interleaved_base - target.memory_base).saturating_sub(CODE_RESERVE_BYTES);
    let Some(interleaved) =
        u64::from(target.memory_end - target.interleaved_base).checked_sub(e.interleaved_bytes)
    else {
        return false;
    };
    let in_standard =
        e.panel_bytes <= standard && e.other_bytes <= standard - e.panel_bytes + interleaved;
    let in_interleaved =
        e.panel_bytes <= interleaved && e.other_bytes <= standard + interleaved - e.panel_bytes;
    in_standard || in_interleaved
}

/// Checks a mid against its graph and target; returns every problem found.
pub fn verify(mid: &Mid, graph: &Graph, target: &Target) -> Vec<String> {
    let mut v = Verifier::default();
    let mut covered = vec![0u32; graph.ops.len()];
    for o in &mid.operators {
        for c in &o.covers {
            covered[c.index()] += 1;
        }
    }
    for (i, n) in covered.iter().enumerate() {
        v.check(*n == 1, || {
            format!("op{i}: covered by {n} operators, expected 1")
        });
    }
    v.check(!mid.finalists.is_empty(), || "no finalist".to_string());
    for (f, plan) in mid.finalists.iter().enumerate() {
        v.check(plan.partitions.len() == mid.operators.len(), || {
            format!("finalist {f}: partition count")
        });
        for (o, p) in mid.operators.iter().zip(&plan.partitions) {
            v.check(
                p.row_blocks * p.block_rows >= o.m && (p.row_blocks - 1) * p.block_rows < o.m,
                || {
                    format!(
                        "finalist {f} {}: row blocks {p:?} do not tile {} rows",
                        o.id, o.m
                    )
                },
            );
            v.check(
                p.col_blocks * p.block_cols >= o.n && (p.col_blocks - 1) * p.block_cols < o.n,
                || {
                    format!(
                        "finalist {f} {}: column blocks {p:?} do not tile {} columns",
                        o.id, o.n
                    )
                },
            );
            v.check(p.block_cols % target.amp_block_width == 0, || {
                format!(
                    "finalist {f} {}: block width {} is not a multiple of {}",
                    o.id, p.block_cols, target.amp_block_width
                )
            });
            v.check(p.tiles() <= target.tiles, || {
                format!("finalist {f} {}: {} tiles", o.id, p.tiles())
            });
        }
        for e in &plan.operators {
            v.check(fits(e, target), || {
                format!("finalist {f}: estimated memory does not fit")
            });
        }
    }
    v.finish()
}

impl Mid {
    pub fn dump(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "mid {}", self.workload);
        for o in &self.operators {
            let covers: Vec<String> = o.covers.iter().map(|c| c.to_string()).collect();
            let _ = writeln!(
                s,
                "  {} {}: {} = {} · {} [{}x{}x{}] bias={} gelu={} partials={} covers={}",
                o.id,
                o.name,
                o.out,
                o.a,
                o.b,
                o.m,
                o.k,
                o.n,
                o.bias.map_or("-".to_string(), |b| b.to_string()),
                o.gelu,
                o.partials,
                covers.join(",")
            );
        }
        for (f, plan) in self.finalists.iter().enumerate() {
            let e = &plan.estimate;
            let _ = writeln!(
                s,
                "  finalist {f}: estimated_cycles={} estimated_exchange_cycles={} exchange_row_bytes={} \
                 peak_standard_bytes={} peak_interleaved_bytes={} active_tiles={}",
                e.cycles,
                e.exchange_cycles,
                e.exchange_row_bytes,
                e.peak_standard_bytes,
                e.peak_interleaved_bytes,
                e.active_tiles
            );
            for ((o, p), oe) in self
                .operators
                .iter()
                .zip(&plan.partitions)
                .zip(&plan.operators)
            {
                let _ = writeln!(
                    s,
                    "    {}: {}x{} blocks of {}x{} compute={} exchange={} cycles={}",
                    o.id,
                    p.row_blocks,
                    p.col_blocks,
                    p.block_rows,
                    p.block_cols,
                    oe.compute_cycles,
                    oe.exchange_cycles,
                    oe.cycles
                );
            }
        }
        s
    }
}
