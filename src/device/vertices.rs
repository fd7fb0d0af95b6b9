//! A compute superstep: every tile runs its vertices in program order, tiles in parallel, and takes the
//! sum of its vertices' cycles.
//!
//! Contract: each vertex kind's semantics is a function of its own here (`amp`, `epilogue`, `softmax`,
//! `accumulate`, `combine`, `layer_norm`; the general vector vertex's in `vector`, the data-movement
//! vertex's in `assemble`), its arithmetic that of [`crate::numerics`], timed by `super::timing`
//! (never by the compiler's estimates). A vertex reads only memory written before,
//! writes only buffers not still live from an earlier superstep, and takes each operand in the element
//! type it names; the AMP's operands must also be aligned for its loads and stores, its weights and
//! partials in interleaved memory, and neither input may share a memory element with its partials.
//! A vertex's fault is a message; the superstep adds tile, superstep and the cycle the vertex started.
//! Its shapes, addresses and strides are the package's: every derived address or size is checked
//! (an operand whole by [`TileMemory::extent`] before it moves), and a superstep whose cycles pass
//! u32 is a fault.

mod assemble;
mod vector;

use super::memory::{Extent, Matrix, TileMemory};
use super::timing;
use super::{Device, Fault, fault};
use crate::ir::DType;
use crate::isa::{
    Accumulate, Amp, Combine, Epilogue, Instr, LayerNorm, LayerNormApply, LayerNormMoments, Placed,
    Softmax, VertexKind,
};
use crate::numerics;
use crate::target::Target;
use rayon::prelude::*;

impl Device {
    /// Executes compute superstep `step` on every tile, `program` its instructions per tile; returns
    /// each tile's cycles.
    pub(super) fn compute(
        &mut self,
        step: usize,
        program: &[Vec<Instr>],
    ) -> Result<Vec<u32>, Fault> {
        let target = &self.target;
        (self.tiles.par_iter_mut().zip(program))
            .enumerate()
            .map(|(t, (tile, instrs))| {
                let mut cycles = 0u32;
                for instr in instrs {
                    let at = u64::from(cycles);
                    let took = execute_vertex(target, &mut tile.memory, instr, step as u32)
                        .map_err(|m| fault(t, step, at, m))?;
                    cycles = at
                        .checked_add(took)
                        .and_then(|end| u32::try_from(end).ok())
                        .ok_or_else(|| {
                            let message = format!(
                                "{}: takes {took} cycles from cycle {at}, past the superstep's 32-bit count",
                                vertex_name(instr)
                            );
                            fault(t, step, at, message)
                        })?;
                }
                Ok(cycles)
            })
            .collect::<Vec<Result<u32, Fault>>>()
            .into_iter()
            .collect()
    }
}

/// The vertex kind of a compute instruction, for messages.
fn vertex_name(instr: &Instr) -> &'static str {
    match instr {
        Instr::Vertex(v) => v.name(),
        _ => "instruction",
    }
}

/// Executes one compute instruction at superstep `step`; returns its cycles.
fn execute_vertex(
    target: &Target,
    memory: &mut TileMemory,
    instr: &Instr,
    step: u32,
) -> Result<u64, String> {
    let Instr::Vertex(vertex) = instr else {
        return Err(format!("{instr:?} inside a compute step"));
    };
    match vertex.as_ref() {
        VertexKind::Amp(v) => amp(target, memory, v, step),
        VertexKind::Epilogue(v) => {
            epilogue(memory, v, step)?;
            Ok(timing::epilogue(target, v))
        }
        VertexKind::Softmax(v) => {
            softmax(target, memory, v, step)?;
            Ok(timing::softmax(target, v))
        }
        VertexKind::Accumulate(v) => {
            accumulate(memory, v, step)?;
            Ok(timing::accumulate(target, v))
        }
        VertexKind::Combine(v) => {
            combine(memory, v, step)?;
            Ok(timing::combine(target, v))
        }
        VertexKind::LayerNorm(v) => {
            layer_norm(memory, v, step)?;
            Ok(timing::layer_norm(target, v))
        }
        VertexKind::LayerNormMoments(v) => {
            layer_norm_moments(memory, v, step)?;
            Ok(timing::layer_norm_moments(target, v))
        }
        VertexKind::LayerNormApply(v) => {
            layer_norm_apply(memory, v, step)?;
            Ok(timing::layer_norm_apply(target, v))
        }
        VertexKind::Vector(v) => vector::vector(target, memory, v, step),
        VertexKind::Assemble(v) => assemble::assemble(target, memory, v, step),
    }
}

