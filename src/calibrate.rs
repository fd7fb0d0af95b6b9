//! Calibration: micro-packages run through the simulated device beside the compiler's closed-form
//! estimates and, where published, real hardware. Graphcore's measured AMP curve (128 sizes of one
//! 16x16 weight block, `data/`) runs one size per tile in one package, against the device's own model
//! (`device::timing`). The AMP estimate (`Target::amp_cycles`) states that model's formula in closed
//! form, so for AMP the check that can fail is the hardware's; vector estimates can be wrong wherever
//! the accesses a vertex actually makes on the device (row alignment, interleaving) differ from the
//! estimate's assumptions, and [`check`] says where. Exchange patterns are scheduled by the compiler's
//! scheduler, lowered to exchange code, executed by the device (which times that code itself) and
//! compared with the schedule's horizon, the compiler's estimate of the phase; a package of empty
//! supersteps sets the device's syncs beside the compiler's estimate of them
//! (`calibrate/exchange.rs`).

mod assemble;
mod exchange;
mod vector_ops;

use crate::device::{Device, Execution, Fault, host_data};
use crate::ids::{TileId, ValueId};
use crate::ir::{DType, Graph, Rect, StepEstimate, Value, ValueRole};
use crate::ir::{Package, TileImage};
use crate::isa::Activation;
use crate::isa::{
    Accumulate, Amp, Combine, Epilogue, HostProgram, HostTransfer, Instr, LayerNorm,
    LayerNormApply, LayerNormMoments, Placed, Softmax, TileProgram, VertexKind,
};
use crate::store::COMPILER_VERSION;
use crate::target::{PEAK_FLOP_PER_TILE_CYCLE, Target};
use std::fmt::Write as _;

/// One row of the calibration table: a case run on the device beside the compiler's estimate and,
/// where one is published, the real hardware's figure.
#[derive(Clone, Debug)]
pub struct Calibration {
    pub case: String,
    /// `amp`, `vector`, `exchange` or `sync`.
    pub kind: &'static str,
    /// The AMP vertex's rows.
    pub rows: Option<u32>,
    /// Tile cycles measured on real hardware (Graphcore's published curve).
    pub hardware_cycles: Option<f64>,
    pub device_cycles: u64,
    /// The compiler's closed-form estimate; for an exchange, its schedule's horizon.
    pub estimate_cycles: u64,
    /// Cycles the case's multiply-accumulates take at the tile's peak (AMP cases).
    pub peak_cycles: Option<f64>,
    /// Elements the case's vertex works over, its rows by its columns (vector and data-movement
    /// cases).
    pub elements: Option<u64>,
    pub note: String,
}

impl Calibration {
    /// Fraction of the tile's peak the hardware reached.
    pub fn hardware_fraction(&self) -> Option<f64> {
        Some(self.peak_cycles? / self.hardware_cycles?)
    }
    pub fn device_fraction(&self) -> Option<f64> {
        Some(self.peak_cycles? / self.device_cycles as f64)
    }
    /// The estimate's error relative to the device: `(estimate - device) / device`.
    pub fn estimate_error(&self) -> f64 {
        (self.estimate_cycles as f64 - self.device_cycles as f64) / self.device_cycles.max(1) as f64
    }
}

/// How far the device may be from the hardware: in cycles for every published point, and in points of
/// peak for those of at least [`HARDWARE_MIN_ROWS_FOR_POINTS`] rows; how far the estimate may be from
/// the device.
pub const HARDWARE_CYCLES_TOLERANCE: f64 = 8.0;
pub const HARDWARE_POINTS_TOLERANCE: f64 = 3.0;
pub const HARDWARE_MIN_ROWS_FOR_POINTS: u32 = 64;
pub const ESTIMATE_TOLERANCE: f64 = 0.03;

