//! The mid's matmul: `a` times one weight, or several side by side (Q, K and V of one input), with
//! its fused epilogue. Its partition is a [`super::Grid`] whose column blocks each lie inside one
//! part ([`MatMul::tiles_parts`]): a tile's block is one part's, so every vertex reads one weight
//! panel and writes one output.

use super::Grid;
use crate::ids::{OpId, ValueId};
use crate::ir::DType;
use crate::isa::Activation;
use crate::target::Target;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// One weight of a matmul: `out = f16(activation?(a · b + bias?) + residual?)`, columns
/// `start..start + cols` of the whole product.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatMulPart {
    pub b: ValueId,
    pub bias: Option<ValueId>,
    pub out: ValueId,
    pub start: u32,
    pub cols: u32,
}

/// A matmul with its fused epilogue: per part, `out = f16(activation?(a · b + bias?) + residual?)`.
/// The parts share `a`, the activation and whether they have a bias; a residual only with one part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatMul {
    pub id: OpId,
    pub name: String,
    pub a: ValueId,
    /// The weights side by side, in column order, together `n` wide.
    pub parts: Vec<MatMulPart>,
    pub activation: Option<Activation>,
    /// `[m, n]`, added after the activation (a residual connection).
    pub residual: Option<ValueId>,
    pub m: u32,
    pub k: u32,
    pub n: u32,
    pub partials: DType,
    /// The graph operations this operator implements.
    pub covers: Vec<OpId>,
}

impl MatMul {
    /// Whether the parts have a bias.
    pub fn has_bias(&self) -> bool {
        self.parts.iter().any(|p| p.bias.is_some())
    }

    /// The outputs, in column order.
    pub fn outs(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.parts.iter().map(|p| p.out)
    }

    /// The index of the part holding the product's columns `c0..c1` and the columns within it, if
    /// one holds them all.
    pub fn part_of(&self, (c0, c1): (u32, u32)) -> Option<(usize, (u32, u32))> {
        let i = (self.parts.iter()).position(|p| {
            p.start <= c0 && u64::from(c1) <= u64::from(p.start) + u64::from(p.cols)
        })?;
        let start = self.parts[i].start;
        Some((i, (c0 - start, c1 - start)))
    }

    /// Whether `block_cols` wide column blocks each lie inside one part: every part but the last
    /// is a whole number of blocks.
    pub fn tiles_parts(&self, block_cols: u32) -> bool {
        let inner = &self.parts[..self.parts.len().saturating_sub(1)];
        block_cols > 0 && inner.iter().all(|p| p.cols.is_multiple_of(block_cols))
    }

    /// Whether the parts lie side by side from column 0 to `n` and agree in their bias, with a
    /// residual only beside one part.
    pub fn parts_are_consistent(&self) -> bool {
        let mut next = 0u64;
        let side_by_side = self.parts.iter().all(|p| {
            let ok = u64::from(p.start) == next && p.cols > 0;
            next += u64::from(p.cols);
            ok
        });
        let bias = self.has_bias();
        side_by_side
            && next == u64::from(self.n)
            && self.parts.iter().all(|p| p.bias.is_some() == bias)
            && (self.residual.is_none() || self.parts.len() == 1)
    }

    /// Whether the AMP's partials need a separate epilogue pass to become the f16 output: a bias, an
    /// activation, a residual, f32 partials, partials of several depth blocks to sum, or an output
    /// stored in the other order than the partials (`transpose`).
    pub fn has_epilogue(&self, depth_blocks: u32, transpose: bool) -> bool {
        self.has_bias()
            || self.activation.is_some()
            || self.residual.is_some()
            || transpose
            || self.partials != DType::F16
            || depth_blocks > 1
    }

    /// The estimate of one epilogue vertex over `rows x cols` partials (the AMP's rows and columns:
    /// in the transposed form the bias runs down the rows).
    pub fn epilogue_cycles(
        &self,
        target: &Target,
        rows: u32,
        cols: u32,
        p: &Grid,
        transpose: bool,
    ) -> u64 {
        target.epilogue_cycles(
            rows,
            cols,
            &crate::target::EpilogueCost {
                partials: self.partials,
                parts: p.depth_blocks,
                bias: self.has_bias(),
                bias_by_row: p.transposed,
                activation: self.activation,
                residual: self.residual.is_some(),
                transposed: transpose,
            },
        )
    }

    /// The dump's line: `out = a · b` with one part, `out0 | out1 = a · b0 | b1` with several.
    pub fn dump(&self, covers: &str) -> String {
        let join = |f: &dyn Fn(&MatMulPart) -> String| {
            (self.parts.iter().map(f)).collect::<Vec<_>>().join(" | ")
        };
        let mut s = format!(
            "  {} {}: {} = {} · {} [{}x{}x{}] bias={} ",
            self.id,
            self.name,
            join(&|p| p.out.to_string()),
            self.a,
            join(&|p| p.b.to_string()),
            self.m,
            self.k,
            self.n,
            join(&|p| p.bias.map_or("-".to_string(), |b| b.to_string())),
        );
        s.push_str(match self.activation {
            None => "gelu=false ",
            Some(Activation::GeluTanh) => "gelu=true ",
            Some(Activation::GeluErf) => "gelu=erf ",
        });
        if let Some(r) = self.residual {
            let _ = write!(s, "residual={r} ");
        }
        let _ = write!(s, "partials={} covers={covers}", self.partials);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qkv(widths: &[u32]) -> MatMul {
        let v = ValueId::from_index;
        let mut start = 0;
        let parts = (widths.iter().enumerate())
            .map(|(i, &cols)| {
                let p = MatMulPart {
                    b: v(1 + 3 * i),
                    bias: Some(v(2 + 3 * i)),
                    out: v(3 + 3 * i),
                    start,
                    cols,
                };
                start += cols;
                p
            })
            .collect();
        MatMul {
            id: OpId(0),
            name: "qkv".into(),
            a: v(0),
            parts,
            activation: None,
            residual: None,
            m: 128,
            k: 384,
            n: start,
            partials: DType::F32,
            covers: Vec::new(),
        }
    }

    #[test]
    fn a_column_block_belongs_to_the_part_holding_it_whole() {
        let m = qkv(&[384, 384, 384]);
        assert!(m.parts_are_consistent());
        let (i, cols) = m.part_of((416, 448)).unwrap();
        assert_eq!((m.parts[i].out, cols), (ValueId::from_index(6), (32, 64)));
        assert!(
            m.part_of((368, 400)).is_none(),
            "straddles the first two parts"
        );
        assert!(m.tiles_parts(48) && m.tiles_parts(128));
        assert!(!m.tiles_parts(53) && !m.tiles_parts(0));
        // The last part may end in a partial block.
        assert!(qkv(&[64, 64, 40]).tiles_parts(32));
    }

    #[test]
    fn parts_with_a_gap_a_missing_bias_or_a_residual_are_inconsistent() {
        let mut gap = qkv(&[64, 64]);
        gap.parts[1].start = 65;
        assert!(!gap.parts_are_consistent());
        let mut unbiased = qkv(&[64, 64]);
        unbiased.parts[1].bias = None;
        assert!(!unbiased.parts_are_consistent());
        let mut residual = qkv(&[64, 64]);
        residual.residual = Some(ValueId::from_index(99));
        assert!(!residual.parts_are_consistent());
        let mut wide = qkv(&[64, 64]);
        wide.n = 200;
        assert!(!wide.parts_are_consistent());
    }
}