/// `partials = a · b` on the AMP ([`Amp`]): the depth padded with zeros to whole AMP blocks.
fn amp(
    target: &Target,
    memory: &mut TileMemory,
    v: &Amp<Placed>,
    step: u32,
) -> Result<u64, String> {
    let Amp {
        rows, depth, cols, ..
    } = *v;
    check_amp_operands(target, memory, v)?;
    let (a, a_stride) = (v.a.address, v.a.stride);
    let (b, b_stride) = (v.b.address, v.b.stride);
    let (partials, partials_stride) = (v.partials.address, v.partials.stride);
    let partials_type = v.partials.dtype;
    let av = memory.load(
        &Matrix {
            addr: a,
            stride: a_stride,
            rows,
            cols: depth,
            dtype: DType::F16,
        },
        "AMP input a",
    )?;
    let bv = memory.load(
        &Matrix {
            addr: b,
            stride: b_stride,
            rows: depth,
            cols,
            dtype: DType::F16,
        },
        "AMP weights b",
    )?;
    let (d, c) = (depth as usize, cols as usize);
    let block = target.amp_block_depth as usize;
    let padded = d.next_multiple_of(block);
    let (Some(a_padded), Some(b_padded)) =
        ((rows as usize).checked_mul(padded), padded.checked_mul(c))
    else {
        return Err(format!(
            "AMP: {rows} x {depth} by {depth} x {cols}, the depth padded to {padded}, passes the address space"
        ));
    };
    let mut ap = vec![0f32; a_padded];
    for r in 0..rows as usize {
        ap[r * padded..r * padded + d].copy_from_slice(&av[r * d..(r + 1) * d]);
    }
    let mut bp = bv;
    bp.resize(b_padded, 0.0);
    let mut out = vec![0f32; rows as usize * c];
    let shape = numerics::AmpShape {
        a_stride: padded,
        b_stride: c,
        out_stride: c,
        rows: rows as usize,
        depth: padded,
        cols: c,
        block_depth: block,
        partials: partials_type,
    };
    numerics::amp_matmul(&ap, &bp, &mut out, &shape);
    let m = Matrix {
        addr: partials,
        stride: partials_stride,
        rows,
        cols,
        dtype: partials_type,
    };
    memory.store(&m, &out, step, "AMP partials")?;
    Ok(timing::amp(target, v))
}