/// Every case outside its tolerance, named with its figures.
pub fn check(rows: &[Calibration]) -> Vec<String> {
    let mut problems = Vec::new();
    for r in rows {
        if let Some(hw) = r.hardware_cycles {
            let off = r.device_cycles as f64 - hw;
            if off.abs() > HARDWARE_CYCLES_TOLERANCE {
                problems.push(format!(
                    "{}: device {} cycles, hardware {hw:.1} ({off:+.1}, tolerance ±{HARDWARE_CYCLES_TOLERANCE})",
                    r.case, r.device_cycles
                ));
            }
            if let (Some(d), Some(h), Some(rows)) =
                (r.device_fraction(), r.hardware_fraction(), r.rows)
            {
                let points = 100.0 * (d - h);
                if rows >= HARDWARE_MIN_ROWS_FOR_POINTS && points.abs() > HARDWARE_POINTS_TOLERANCE
                {
                    problems.push(format!(
                        "{}: device {:.1} % of peak, hardware {:.1} % ({points:+.1} points, tolerance ±{HARDWARE_POINTS_TOLERANCE})",
                        r.case,
                        100.0 * d,
                        100.0 * h
                    ));
                }
            }
        }
        let e = r.estimate_error();
        if e.abs() > ESTIMATE_TOLERANCE {
            problems.push(format!(
                "{}: estimate {} cycles, device {} ({:+.1} %, tolerance ±{:.0} %)",
                r.case,
                r.estimate_cycles,
                r.device_cycles,
                100.0 * e,
                100.0 * ESTIMATE_TOLERANCE
            ));
        }
    }
    problems
}

/// The table `ipu-codegen calibrate` prints, then a summary line with the worst cases.
pub fn table(rows: &[Calibration]) -> String {
    let mut s = format!(
        "{:<40} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}  note\n",
        "case", "hardware", "device", "estimate", "dev-hw", "hw%", "dev%"
    );
    let pct = |f: Option<f64>| f.map_or("-".to_string(), |f| format!("{:.1}", 100.0 * f));
    for r in rows {
        let _ = writeln!(
            s,
            "{:<40} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}  estimate {:+.2} %{}{}",
            r.case,
            r.hardware_cycles
                .map_or("-".to_string(), |h| format!("{h:.1}")),
            r.device_cycles,
            r.estimate_cycles,
            r.hardware_cycles.map_or("-".to_string(), |h| format!(
                "{:+.1}",
                r.device_cycles as f64 - h
            )),
            pct(r.hardware_fraction()),
            pct(r.device_fraction()),
            100.0 * r.estimate_error(),
            if r.note.is_empty() { "" } else { "; " },
            r.note
        );
    }
    let published: Vec<&Calibration> = rows
        .iter()
        .filter(|r| r.hardware_cycles.is_some())
        .collect();
    let worst_cycles = published
        .iter()
        .map(|r| (r.device_cycles as f64 - r.hardware_cycles.unwrap_or(0.0)).abs())
        .fold(0.0, f64::max);
    let worst_points = published
        .iter()
        .filter(|r| r.rows.is_some_and(|n| n >= HARDWARE_MIN_ROWS_FOR_POINTS))
        .filter_map(|r| Some((100.0 * (r.device_fraction()? - r.hardware_fraction()?)).abs()))
        .fold(0.0, f64::max);
    let worst_estimate = rows
        .iter()
        .rev() // the first of equals
        .max_by(|a, b| {
            a.estimate_error()
                .abs()
                .total_cmp(&b.estimate_error().abs())
        });
    let _ = writeln!(
        s,
        "cases={} published={} worstDeviceVsHardwareCycles={worst_cycles:.1} worstDeviceVsHardwarePoints={worst_points:.2} worstEstimateVsDevicePercent={:.2} worstEstimateCase=\"{}\"",
        rows.len(),
        published.len(),
        worst_estimate.map_or(0.0, |r| 100.0 * r.estimate_error().abs()),
        worst_estimate.map_or("", |r| r.case.as_str())
    );
    s
}

/// `ipu-codegen calibrate --json`'s body: `{"target", "cases":[{"name", "kind", "rows",
/// "hardwareCycles", "hardwareFraction", "deviceFraction", "deviceCycles", "estimateCycles",
/// "elements"}]}`, fractions of the tile's peak (0-1), null where they do not apply.
pub fn json(target: &Target, rows: &[Calibration]) -> serde_json::Value {
    serde_json::json!({
        "target": target.name,
        "cases": rows.iter().map(|r| serde_json::json!({
            "name": r.case,
            "kind": r.kind,
            "rows": r.rows,
            "hardwareCycles": r.hardware_cycles,
            "hardwareFraction": r.hardware_fraction(),
            "deviceFraction": r.device_fraction(),
            "deviceCycles": r.device_cycles,
            "estimateCycles": r.estimate_cycles,
            "elements": r.elements,
        })).collect::<Vec<_>>()
    })
}

