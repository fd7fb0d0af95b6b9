//! `lower_mid`'s verifier (`Mid::verify`): every operation of the graph covered by exactly one
//! operator; at least one finalist, each with a partition per operator, of the operator's kind, whose
//! row, column and depth blocks (or query blocks, key sub-blocks and cells) tile its output and its
//! reduction in AMP-wide blocks on at most the target's tiles; every finalist's estimated memory
//! fitting a tile.
//!
//! The tests damage the mid: an operator that covers nothing or an operation covered twice, a missing
//! finalist or partition, blocks short of the output, the reduction or the queries, a block width off
//! the AMP's, an empty key sub-block, miscounted attention cells, a partition over too many tiles or of
//! another kind, and an estimate beyond tile memory.

use crate::assert_rejects;
use crate::common::pipeline::{Built, small, small_attention};
use ipu_codegen::ir::{AttentionPartition, Grid, Mid, Operator, Partition};

fn lower_mid_errors(b: &Built, mid: &Mid) -> Vec<String> {
    mid.verify(&b.graph, &b.target)
}

/// The grid of operator `op` in the first finalist.
fn grid(mid: &mut Mid, op: usize) -> &mut Grid {
    match &mut mid.finalists[0].partitions[op] {
        Partition::Grid(g) => g,
        p => panic!("op{op} of the small MLP is partitioned as {p}"),
    }
}

fn matmul_shape(mid: &Mid, op: usize) -> (u32, u32, u32) {
    match &mid.operators[op] {
        Operator::MatMul(o) => (o.m, o.k, o.n),
        o => panic!("{} is not a matmul", o.id()),
    }
}

#[test]
fn lower_mid_verifier_rejects_an_operator_covering_no_operation() {
    let b = small();
    let mut mid = b.mid.clone();
    let Operator::MatMul(op) = &mut mid.operators[0] else {
        panic!("the small MLP's first operator is a matmul");
    };
    let orphans = std::mem::take(&mut op.covers);
    assert!(!orphans.is_empty());
    let errors = lower_mid_errors(b, &mid);
    for o in orphans {
        assert_rejects(
            &errors,
            &[&format!("{o}: covered by 0 operators, expected 1")],
        );
    }
}

#[test]
fn lower_mid_verifier_rejects_an_operation_covered_twice() {
    let b = small();
    let mut mid = b.mid.clone();
    let twin = mid.operators[1].clone();
    mid.operators.push(twin.clone());
    let errors = lower_mid_errors(b, &mid);
    for o in twin.covers() {
        assert_rejects(
            &errors,
            &[&format!("{o}: covered by 2 operators, expected 1")],
        );
    }
}

#[test]
fn lower_mid_verifier_rejects_a_mid_without_finalists() {
    let b = small();
    let mut mid = b.mid.clone();
    mid.finalists.clear();
    assert_rejects(&lower_mid_errors(b, &mid), &["no finalist"]);
}

#[test]
fn lower_mid_verifier_rejects_a_finalist_missing_a_partition() {
    let b = small();
    let mut mid = b.mid.clone();
    let last = mid.finalists.len() - 1;
    mid.finalists[last].partitions.pop();
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &[&format!("finalist {last}: partition count")],
    );
}

#[test]
fn lower_mid_verifier_rejects_row_blocks_short_of_the_output() {
    let b = small();
    let mut mid = b.mid.clone();
    let (m, _, _) = matmul_shape(&mid, 0);
    let g = grid(&mut mid, 0);
    assert!(g.row_blocks > 1, "{g:?}");
    g.row_blocks -= 1;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &[
            "finalist 0 op0: row blocks",
            &format!("do not tile {m} rows"),
        ],
    );
}

#[test]
fn lower_mid_verifier_rejects_column_blocks_short_of_the_output() {
    let b = small();
    let mut mid = b.mid.clone();
    let (_, _, n) = matmul_shape(&mid, 1);
    let g = grid(&mut mid, 1);
    assert!(g.col_blocks > 1, "{g:?}");
    g.col_blocks -= 1;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &[
            "finalist 0 op1: column blocks",
            &format!("do not tile {n} columns"),
        ],
    );
}

#[test]
fn lower_mid_verifier_rejects_depth_blocks_short_of_the_reduction() {
    let b = small();
    let mut mid = b.mid.clone();
    let (_, k, _) = matmul_shape(&mid, 0);
    let g = grid(&mut mid, 0);
    assert!(g.depth_blocks > 1, "{g:?}");
    g.depth_blocks -= 1;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0 op0: depth blocks", &format!("do not tile {k}")],
    );
}

#[test]
fn lower_mid_verifier_rejects_a_block_width_off_the_amp_block() {
    let b = small();
    let mut mid = b.mid.clone();
    let (_, _, n) = matmul_shape(&mid, 0);
    let g = grid(&mut mid, 0);
    // Still covering the columns, one short of the AMP's width.
    g.block_cols -= 1;
    g.col_blocks = n.div_ceil(g.block_cols);
    let width = g.block_cols;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &[&format!(
            "finalist 0 op0: block width {width} is not a multiple of {}",
            b.target.amp_block_width
        )],
    );
}

#[test]
fn lower_mid_verifier_rejects_an_estimate_beyond_tile_memory() {
    let b = small();
    let mut mid = b.mid.clone();
    mid.finalists[0].operators[2].interleaved_bytes =
        u64::from(b.target.memory_end - b.target.memory_base);
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0: estimated memory does not fit"],
    );
}

fn attention_partition(mid: &mut Mid) -> &mut AttentionPartition {
    match &mut mid.finalists[0].partitions[0] {
        Partition::Attention(p) => p,
        p => panic!("the small attention is partitioned as {p}"),
    }
}

#[test]
fn lower_mid_verifier_rejects_an_empty_key_sub_block() {
    let b = small_attention();
    let mut mid = b.mid.clone();
    attention_partition(&mut mid).sub_block = 0;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0 op0: key sub-block 0"],
    );
}

#[test]
fn lower_mid_verifier_rejects_miscounted_attention_cells() {
    let b = small_attention();
    let mut mid = b.mid.clone();
    attention_partition(&mut mid).tiles_per_group += 1;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0 op0:", "miscounts its tiles"],
    );
}

#[test]
fn lower_mid_verifier_rejects_query_blocks_short_of_the_queries() {
    let b = small_attention();
    let mut mid = b.mid.clone();
    let p = attention_partition(&mut mid);
    assert!(p.query_blocks > 1, "{p:?}");
    p.query_blocks -= 1;
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0 op0:", "does not tile"],
    );
}

#[test]
fn lower_mid_verifier_rejects_a_partition_over_more_tiles_than_the_target() {
    let b = small_attention();
    let mut mid = b.mid.clone();
    let p = attention_partition(&mut mid);
    p.groups = b.target.tiles / p.tiles_per_group + 1;
    let tiles = p.tiles();
    assert!(tiles > b.target.tiles);
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &[&format!("finalist 0 op0: {tiles} tiles")],
    );
}

#[test]
fn lower_mid_verifier_rejects_a_partition_of_another_kind() {
    let b = small_attention();
    let mut mid = b.mid.clone();
    mid.finalists[0].partitions[0] = small().mid.finalists[0].partitions[0];
    assert_rejects(
        &lower_mid_errors(b, &mid),
        &["finalist 0 op0: partition of another kind"],
    );
}