/// The AMP's rules for its operands: f16 inputs; every row of every operand aligned for its loads or
/// stores; weights and partials in interleaved memory; neither input sharing a memory element with the
/// partials.
fn check_amp_operands(target: &Target, memory: &TileMemory, v: &Amp<Placed>) -> Result<(), String> {
    let Amp {
        rows, depth, cols, ..
    } = *v;
    expect(&v.a, DType::F16, "AMP input a")?;
    expect(&v.b, DType::F16, "AMP weights b")?;
    let (a, a_stride) = (v.a.address, v.a.stride);
    let (b, b_stride) = (v.b.address, v.b.stride);
    let (partials, partials_stride) = (v.partials.address, v.partials.stride);
    let partials_type = v.partials.dtype;
    // Every row is loaded or stored on its own: base and stride keep each row aligned.
    for (what, addr, stride, align) in [
        ("AMP input a", a, a_stride, 8),
        ("AMP weights b (128-bit loads)", b, b_stride, 16),
        ("AMP partials", partials, partials_stride, 16),
    ] {
        check_alignment(addr, align, what)?;
        check_alignment(stride, align, &format!("{what} row stride"))?;
    }
    for (what, addr) in [("weights b (128-bit loads)", b), ("partials", partials)] {
        if !target.is_interleaved(addr) {
            return Err(format!(
                "AMP {what} at {} outside interleaved memory (from {:#x})",
                memory.name(addr),
                target.interleaved_base
            ));
        }
    }
    // The memory elements of an operand's first and last byte, its rows checked whole (at least one
    // row; an operand of no bytes lies in its address's element).
    let elements = |addr, stride, rows: u32, cols, dtype, what| -> Result<(u32, u32), String> {
        let m = Matrix {
            addr,
            stride,
            rows: rows.max(1),
            cols,
            dtype,
        };
        let Extent { end, .. } = memory.extent(&m, what)?;
        let last = end.saturating_sub(1).max(addr);
        Ok((target.memory_element(addr), target.memory_element(last)))
    };
    let out = elements(
        partials,
        partials_stride,
        rows,
        cols,
        partials_type,
        "AMP partials",
    )?;
    for (what, addr, (e0, e1)) in [
        (
            "a",
            a,
            elements(a, a_stride, rows, depth, DType::F16, "AMP input a")?,
        ),
        (
            "b",
            b,
            elements(b, b_stride, depth, cols, DType::F16, "AMP weights b")?,
        ),
    ] {
        if e0 <= out.1 && out.0 <= e1 {
            return Err(format!(
                "AMP input {what} at {} shares memory element {} with its partials at {}",
                memory.name(addr),
                e0.max(out.0),
                memory.name(partials)
            ));
        }
    }
    Ok(())
}

/// `out = f16(activation?(Σ partials + bias?) + residual?)` on the vector unit ([`Epilogue`]).
fn epilogue(memory: &mut TileMemory, v: &Epilogue<Placed>, step: u32) -> Result<(), String> {
    let Epilogue {
        rows,
        cols,
        activation,
        ..
    } = *v;
    let (out, out_stride) = (v.out.address, v.out.stride);
    expect(&v.out, DType::F16, "epilogue output")?;
    let Some(partials_type) = v.partials.first().map(|p| p.dtype) else {
        return Err("epilogue of no partials".to_string());
    };
    // The sum starts at zero, as long as the first partials (checked against tile memory as they load).
    let mut p = Vec::new();
    for part in &v.partials {
        expect(part, partials_type, "epilogue partials")?;
        let part = memory.load(
            &Matrix {
                addr: part.address,
                stride: part.stride,
                rows,
                cols,
                dtype: partials_type,
            },
            "epilogue partials",
        )?;
        p.resize(part.len(), 0f32);
        for (sum, x) in p.iter_mut().zip(part) {
            *sum += x;
        }
    }
    let by_row = v.bias_by_row;
    let bias_len = if by_row { rows } else { cols };
    let bv = match &v.bias {
        Some(bias) => Some(memory.load(
            &Matrix {
                addr: expect(bias, DType::F16, "epilogue bias")?,
                stride: bias.stride,
                rows: 1,
                cols: bias_len,
                dtype: DType::F16,
            },
            "epilogue bias",
        )?),
        None => None,
    };
    let residual = match &v.residual {
        Some(r) => Some(memory.load(
            &Matrix {
                addr: expect(r, DType::F16, "epilogue residual")?,
                stride: r.stride,
                rows,
                cols,
                dtype: DType::F16,
            },
            "epilogue residual",
        )?),
        None => None,
    };
    let result: Vec<f32> = p
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let bias = bv.as_ref().map(|b| {
                if by_row {
                    b[i / cols as usize]
                } else {
                    b[i % cols as usize]
                }
            });
            let residual = residual.as_ref().map(|r| r[i]);
            numerics::epilogue(v, bias, activation, residual).to_f32()
        })
        .collect();
    let (stored, result) = stored_form(rows, cols, result, v.transpose);
    memory.store(
        &Matrix {
            addr: out,
            stride: out_stride,
            rows: stored.0,
            cols: stored.1,
            dtype: DType::F16,
        },
        &result,
        step,
        "epilogue output",
    )?;
    Ok(())
}

