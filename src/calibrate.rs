//! Calibration: micro-packages run through the simulated device beside the reference model's
//! closed-form figures. Compute vertices are charged by the same functions the model states
//! (`Target::amp_cycles`, `Target::vector_cycles`), so they must agree exactly; exchange patterns are
//! scheduled by the compiler's scheduler and executed by the device, and compared with the pattern's
//! overhead-inclusive lower bound (a difference is the scheduler's gap, and is reported as such).

use crate::device::{Device, Execution, Fault, host_data};
use crate::exchange::schedule::schedule;
use crate::exchange::{Overheads, Pattern, PatternTransfer};
use crate::ids::{ExchangeId, TileId, ValueId};
use crate::ir::{DType, Graph, Rect, Value, ValueRole};
use crate::ir::{Package, TileImage};
use crate::isa::{Activation, Run};
use crate::isa::{
    Amp, Epilogue, HostProgram, HostTransfer, Instr, Placed, TileProgram, VertexKind,
};
use crate::lowering::{BoundTransfer, exchange_programs};
use crate::store::COMPILER_VERSION;
use crate::target::Target;

/// One row of the calibration table.
#[derive(Clone, Debug)]
pub struct Calibration {
    pub case: String,
    pub simulated: u64,
    pub model: u64,
    pub note: String,
}

/// A package of one superstep built by hand: values the host writes, and each tile's instructions.
struct Micro<'a> {
    target: &'a Target,
    values: Vec<Value>,
    writes: Vec<HostTransfer>,
    programs: Vec<Vec<Instr>>,
    kind: &'static str,
}

impl<'a> Micro<'a> {
    fn new(target: &'a Target, kind: &'static str) -> Micro<'a> {
        Micro {
            target,
            values: Vec::new(),
            writes: Vec::new(),
            programs: vec![Vec::new(); target.tiles as usize],
            kind,
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
            steps: vec![(self.kind.to_string(), 0)],
            estimated_cycles: 0,
        };
        let host = host_data(&package.graph, 1);
        let mut device = Device::load(&package)?;
        device.run(&package, &host).map(|(e, _)| e)
    }
}

/// Data starts past the largest code image a micro-package has.
const DATA_OFFSET: u32 = 0x1000;

fn amp_case(
    target: &Target,
    rows: u32,
    depth: u32,
    cols: u32,
    partials: DType,
) -> Result<Calibration, Fault> {
    let mut m = Micro::new(target, "compute");
    let a = target.memory_base + DATA_OFFSET;
    let b = target.interleaved_base;
    let element = target.memory_element_bytes;
    let p = b + (depth * cols * 2).next_multiple_of(element) + element;
    m.value(rows, depth, 0, a);
    m.value(depth, cols, 0, b);
    let at = |address, stride, dtype| Placed {
        address,
        stride,
        dtype,
    };
    m.programs[0].push(Instr::Vertex(VertexKind::Amp(Amp {
        a: at(a, depth * 2, DType::F16),
        b: at(b, cols * 2, DType::F16),
        partials: at(p, cols * partials.bytes(), partials),
        rows,
        depth,
        cols,
    })));
    let e = m.run()?;
    Ok(Calibration {
        case: format!("amp {rows}x{depth}x{cols} {partials} partials"),
        simulated: e.steps[0].cycles,
        model: target.amp_cycles(rows, depth, cols, partials),
        note: "closed form".to_string(),
    })
}

fn vector_case(
    target: &Target,
    rows: u32,
    cols: u32,
    bias: bool,
    gelu: bool,
) -> Result<Calibration, Fault> {
    let mut m = Micro::new(target, "compute");
    let base = target.memory_base + DATA_OFFSET;
    let partials = base;
    let bias_at = base + (rows * cols * 2).next_multiple_of(16);
    let out = bias_at + (cols * 2).next_multiple_of(16);
    m.value(rows, cols, 0, partials);
    if bias {
        m.value(1, cols, 0, bias_at);
    }
    let f16 = |address| Placed {
        address,
        stride: cols * 2,
        dtype: DType::F16,
    };
    m.programs[0].push(Instr::Vertex(VertexKind::Epilogue(Epilogue {
        partials: vec![f16(partials)],
        bias: bias.then_some(f16(bias_at)),
        residual: None,
        out: f16(out),
        rows,
        cols,
        activation: gelu.then_some(Activation::GeluTanh),
        transpose: false,
    })));
    let e = m.run()?;
    let activation = gelu.then_some(Activation::GeluTanh);
    let (ops, transcendentals) = Target::epilogue_ops(DType::F16, 1, bias, activation, false);
    Ok(Calibration {
        case: format!(
            "vector {rows}x{cols}{}{}",
            if bias { " bias" } else { "" },
            if gelu { " gelu" } else { "" }
        ),
        simulated: e.steps[0].cycles,
        model: target.vector_cycles(u64::from(rows * cols), DType::F16, ops, transcendentals),
        note: "closed form".to_string(),
    })
}