/// Graphcore's measured curve: (rows N, tile cycles) of one `ConvPartial1x1` vertex, [N,16] x [16,16]
/// f16 with f16 partials, on a Bow IPU (`data/tessellate-ipu-amp-curve.csv`, with its source).
pub fn published_amp_curve() -> Vec<(u32, f64)> {
    include_str!("../data/tessellate-ipu-amp-curve.csv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("rows_n"))
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(',').collect();
            Some((fields.first()?.parse().ok()?, fields.get(3)?.parse().ok()?))
        })
        .collect()
}

/// A package built by hand: values the host writes, and each tile's instructions, one superstep (or
/// as many as `steps` estimates; each tile's program holds a `Sync` between them) ended by a sync.
struct Micro<'a> {
    target: &'a Target,
    values: Vec<Value>,
    writes: Vec<HostTransfer>,
    programs: Vec<Vec<Instr>>,
    steps: Vec<StepEstimate>,
}

impl<'a> Micro<'a> {
    fn new(target: &'a Target, kind: &'static str) -> Micro<'a> {
        Micro {
            target,
            values: Vec::new(),
            writes: Vec::new(),
            programs: vec![Vec::new(); target.tiles as usize],
            steps: vec![StepEstimate {
                kind: kind.to_string(),
                cycles: 0,
                sync_cycles: target.sync_estimate(1),
                operators: Vec::new(),
            }],
        }
    }

    /// A host value of `rows x cols` f16, written to `tile` at `address`.
    fn value(&mut self, rows: u32, cols: u32, tile: u32, address: u32) -> ValueId {
        let id = ValueId::from_index(self.values.len());
        self.values.push(Value {
            id,
            name: format!("v{}", id.0),
            rows,
            cols,
            dtype: DType::F16,
            role: ValueRole::Input,
            fan_in: 1,
            shape: Vec::new(),
        });
        self.write(id, tile, address);
        id
    }

    fn write(&mut self, value: ValueId, tile: u32, address: u32) {
        let v = &self.values[value.index()];
        self.writes.push(HostTransfer {
            value,
            rect: Rect::new(0, v.rows, 0, v.cols),
            tile: TileId(tile),
            address,
            stride: v.cols * 2,
            transposed: false,
        });
    }

    fn run(self) -> Result<Execution, Fault> {
        let graph = Graph {
            workload: "calibration".to_string(),
            values: self.values,
            ops: Vec::new(),
            partials: DType::F16,
            parameters: Vec::new(),
        };
        let tiles = self
            .programs
            .into_iter()
            .enumerate()
            .map(|(t, mut instrs)| {
                instrs.push(Instr::Sync);
                let code = TileProgram {
                    tile: TileId::from_index(t),
                    instrs,
                }
                .encode();
                TileImage {
                    code_address: self.target.memory_base,
                    code,
                    buffers: Vec::new(),
                }
            })
            .collect();
        let package = Package {
            compiler_version: COMPILER_VERSION.to_string(),
            target: self.target.clone(),
            workload: graph.workload.clone(),
            host: HostProgram {
                initialize: Vec::new(),
                run_inputs: self.writes,
                run_outputs: Vec::new(),
            },
            graph,
            tiles,
            steps: self.steps,
            tile_estimates: Vec::new(),
            estimated_cycles: 0,
        };
        let host = host_data(&package.graph, 1);
        let mut device = Device::load(package)?;
        device.run(&host, &crate::progress::Silent).map(|(e, _)| e)
    }
}

/// Data starts past the largest code image a micro-package has.
const DATA_OFFSET: u32 = 0x1000;