/// One step of the online softmax over a block of scoresᵀ ([`Softmax`]); returns its cycles.
fn softmax(
    target: &Target,
    memory: &mut TileMemory,
    v: &Softmax<Placed>,
    step: u32,
) -> Result<(), String> {
    let Softmax {
        keys,
        queries,
        head_dim,
        mask,
        first,
        scale_bits,
        ..
    } = *v;
    let (scores, scores_stride, scores_type) = (v.scores.address, v.scores.stride, v.scores.dtype);
    let probabilities = expect(&v.probabilities, DType::F16, "softmax probabilities")?;
    let probabilities_stride = v.probabilities.stride;
    let state = expect(&v.state, DType::F32, "softmax state")?;
    let state_stride = v.state.stride;
    let rescale = expect(&v.rescale, DType::F32, "softmax rescale")?;
    let mask = mask.map(|m| (m.first_key, m.first_query));
    let matrix = |addr, stride, rows, dtype| Matrix {
        addr,
        stride,
        rows,
        cols: queries,
        dtype,
    };
    let stats_address = head_dim
        .checked_mul(state_stride)
        .and_then(|offset| offset.checked_add(state))
        .ok_or_else(|| {
            format!(
                "softmax running max and sum: row {head_dim} of the state at {state:#x}/{state_stride} passes the 32-bit address space"
            )
        })?;
    let stats = matrix(stats_address, state_stride, 2, DType::F32);
    let s = memory.load(
        &matrix(scores, scores_stride, keys, scores_type),
        "softmax scores",
    )?;
    let key_bias = match &v.key_bias {
        Some(b) => Some(memory.load(
            &Matrix {
                addr: expect(b, DType::F16, "softmax key bias")?,
                stride: b.stride,
                rows: 1,
                cols: keys,
                dtype: DType::F16,
            },
            "softmax key bias",
        )?),
        None => None,
    };
    let q = queries as usize;
    let (mut max, mut sum) = if first {
        (vec![0f32; q], vec![0f32; q])
    } else {
        let m = memory.load(&stats, "softmax running max and sum")?;
        (m[..q].to_vec(), m[q..].to_vec())
    };
    let (p, r) = numerics::softmax_block(
        &s,
        keys as usize,
        q,
        f32::from_bits(scale_bits),
        mask,
        key_bias.as_deref(),
        first,
        &mut max,
        &mut sum,
        target.workers as usize,
    );
    let p_matrix = matrix(probabilities, probabilities_stride, keys, DType::F16);
    memory.store(&p_matrix, &p, step, "softmax probabilities")?;
    memory.store(
        &one_row(rescale, queries, DType::F32),
        &r,
        step,
        "softmax rescale",
    )?;
    max.extend_from_slice(&sum);
    memory.store(&stats, &max, step, "softmax running max and sum")
}

/// The rescaled accumulation of `values · probabilities` into the flash state ([`Accumulate`]).
fn accumulate(memory: &mut TileMemory, v: &Accumulate<Placed>, step: u32) -> Result<(), String> {
    let Accumulate {
        rows, cols, first, ..
    } = *v;
    let (partials, partials_stride, partials_type) =
        (v.partials.address, v.partials.stride, v.partials.dtype);
    let state = expect(&v.state, DType::F32, "accumulator")?;
    let state_stride = v.state.stride;
    let rescale = expect(&v.rescale, DType::F32, "accumulate rescale")?;
    let matrix = |addr, stride, rows, dtype| Matrix {
        addr,
        stride,
        rows,
        cols,
        dtype,
    };
    let p = memory.load(
        &matrix(partials, partials_stride, rows, partials_type),
        "accumulate partials",
    )?;
    let acc_matrix = matrix(state, state_stride, rows, DType::F32);
    let acc = if first {
        p
    } else {
        let r = memory.load(&one_row(rescale, cols, DType::F32), "accumulate rescale")?;
        let acc = memory.load(&acc_matrix, "accumulator")?;
        acc.iter()
            .zip(&p)
            .enumerate()
            .map(|(i, (a, x))| a * r[i % cols as usize] + x)
            .collect()
    };
    memory.store(&acc_matrix, &acc, step, "accumulator")
}