/// Schedules `pattern`, runs it on the device (every source holds its words; every destination has a
/// receive buffer per transfer), and compares with the pattern's lower bound, supertile pairs included.
fn exchange_case(
    target: &Target,
    name: &str,
    pattern: Pattern,
    note: &str,
) -> Result<Calibration, Fault> {
    let o = Overheads::of(target);
    let s = schedule(&pattern, o);
    let mut m = Micro::new(target, "exchange");
    let base = target.memory_base + DATA_OFFSET;
    let mut next_source = vec![base; target.tiles as usize];
    let mut next_receive = vec![target.interleaved_base; target.tiles as usize];
    let mut bound = Vec::new();
    for t in &pattern.transfers {
        let bytes = t.words * target.exchange_bytes_per_cycle;
        let at = next_source[t.source as usize];
        next_source[t.source as usize] += bytes;
        m.value(1, bytes / 2, t.source, at);
        let destinations = t
            .destinations
            .iter()
            .map(|&d| {
                let at = next_receive[d as usize];
                next_receive[d as usize] += bytes;
                (
                    TileId(d),
                    Run {
                        offset: at,
                        bytes,
                        count: 1,
                        stride: 0,
                    },
                )
            })
            .collect();
        bound.push(BoundTransfer {
            source: TileId(t.source),
            source_run: Run {
                offset: at,
                bytes,
                count: 1,
                stride: 0,
            },
            bytes,
            destinations,
        });
    }
    for (tile, program) in exchange_programs(ExchangeId(0), &s, &bound, target) {
        m.programs[tile.index()] = program;
    }
    let e = m.run()?;
    let gap = s.horizon - s.lower_bound;
    Ok(Calibration {
        case: format!("exchange {name}"),
        simulated: e.steps[0].cycles,
        model: u64::from(s.lower_bound),
        note: if gap == 0 {
            note.to_string()
        } else {
            format!("{note}; scheduler {gap} cycles above the bound")
        },
    })
}

fn unicast(source: u32, destination: u32, words: u32) -> PatternTransfer {
    PatternTransfer {
        source,
        destinations: vec![destination],
        words,
    }
}

/// Every calibration case for `target`.
pub fn calibrate(target: &Target) -> Result<Vec<Calibration>, Fault> {
    let n = target.tiles;
    let mut rows = Vec::new();
    for (r, d, c) in [
        (6, 16, 16),
        (48, 64, 32),
        (96, 128, 64),
        (23, 4304, 16),
        (729, 32, 16),
        (2, 40, 8),
    ] {
        for p in [DType::F16, DType::F32] {
            rows.push(amp_case(target, r, d, c, p)?);
        }
    }
    for (r, c, bias, gelu) in [
        (23, 96, false, false),
        (23, 96, true, false),
        (23, 96, true, true),
        (100, 7, false, true),
    ] {
        rows.push(vector_case(target, r, c, bias, gelu)?);
    }
    let bound_note = "bound: transit + the busiest tile or supertile pair, words at 2 per cycle over \
         the pair's bus, plus switches between transfers";
    let patterns = [
        (
            "one-to-one 256 words",
            Pattern {
                transfers: vec![unicast(0, 1, 256)],
            },
        ),
        (
            "broadcast 256 words to 1471 tiles",
            Pattern {
                transfers: vec![PatternTransfer {
                    source: 0,
                    destinations: (1..n).collect(),
                    words: 256,
                }],
            },
        ),
        (
            "all-to-all 16 tiles x 64 words",
            Pattern {
                transfers: (0..16)
                    .flat_map(|s| {
                        (0..16)
                            .filter(move |&d| d != s)
                            .map(move |d| unicast(s, d, 64))
                    })
                    .collect(),
            },
        ),
        (
            "supertile pairs 2k->2k+1 256 words",
            Pattern {
                transfers: (0..n / 2).map(|k| unicast(2 * k, 2 * k + 1, 256)).collect(),
            },
        ),
        (
            "shifted all-to-all 1472 tiles x 4 rounds x 32 words",
            Pattern {
                transfers: (1..=4)
                    .flat_map(|r| (0..n).map(move |s| unicast(s, (s + r) % n, 32)))
                    .collect(),
            },
        ),
        (
            "tile0->tile2 256 words, mates idle (wide)",
            Pattern {
                transfers: vec![unicast(0, 2, 256)],
            },
        ),
        (
            "tile0->tiles 2,3 256 words, mates receive the same (wide)",
            Pattern {
                transfers: vec![PatternTransfer {
                    source: 0,
                    destinations: vec![2, 3],
                    words: 256,
                }],
            },
        ),
    ];
    for (name, pattern) in patterns {
        rows.push(exchange_case(target, name, pattern, bound_note)?);
    }
    Ok(rows)
}