/// AMP vertices of the given shapes (rows, depth, cols, partials), one per tile in one package; each
/// with its device cycles and its estimate, and `hardware` cycles where published.
fn amp_cases(
    target: &Target,
    shapes: &[(u32, u32, u32, DType, Option<f64>)],
) -> Result<Vec<Calibration>, Fault> {
    let mut m = Micro::new(target, "compute");
    let element = target.memory_element_bytes;
    for (tile, &(rows, depth, cols, partials, _)) in shapes.iter().enumerate() {
        let a = target.memory_base + DATA_OFFSET;
        let b = target.interleaved_base;
        let p = b + (depth * cols * 2).next_multiple_of(element) + element;
        m.value(rows, depth, tile as u32, a);
        m.value(depth, cols, tile as u32, b);
        let at = |address, stride, dtype| Placed {
            address,
            stride,
            dtype,
        };
        m.programs[tile].push(Instr::Vertex(Box::new(VertexKind::Amp(Amp {
            a: at(a, depth * 2, DType::F16),
            b: at(b, cols * 2, DType::F16),
            partials: at(p, cols * partials.bytes(), partials),
            rows,
            depth,
            cols,
        }))));
    }
    let e = m.run()?;
    let busy = &e.steps[0].tile_busy;
    Ok(shapes
        .iter()
        .enumerate()
        .map(|(tile, &(rows, depth, cols, partials, hardware))| {
            let macs = f64::from(rows) * f64::from(depth) * f64::from(cols);
            Calibration {
                case: format!("amp {rows}x{depth}x{cols} {partials} partials"),
                kind: "amp",
                rows: Some(rows),
                hardware_cycles: hardware,
                device_cycles: u64::from(busy[tile]),
                estimate_cycles: target.amp_cycles(rows, depth, cols, partials),
                peak_cycles: Some(2.0 * macs / PEAK_FLOP_PER_TILE_CYCLE as f64),
                elements: None,
                note: if hardware.is_some() {
                    "Graphcore tessellate-ipu, Bow".to_string()
                } else {
                    String::new()
                },
            }
        })
        .collect())
}

/// An epilogue of `parts` f16 parts over `rows x cols`: the AMP's own partials and, with
/// `interleaved`, the other parts in interleaved memory, rows at 16 bytes; the other parts otherwise,
/// the bias and the output rows at 8 in standard memory. The two layouts show that the device times
/// the epilogue alike from either region.
fn vector_case(
    target: &Target,
    (rows, cols, parts, interleaved): (u32, u32, u32, bool),
    bias: bool,
    gelu: bool,
) -> Result<Calibration, Fault> {
    let mut m = Micro::new(target, "compute");
    let (wide_row, row) = (
        (cols * 2).next_multiple_of(16),
        (cols * 2).next_multiple_of(8),
    );
    let partials = target.interleaved_base;
    let bias_at = target.memory_base + DATA_OFFSET;
    let out = bias_at + wide_row;
    m.value(rows, wide_row / 2, 0, partials);
    if bias {
        m.value(1, row / 2, 0, bias_at);
    }
    let f16 = |address, stride| Placed {
        address,
        stride,
        dtype: DType::F16,
    };
    let mut operands = vec![f16(partials, wide_row)];
    for part in 1..parts {
        let (at, stride) = if interleaved {
            (partials + part * rows * wide_row, wide_row)
        } else {
            (out + part * rows * row, row)
        };
        m.value(rows, stride / 2, 0, at);
        operands.push(f16(at, stride));
    }
    m.programs[0].push(Instr::Vertex(Box::new(VertexKind::Epilogue(Epilogue {
        partials: operands,
        bias: bias.then_some(f16(bias_at, row)),
        bias_by_row: false,
        residual: None,
        out: f16(out, row),
        rows,
        cols,
        activation: gelu.then_some(Activation::GeluTanh),
        transpose: false,
    }))));
    let e = m.run()?;
    let activation = gelu.then_some(Activation::GeluTanh);
    Ok(Calibration {
        case: format!(
            "vector {rows}x{cols}{}{}{}",
            match (parts, interleaved) {
                (1, _) => String::new(),
                (_, true) => format!(" {parts} parts interleaved"),
                (_, false) => format!(" {parts} parts standard"),
            },
            if bias { " bias" } else { "" },
            if gelu { " gelu" } else { "" },
        ),
        kind: "vector",
        rows: None,
        hardware_cycles: None,
        device_cycles: e.steps[0].cycles,
        estimate_cycles: target.epilogue_cycles(
            rows,
            cols,
            &crate::target::EpilogueCost {
                partials: DType::F16,
                parts,
                bias,
                bias_by_row: false,
                activation,
                residual: false,
                transposed: false,
            },
        ),
        peak_cycles: None,
        elements: Some(u64::from(rows) * u64::from(cols)),
        note: String::new(),
    })
}