/// The merge of flash states into the attention output ([`Combine`]).
fn combine(memory: &mut TileMemory, v: &Combine<Placed>, step: u32) -> Result<(), String> {
    let Combine {
        rows,
        cols,
        scale_bits,
        ..
    } = *v;
    let out = expect(&v.out, DType::F16, "attention output")?;
    let out_stride = v.out.stride;
    let states = &v.states;
    let parts = states
        .iter()
        .map(|s| {
            let address = expect(s, DType::F32, "flash state")?;
            let matrix = |addr, rows| Matrix {
                addr,
                stride: s.stride,
                rows,
                cols,
                dtype: DType::F32,
            };
            let mut part = memory.load(&matrix(address, rows), "flash state")?;
            let stats_address = rows
                .checked_mul(s.stride)
                .and_then(|offset| offset.checked_add(address))
                .ok_or_else(|| {
                    format!(
                        "flash state: its max and sum after {rows} rows at {address:#x}/{} pass the 32-bit address space",
                        s.stride
                    )
                })?;
            part.extend(memory.load(&matrix(stats_address, 2), "flash state max and sum")?);
            Ok(part)
        })
        .collect::<Result<Vec<_>, String>>()?;
    if parts.is_empty() {
        return Err("combine of no flash state".to_string());
    }
    let o = numerics::combine(
        &parts,
        rows as usize,
        cols as usize,
        f32::from_bits(scale_bits),
    );
    let (stored, o) = stored_form(rows, cols, o, v.transpose);
    let m = Matrix {
        addr: out,
        stride: out_stride,
        rows: stored.0,
        cols: stored.1,
        dtype: DType::F16,
    };
    memory.store(&m, &o, step, "attention output")
}

/// A dense `rows x cols` result as it is stored: itself, or transposed (its stored rows and elements
/// per row, and the data in that order).
fn stored_form(rows: u32, cols: u32, data: Vec<f32>, transpose: bool) -> ((u32, u32), Vec<f32>) {
    if !transpose {
        return ((rows, cols), data);
    }
    let (r, c) = (rows as usize, cols as usize);
    let t = (0..r * c).map(|i| data[(i % r) * c + i / r]).collect();
    ((cols, rows), t)
}

/// A single row of `cols` elements at `addr` (its stride unused).
fn one_row(addr: u32, cols: u32, dtype: DType) -> Matrix {
    Matrix {
        addr,
        stride: 0,
        rows: 1,
        cols,
        dtype,
    }
}

/// The operand's address, when its element type is the one the vertex reads or writes there.
fn expect(operand: &Placed, dtype: DType, what: &str) -> Result<u32, String> {
    if operand.dtype != dtype {
        return Err(format!(
            "{what} at {:#x} is {}, where the vertex takes {dtype}",
            operand.address, operand.dtype
        ));
    }
    Ok(operand.address)
}

fn check_alignment(value: u32, align: u32, what: &str) -> Result<(), String> {
    if !value.is_multiple_of(align) {
        return Err(format!("{what} {value:#x} is not {align}-byte aligned"));
    }
    Ok(())
}

/// A layer norm over rows of f16 elements, in f32 ([`LayerNorm`], [`numerics::layer_norm_row`]).
fn layer_norm(memory: &mut TileMemory, v: &LayerNorm<Placed>, step: u32) -> Result<(), String> {
    let (rows, cols) = (v.rows, v.cols);
    let matrix = |o: &Placed, rows| matrix(o, rows, cols, DType::F16);
    for (o, what) in [
        (&v.x, "layer norm input"),
        (&v.gamma, "layer norm gamma"),
        (&v.beta, "layer norm beta"),
        (&v.out, "layer norm output"),
    ] {
        expect(o, DType::F16, what)?;
    }
    let x = memory.load(&matrix(&v.x, rows), "layer norm input")?;
    let gamma = memory.load(&matrix(&v.gamma, 1), "layer norm gamma")?;
    let beta = memory.load(&matrix(&v.beta, 1), "layer norm beta")?;
    let epsilon = f32::from_bits(v.epsilon_bits);
    let out: Vec<f32> = x
        .chunks(cols.max(1) as usize)
        .flat_map(|row| numerics::layer_norm_row(row, &gamma, &beta, epsilon))
        .collect();
    memory.store(&matrix(&v.out, rows), &out, step, "layer norm output")
}

/// `rows x cols` of `dtype` at an operand.
fn matrix(o: &Placed, rows: u32, cols: u32, dtype: DType) -> Matrix {
    Matrix {
        addr: o.address,
        stride: o.stride,
        rows,
        cols,
        dtype,
    }
}

/// A column block's moments of each row, in f32 ([`LayerNormMoments`], [`numerics::row_moments`]).
fn layer_norm_moments(
    memory: &mut TileMemory,
    v: &LayerNormMoments<Placed>,
    step: u32,
) -> Result<(), String> {
    expect(&v.x, DType::F16, "layer norm input")?;
    expect(&v.moments, DType::F32, "layer norm moments")?;
    let x = memory.load(
        &matrix(&v.x, v.rows, v.cols, DType::F16),
        "layer norm input",
    )?;
    let moments: Vec<f32> = x
        .chunks(v.cols.max(1) as usize)
        .flat_map(|row| {
            let (mean, squares) = numerics::row_moments(row);
            [mean, squares]
        })
        .collect();
    let out = matrix(&v.moments, v.rows, 2, DType::F32);
    memory.store(&out, &moments, step, "layer norm moments")
}

/// A column block of a layer norm from every block's moments ([`LayerNormApply`],
/// [`numerics::combined_moments`], [`numerics::normalized_row`]).
fn layer_norm_apply(
    memory: &mut TileMemory,
    v: &LayerNormApply<Placed>,
    step: u32,
) -> Result<(), String> {
    for m in &v.moments {
        expect(m, DType::F32, "layer norm moments")?;
    }
    for (o, dtype, what) in [
        (&v.x, DType::F16, "layer norm input"),
        (&v.gamma, DType::F16, "layer norm gamma"),
        (&v.beta, DType::F16, "layer norm beta"),
        (&v.out, DType::F16, "layer norm output"),
    ] {
        expect(o, dtype, what)?;
    }
    let (rows, cols) = (v.rows, v.cols);
    let x = memory.load(&matrix(&v.x, rows, cols, DType::F16), "layer norm input")?;
    let moments = (v.moments.iter())
        .map(|m| memory.load(&matrix(m, rows, 2, DType::F32), "layer norm moments"))
        .collect::<Result<Vec<_>, _>>()?;
    let gamma = memory.load(&matrix(&v.gamma, 1, cols, DType::F16), "layer norm gamma")?;
    let beta = memory.load(&matrix(&v.beta, 1, cols, DType::F16), "layer norm beta")?;
    let epsilon = f32::from_bits(v.epsilon_bits);
    let out: Vec<f32> = (x.chunks(cols.max(1) as usize).enumerate())
        .flat_map(|(r, row)| {
            let blocks: Vec<(f32, f32)> =
                (moments.iter()).map(|m| (m[2 * r], m[2 * r + 1])).collect();
            let (mean, variance) = numerics::combined_moments(&blocks, cols);
            numerics::normalized_row(row, mean, variance, &gamma, &beta, epsilon)
        })
        .collect();
    memory.store(
        &matrix(&v.out, rows, cols, DType::F16),
        &out,
        step,
        "layer norm output",
    )
}