/// One tile's memory for a micro-package: operands placed one after another, 16-byte aligned, in
/// standard or interleaved memory; the host writes the inputs (an f32 input as twice as many f16s:
/// its bytes are what the vertex loads and times).
struct Operands<'m, 'a> {
    m: &'m mut Micro<'a>,
    tile: u32,
    standard: u32,
    interleaved: u32,
}

impl Operands<'_, '_> {
    fn place(
        &mut self,
        rows: u32,
        cols: u32,
        dtype: DType,
        interleaved: bool,
        input: bool,
    ) -> Placed {
        let stride = (cols * dtype.bytes()).next_multiple_of(16);
        let next = if interleaved {
            &mut self.interleaved
        } else {
            &mut self.standard
        };
        let address = *next;
        *next += (rows * stride).next_multiple_of(16);
        if input {
            self.m.value(rows, stride / 2, self.tile, address);
        }
        Placed {
            address,
            stride,
            dtype,
        }
    }
}

/// The other vector kernels, one per tile in one package, with their estimates.
fn kernel_cases(target: &Target) -> Result<Vec<Calibration>, Fault> {
    let mut m = Micro::new(target, "compute");
    let (rows, cols, keys, queries, head_dim, parts) = (23, 384, 64, 24, 72, 3);
    let mut vertices = Vec::new();
    for tile in 0..10u32 {
        let mut o = Operands {
            m: &mut m,
            tile,
            standard: target.memory_base + DATA_OFFSET,
            interleaved: target.interleaved_base,
        };
        let (case, vertex, estimate, elements) = match tile {
            0 => (
                format!("layer norm {rows}x{cols}"),
                VertexKind::LayerNorm(LayerNorm {
                    x: o.place(rows, cols, DType::F16, false, true),
                    gamma: o.place(1, cols, DType::F16, false, true),
                    beta: o.place(1, cols, DType::F16, false, true),
                    out: o.place(rows, cols, DType::F16, false, false),
                    rows,
                    cols,
                    epsilon_bits: 1e-5f32.to_bits(),
                }),
                target.layer_norm_cycles(rows, cols),
                rows * cols,
            ),
            6 | 7 => {
                let (rows, cols) = if tile == 6 { (1, 48) } else { (rows, 64) };
                (
                    format!("layer norm moments {rows}x{cols}"),
                    VertexKind::LayerNormMoments(LayerNormMoments {
                        x: o.place(rows, cols, DType::F16, false, true),
                        moments: o.place(rows, 2, DType::F32, false, false),
                        rows,
                        cols,
                    }),
                    target.layer_norm_moments_cycles(rows, cols),
                    rows * cols,
                )
            }
            8 | 9 => {
                let (rows, cols, blocks) = if tile == 8 { (1, 48, 8) } else { (rows, 64, 6) };
                (
                    format!("layer norm apply {rows}x{cols} of {blocks} blocks"),
                    VertexKind::LayerNormApply(LayerNormApply {
                        x: o.place(rows, cols, DType::F16, false, true),
                        moments: (0..blocks)
                            .map(|_| o.place(rows, 2, DType::F32, false, true))
                            .collect(),
                        gamma: o.place(1, cols, DType::F16, false, true),
                        beta: o.place(1, cols, DType::F16, false, true),
                        out: o.place(rows, cols, DType::F16, false, false),
                        rows,
                        cols,
                        epsilon_bits: 1e-5f32.to_bits(),
                    }),
                    target.layer_norm_apply_cycles(rows, cols, blocks),
                    rows * cols,
                )
            }
            1 | 4 => {
                let scores = if tile == 1 { DType::F16 } else { DType::F32 };
                (
                    format!(
                        "softmax {keys} keys x {queries} queries {} scores, first",
                        scores
                    ),
                    VertexKind::Softmax(Softmax {
                        scores: o.place(keys, queries, scores, true, true),
                        probabilities: o.place(keys, queries, DType::F16, true, false),
                        state: o.place(head_dim + 2, queries, DType::F32, false, false),
                        rescale: o.place(1, queries, DType::F32, false, false),
                        keys,
                        queries,
                        head_dim,
                        mask: None,
                        key_bias: None,
                        first: true,
                        scale_bits: 0.125f32.to_bits(),
                    }),
                    target.softmax_cycles(keys, queries, scores, false, false, true),
                    keys * queries,
                )
            }
            2 => (
                format!("accumulate {head_dim}x{queries}"),
                VertexKind::Accumulate(Accumulate {
                    partials: o.place(head_dim, queries, DType::F32, true, true),
                    state: o.place(head_dim + 2, queries, DType::F32, false, true),
                    rescale: o.place(1, queries, DType::F32, false, true),
                    rows: head_dim,
                    cols: queries,
                    first: false,
                }),
                target.accumulate_cycles(head_dim, queries, false, DType::F32),
                head_dim * queries,
            ),
            _ => {
                let transpose = tile == 5;
                (
                    format!(
                        "combine {parts} states of {head_dim}x{queries}{}",
                        if transpose { ", transposed" } else { "" }
                    ),
                    VertexKind::Combine(Combine {
                        states: (0..parts)
                            .map(|_| o.place(head_dim + 2, queries, DType::F32, false, true))
                            .collect(),
                        out: if transpose {
                            o.place(queries, head_dim, DType::F16, false, false)
                        } else {
                            o.place(head_dim, queries, DType::F16, false, false)
                        },
                        rows: head_dim,
                        cols: queries,
                        scale_bits: 0.125f32.to_bits(),
                        transpose,
                    }),
                    target.combine_cycles(parts, head_dim, queries, transpose),
                    head_dim * queries,
                )
            }
        };
        m.programs[tile as usize].push(Instr::Vertex(Box::new(vertex)));
        vertices.push((case, estimate, elements));
    }
    let e = m.run()?;
    Ok(vertices
        .into_iter()
        .enumerate()
        .map(|(tile, (case, estimate, elements))| Calibration {
            case,
            kind: "vector",
            rows: None,
            hardware_cycles: None,
            device_cycles: u64::from(e.steps[0].tile_busy[tile]),
            estimate_cycles: estimate,
            peak_cycles: None,
            elements: Some(u64::from(elements)),
            note: String::new(),
        })
        .collect())
}

/// Why a calibration package could not be run.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    #[error("calibration package: {0}")]
    Fault(#[from] Fault),
    #[error("calibration package: {0}")]
    Lowering(#[from] crate::lowering::Unplaceable),
}

/// Every calibration case for `target`.
pub fn calibrate(target: &Target) -> Result<Vec<Calibration>, CalibrateError> {
    let mut shapes: Vec<(u32, u32, u32, DType, Option<f64>)> = published_amp_curve()
        .into_iter()
        .map(|(rows, cycles)| (rows, 16, 16, DType::F16, Some(cycles)))
        .collect();
    for (r, d, c) in [
        (6, 16, 16),
        (48, 64, 32),
        (96, 128, 64),
        (23, 4304, 16),
        (729, 32, 16),
        (2, 40, 8),
    ] {
        for p in [DType::F16, DType::F32] {
            shapes.push((r, d, c, p, None));
        }
    }
    let mut rows = amp_cases(target, &shapes)?;
    for (shape, bias, gelu) in [
        ((23, 96, 1, false), false, false),
        ((23, 96, 1, false), true, false),
        ((23, 96, 1, false), true, true),
        ((100, 7, 1, false), false, true),
        ((7, 1, 1, false), false, false),
        ((23, 9, 1, false), true, false),
        // A reduction's epilogue: sixteen depth blocks' parts, the others' loaded 128 or 64 bits
        // at a time.
        ((18, 32, 16, true), false, false),
        ((18, 32, 16, false), false, false),
    ] {
        rows.push(vector_case(target, shape, bias, gelu)?);
    }
    rows.extend(kernel_cases(target)?);
    rows.extend(vector_ops::vector_op_cases(target)?);
    rows.extend(assemble::assemble_cases(target)?);
    rows.extend(exchange::exchange_cases(target)?);
    rows.push(exchange::sync_case(target)?);
    Ok(rows)
}
