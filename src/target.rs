//! The reference target model (`mk2-1500` and its siblings) as data, plus the compiler's closed-form
//! cost estimates. Every number here is hashed into every action key, so a change to the model
//! recomputes everything that depends on it.
//!
//! Sources for each figure (sections of `research/ipu-hardware.md` beside the design brief; the brief's
//! §4 table fixes the defaults but for transit and sync, which its research notes left open and which
//! come from the figures their fields cite): tiles, clock and peak: §1; memory map, elements,
//! interleaving and alignment: §2; workers and barrel scheduling: §3; exchange rates, mux switch,
//! exchange instruction issue, multicast, supertile pairs, transit and sync: §4; AMP rates, the
//! per-worker block formula (poplibs 1x1 convolution estimate), weight loads, supervisor overhead and
//! vector-unit rates: §5; host link: §6.
//!
//! A boolean is costed as the f16 the device holds it as.
//!
//! The simulated device times what it executes with its own model of the mechanisms (`device::timing`)
//! from these parameters; the estimates here are that model in closed form, for ranking plans.
//! `ipu-codegen calibrate` sets the device beside Graphcore's measured AMP curve and beside the
//! estimates.

mod assemble;
mod floor;
mod vector_ops;

pub use floor::MatmulFloor;

use crate::elements::DType;
use crate::isa::Activation;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub name: String,
    /// Tiles on the chip; supertile pairs are (2k, 2k+1).
    pub tiles: u32,
    pub columns: u32,
    pub clock_khz: u64,
    /// Worker threads per tile, barrel-scheduled: one instruction each per six tile cycles.
    pub workers: u32,
    /// AMP weight block: `amp_block_depth` input channels by `amp_block_width` output channels.
    pub amp_block_depth: u32,
    pub amp_block_width: u32,
    /// Output channels the AMP computes at once: 16 with f16 partials (`f16v4hihov4amp`), 8 with f32
    /// (`f16v4sisoamp`), so a block takes `amp_block_width / units` passes over the rows (§5).
    pub amp_units_f16_partials: u32,
    pub amp_units_f32_partials: u32,
    /// A worker's pass over its rows takes `amp_worker_fill_cycles + amp_row_cycles * rows` worker
    /// cycles: pipeline fill, drain and loop set-up, then four AMP bundles a row (poplibs' 1x1
    /// convolution worker estimate with state retention, `38 - 7 + (rows - 3) * 4`, §5).
    pub amp_worker_fill_cycles: u64,
    pub amp_row_cycles: u64,
    /// A pass of the workers over a vertex's rows: the supervisor starts them (`worker_pass_cycles`,
    /// poplibs' 6 per AMP pass) and waits for them, so a pass ends no sooner than
    /// `worker_sync_cycles` after its fastest worker (poplibs' "tag cost", 14). An AMP vertex makes
    /// a pass per weight block (two with f32 partials); a vector vertex of several passes pays both
    /// for each pass after its first.
    pub worker_sync_cycles: u64,
    pub worker_pass_cycles: u64,
    /// Supervisor cycles per weight block (its output-channel loop and pointers, 19) and per
    /// input-channel group after the first (its loop and the workers' retained state, 15 + 6 * 3):
    /// poplibs' `getConvPartial1x1SupervisorOuterLoopCycleEstimate` (§5). Per-block overheads are
    /// poplibs'; what a vertex costs beyond them is measured (below).
    pub amp_block_supervisor_cycles: u64,
    pub amp_depth_group_supervisor_cycles: u64,
    /// Per AMP vertex beyond the launch: the supervisor's set-up outside its block loops. Fitted: with
    /// the launch, the block's overheads, one weight load and the worker pass it makes a one-block
    /// vertex cost what Graphcore's measured curve shows (`calibrate`): 103 cycles, the best fit of
    /// all 128 published points, within 6.7 cycles of each. Poplibs' own estimate of a one-block
    /// vertex is 36 cycles below the curve; the curve, one block per vertex, cannot tell per-vertex
    /// from per-block costs, so poplibs' per-block terms are taken as published and the rest is
    /// charged once per vertex. The curve also repeats every 48 rows within ±7 cycles, which rows
    /// dealt whole to six workers do not reproduce.
    pub amp_vertex_supervisor_cycles: u64,
    /// AMP weight loads, bytes per tile cycle: 128-bit `ld128` from interleaved memory (§2, §5).
    pub weight_load_bytes_per_cycle: u64,
    /// Supervisor cycles to start any vertex (poplibs' `supervisorNonloopOverhead`, §3).
    pub vertex_overhead_cycles: u64,
    /// Vector unit: elements per tile cycle for add/mul/cast.
    pub vector_f16_lanes: u64,
    pub vector_f32_lanes: u64,
    /// Vector unit: f16 elements per tile cycle for exp/tanh.
    pub transcendental_f16_lanes: u64,
    /// Bytes one worker's load or store moves in one bundle: the 64-bit data path (§2); a 128-bit
    /// `ld128` load from interleaved memory, aligned to it, moves `wide_load_bytes` (§2).
    pub memory_access_bytes: u64,
    pub wide_load_bytes: u64,
    pub memory_base: u32,
    pub interleaved_base: u32,
    pub memory_end: u32,
    pub memory_element_bytes: u32,
    /// Bytes a tile sends, and receives, per cycle: one 32-bit word (`TEXCH_DATA_WIDTH 0x20`, §4).
    pub exchange_bytes_per_cycle: u32,
    /// Cycles from a mux switch's issue until the incoming mux listens to its new sender (the
    /// design brief's 1; `TEXCH_MUXPAIRWRITEDLY 1` of the Mk1 constants, §4).
    pub mux_switch_cycles: u32,
    /// Cycles between two exchange instructions' issues on one tile: a send, a mux switch or a delay
    /// each takes one issue slot. Assumed 1, stated rather than measured: the exchange code runs on
    /// the supervisor alone while no worker runs, `nop` "does nothing for one cycle" (Graphcore's
    /// ISA text, `ipu_assembly_support` `isa_doc_manual/hover/nop.md`), and a sender issuing its
    /// sends at compiled cycles one word a cycle (§4, the patents) needs a slot a cycle.
    pub exchange_issue_cycles: u32,
    /// Cycles from a word leaving its sender until the receiver can store it, the same on every
    /// path: `BNET_SENDTOEXCHOUTDLY 8` (send to the exchange's output) + `BNET_OPPOSIDE2COLBASEDLY
    /// 19` (across the exchange, the longer of its two crossings, `BNET_COLBASE2OPPOSIDEDLY` being
    /// 17) + `BNET_MINEXCHIN2LDDLY 2` (exchange input to the first load) = 29: the Mk1 constants
    /// extracted from Graphcore's SDK 3.4 libraries (Saghetti0/graphcore-ipu-research
    /// `research/ipu1/ipu1_consts.c`, reverse engineered, their meaning read from their names, §4).
    /// Latency depends on distance on the real chip (jia19, the patents), but no table of it was
    /// retrievable, so one constant stands for every path: the longest those figures describe. A
    /// phase's schedule is the same for any transit, its horizon moving with it cycle for cycle, so
    /// a run moves by this figure's error once per exchange phase (ARCHITECTURE.md gives the
    /// presets' cycles at 10 and at 29).
    pub exchange_transit_cycles: u32,
    /// Cycles of one internal sync, each superstep's end, charged alike by the device and by the
    /// compiler's estimate: 90, poplibs' own planner figure ("We also sync prior to each exchange
    /// which has approximately the same cost each time", `const auto syncCycles = 90` in
    /// `estimateCycles`, `lib/popnn/CTCLossPlan.cpp`, graphcore/poplibs, §4). Graphcore publishes
    /// no measured figure; platformxlab/elk's cost model script uses 118, a third party's constant
    /// without a stated source, so the vendor's is taken. `calibrate`'s sync case runs empty
    /// supersteps on the device against the estimate.
    pub sync_cycles: u64,
    pub host_link_bytes_per_second: u64,
}

/// A matmul epilogue as its cost sees it: the partials' type and how many parts (depth blocks) it
/// sums, a bias, an activation, a residual, and whether the output is stored transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpilogueCost {
    pub partials: DType,
    pub parts: u32,
    pub bias: bool,
    /// The bias runs down the rows (one value per row, as in a transposed matmul), not along them.
    pub bias_by_row: bool,
    pub activation: Option<Activation>,
    pub residual: bool,
    pub transposed: bool,
}

impl EpilogueCost {
    /// A worker's steps over its elements, each as (elements a vector, cycles a vector): unless the
    /// parts are `reduced` ([`EpilogueCost::summed`]), per extra part an add at the partials' width
    /// (3 cycles a vector as the chain's first step, 2 after) and a cast from f32 (2 cycles per 4);
    /// a bias add along the rows (3 or 2 per 4; one down the rows is charged by rows,
    /// [`Target::epilogue_cycles`]), the activation (GELU with tanh 5 cycles per 4 halves, with erf
    /// 15) and a residual add (3 or 2 per 4); an epilogue that only copies its one f16 part
    /// ([`EpilogueCost::copies`]) is charged by rows instead.
    pub fn steps(&self, reduced: bool) -> Vec<(u64, u64)> {
        let parts_width = if self.partials == DType::F16 { 4 } else { 2 };
        let mut steps = Vec::new();
        let mut first = !reduced;
        let mut push = |width: u64, on_first: u64, later: u64| {
            steps.push((width, if first { on_first } else { later }));
            first = false;
        };
        if !reduced {
            for _ in 1..self.parts.max(1) {
                push(parts_width, 3, 2);
            }
            if self.partials != DType::F16 {
                push(4, 2, 2);
            }
        }
        if self.bias && !self.bias_by_row {
            push(4, 3, 2);
        }
        match self.activation {
            None => {}
            Some(Activation::GeluTanh) => push(4, 5, 5),
            Some(Activation::GeluErf) => push(4, 15, 15),
        }
        if self.residual {
            push(4, 3, 2);
        }
        steps
    }

    /// A worker's cycles summing the parts into halves by reduction, past its entry: the loops of 4
    /// floats or 8 halves (one more per remainder bit) dealt to the workers, each a cycle a part per
    /// load of `lanes` elements and one more, and 6 (f32) or 8 (f16) besides; a remainder left over when the loops do not deal evenly costs
    /// `2 · parts` and 13 or 11 instead of a loop.
    pub fn summed(&self, elements: u64, workers: u64, lanes: u64) -> u64 {
        let float = self.partials != DType::F16;
        let (vector, besides, left) = if float { (4, 6, 13) } else { (8, 8, 11) };
        let parts = u64::from(self.parts);
        let per_part = vector / vector.min(lanes.max(1)) + 1;
        let loops = elements / vector + u64::from((elements % vector).count_ones());
        let (each, remainder) = match (loops % workers, elements % vector) {
            (0, _) => (loops / workers, 0),
            (_, 0) => (loops / workers + 1, 0),
            _ => (loops / workers, 2 * parts + left),
        };
        remainder + each * (per_part * parts + besides)
    }

    /// The launch of the chain's first step with `workers` workers: the supervisor's and each
    /// worker's entry (a reduction of the parts 32 a worker, an in-place add of parts 58, a cast
    /// 37, a bias or residual add 26, a bias down the rows 15, an activation 20).
    fn launch(&self, workers: u64, reduced: bool) -> u64 {
        let (per_worker, supervisor) = if reduced {
            (32, 0)
        } else if self.parts > 1 {
            (58, 11)
        } else if self.partials != DType::F16 {
            (37, 12)
        } else if self.bias && self.bias_by_row {
            (15, 11)
        } else if self.bias || self.residual {
            (26, 11)
        } else {
            (20, 9)
        };
        per_worker * workers + supervisor
    }

    /// Whether the epilogue only copies its one f16 part.
    pub fn copies(&self) -> bool {
        self.parts <= 1
            && self.partials == DType::F16
            && !self.bias
            && self.activation.is_none()
            && !self.residual
            && !self.transposed
    }
}

/// Peak flops per tile cycle with f16 inputs and f16 partials (64 MAC).
pub const PEAK_FLOP_PER_TILE_CYCLE: u64 = 128;

impl Target {
    /// Looks up a target preset by name.
    pub fn preset(name: &str) -> Option<Target> {
        let mk2 = |name: &str, clock_khz: u64| Target {
            name: name.to_string(),
            tiles: 1472,
            columns: 16,
            clock_khz,
            workers: 6,
            amp_block_depth: 16,
            amp_block_width: 16,
            amp_units_f16_partials: 16,
            amp_units_f32_partials: 8,
            amp_worker_fill_cycles: 19,
            amp_row_cycles: 4,
            worker_sync_cycles: 14,
            worker_pass_cycles: 6,
            amp_block_supervisor_cycles: 19,
            amp_depth_group_supervisor_cycles: 33,
            amp_vertex_supervisor_cycles: 103,
            weight_load_bytes_per_cycle: 16,
            vertex_overhead_cycles: 50,
            vector_f16_lanes: 4,
            vector_f32_lanes: 2,
            transcendental_f16_lanes: 2,
            memory_access_bytes: 8,
            wide_load_bytes: 16,
            memory_base: 0x4C000,
            interleaved_base: 0x80000,
            memory_end: 0xE8000,
            memory_element_bytes: 16 * 1024,
            exchange_bytes_per_cycle: 4,
            mux_switch_cycles: 1,
            exchange_issue_cycles: 1,
            exchange_transit_cycles: 29,
            sync_cycles: 90,
            host_link_bytes_per_second: 64_000_000_000,
        };
        match name {
            "mk2-1500" => Some(mk2(name, 1_500_000)),
            "gc200" => Some(mk2(name, 1_330_000)),
            "bow" => Some(mk2(name, 1_850_000)),
            _ => None,
        }
    }

    pub const PRESETS: [&'static str; 3] = ["mk2-1500", "gc200", "bow"];

    pub fn clock_hz(&self) -> f64 {
        self.clock_khz as f64 * 1e3
    }

    pub fn peak_tflops(&self) -> f64 {
        self.tiles as f64 * PEAK_FLOP_PER_TILE_CYCLE as f64 * self.clock_hz() / 1e12
    }

    pub fn is_interleaved(&self, address: u32) -> bool {
        address >= self.interleaved_base
    }

    pub fn memory_element(&self, address: u32) -> u32 {
        (address - self.memory_base) / self.memory_element_bytes
    }

    /// The estimate of one AMP matmul vertex, in tile cycles: `rows` x `depth` times `depth` x `cols`,
    /// weight-stationary over 16x16 blocks, rows shared among the workers (the device's mechanism,
    /// `device::timing::amp`, in closed form).
    pub fn amp_cycles(&self, rows: u32, depth: u32, cols: u32, partials: DType) -> u64 {
        if rows == 0 || depth == 0 || cols == 0 {
            return self.vertex_overhead_cycles;
        }
        let depth_groups = u64::from(depth.div_ceil(self.amp_block_depth));
        let blocks = depth_groups * u64::from(cols.div_ceil(self.amp_block_width));
        let slowest = rows.div_ceil(self.workers);
        let fastest = (rows / self.workers).max(1);
        let worker =
            |rows: u32| self.amp_worker_fill_cycles + self.amp_row_cycles * u64::from(rows);
        let workers = u64::from(self.workers);
        let pass = self.supervised_pass(workers * worker(slowest), workers * worker(fastest));
        let block_bytes = u64::from(self.amp_block_depth * self.amp_block_width) * 2;
        let weight_load = block_bytes.div_ceil(self.weight_load_bytes_per_cycle);
        let block = self.amp_block_supervisor_cycles
            + weight_load
            + u64::from(self.amp_passes(partials)) * pass;
        self.vertex_overhead_cycles
            + self.amp_vertex_supervisor_cycles
            + blocks * block
            + (depth_groups - 1) * self.amp_depth_group_supervisor_cycles
    }

    /// Passes over the rows per weight block: the block's output channels over the AMP's units.
    pub fn amp_passes(&self, partials: DType) -> u32 {
        let units = match partials {
            DType::F16 | DType::Bool => self.amp_units_f16_partials,
            DType::F32 | DType::I64 => self.amp_units_f32_partials,
        };
        self.amp_block_width.div_ceil(units.max(1))
    }

    /// A pass the supervisor starts the workers on, given its slowest and fastest worker's tile
    /// cycles: it ends no sooner than the supervisor's wait after the fastest.
    fn supervised_pass(&self, slowest: u64, fastest: u64) -> u64 {
        self.worker_pass_cycles + slowest.max(fastest + self.worker_sync_cycles)
    }

    /// The estimate of a matmul epilogue over `rows x cols` outputs, in closed form: one codelet's
    /// launch (the supervisor's and each worker's entry), several parts summed by in-place adds or
    /// by a reduction ([`EpilogueCost::summed`]), whichever is cheaper, then each worker's share of
    /// the elements at the summed cost per element of the steps Poplar would chain
    /// ([`EpilogueCost::steps`], each rounded to whole vectors), the tile waiting `workers` cycles a worker cycle, and a
    /// non-linearity's fill and drain; a bias down the rows is charged per row; a transposed output adds its rows' transposes, a grain of 4x4 elements costing 4 cycles; a
    /// copy is a run a row (35 cycles, one per 4 bytes, 5 per byte left over), whole rows dealt to
    /// the workers.
    /// `device::timing::epilogue` charges the same work from poplibs' codelet estimates.
    pub fn epilogue_cycles(&self, rows: u32, cols: u32, e: &EpilogueCost) -> u64 {
        let workers = u64::from(self.workers.max(1));
        if e.copies() {
            // A row at a time: 35 cycles, one per 4 bytes and 5 per byte left over.
            let bytes = 2 * u64::from(cols);
            let per_row = 35 + bytes / 4 + bytes % 4 * 5;
            return workers * (12 + u64::from(rows).div_ceil(workers) * per_row);
        }
        let n = u64::from(rows) * u64::from(cols);
        let share = n.div_ceil(workers);
        // The parts summed by in-place adds and a cast, or by one reduction: the cheaper.
        let sum = |reduced: bool| {
            let per_worker: u64 = (e.steps(reduced).iter())
                .map(|&(width, cycles)| share.div_ceil(width) * cycles)
                .sum();
            // A cast ends on its remainder: about 4 cycles.
            let tail = if e.partials == DType::F16 || reduced {
                0
            } else {
                4
            };
            let lanes = match e.partials {
                DType::F16 | DType::Bool => self.vector_f16_lanes,
                DType::F32 | DType::I64 => self.vector_f32_lanes,
            };
            let summed = if reduced {
                e.summed(n, workers, lanes)
            } else {
                0
            };
            e.launch(workers, reduced) + workers * (summed + per_worker + tail)
        };
        let mut cycles = if e.parts > 1 {
            sum(false).min(sum(true))
        } else {
            sum(false)
        };
        // A non-linearity's pipeline fills and drains once a worker.
        cycles += workers
            * match e.activation {
                None => 0,
                Some(Activation::GeluTanh) => 12,
                Some(Activation::GeluErf) => 22,
            };
        if e.bias && e.bias_by_row {
            // Down the rows: a row a worker when a row is short of a vector per worker, else each
            // row shared; an outer loop of 7 cycles a row, 25 when a row is no whole vectors.
            let (rows, cols) = (u64::from(rows), u64::from(cols));
            let lanes = self.vector_f16_lanes.max(1);
            let outer = if cols.is_multiple_of(lanes) { 7 } else { 25 };
            let (loops, elements) = if cols < workers * lanes {
                (rows.div_ceil(workers), cols)
            } else {
                (rows, cols.div_ceil(workers))
            };
            cycles += workers * loops * (outer + 2 * elements.div_ceil(lanes));
        }
        if e.transposed {
            let grains = u64::from(rows).div_ceil(4 * workers) * u64::from(cols).div_ceil(4);
            cycles += workers * (50 + 4 * grains);
        }
        cycles
    }

    /// The estimate of a layer norm over `rows x cols` f16 elements, in closed form: one launch,
    /// then per worker its rows' two reductions (a cycle per vector of 4 and 12 per row each) and
    /// their statistics (about 10 cycles a row, by vectors of two floats); the mean subtracted and the scale, each row shared by
    /// the workers when it is at least a vector per worker (8 cycles a row and half a cycle per
    /// element), else whole rows dealt to them; gamma and beta at 2 cycles per vector each.
    pub fn layer_norm_cycles(&self, rows: u32, cols: u32) -> u64 {
        let workers = u64::from(self.workers.max(1));
        let lanes = self.vector_f16_lanes.max(1);
        let (rows, cols) = (u64::from(rows), u64::from(cols));
        let share = rows.div_ceil(workers);
        // The sums' scaling, the variance (two float steps) and the inverse standard deviation (12
        // cycles per two rows), two floats a vector.
        let halves = share.div_ceil(2);
        let statistics =
            share * 2 * (cols.div_ceil(lanes) + 12) + 2 * share + 4 * halves + 12 * halves;
        let whitening = 2 * self.row_broadcast(rows, cols);
        let affine = 2 * 2 * (rows * cols).div_ceil(workers).div_ceil(lanes);
        17 * workers + workers * (statistics + whitening + affine)
    }

    /// The estimate of a column block's moments of a split layer norm (`rows x cols` f16), in closed
    /// form: one launch, then per worker its rows' two reductions (as [`Self::layer_norm_cycles`]),
    /// the means' scaling (two floats a vector) and the means subtracted (8 cycles a row and half a
    /// cycle per element, each row shared by the workers when it is at least a vector per worker).
    pub fn layer_norm_moments_cycles(&self, rows: u32, cols: u32) -> u64 {
        let workers = u64::from(self.workers.max(1));
        let (rows, cols) = (u64::from(rows), u64::from(cols));
        let share = rows.div_ceil(workers);
        let reductions = share * 2 * (cols.div_ceil(self.vector_f16_lanes.max(1)) + 12);
        let scale = 2 * share.div_ceil(2);
        17 * workers + workers * (reductions + scale + self.row_broadcast(rows, cols))
    }

    /// The estimate of a column block of a split layer norm over `blocks` blocks, in closed form: one
    /// launch, then per worker its rows' combination of the blocks' moments (two reductions over the
    /// blocks, 12 cycles a row each, a cycle per whole vector of four and 2 for an odd count; four
    /// float steps over the rows' blocks and two over the rows, 2 cycles per two floats; the inverse
    /// standard deviation, 12 cycles per two rows), then the mean subtracted, the scale, gamma and beta as in
    /// [`Self::layer_norm_cycles`].
    pub fn layer_norm_apply_cycles(&self, rows: u32, cols: u32, blocks: u32) -> u64 {
        let workers = u64::from(self.workers.max(1));
        let lanes = self.vector_f16_lanes.max(1);
        let (rows, cols, blocks) = (u64::from(rows), u64::from(cols), u64::from(blocks));
        let share = rows.div_ceil(workers);
        let reductions = 2 * (share * (blocks / lanes + 12) + 2 * (blocks & 1));
        let floats = 2 * 4 * (rows * blocks).div_ceil(workers).div_ceil(2)
            + 2 * 2 * share.div_ceil(2)
            + 12 * share.div_ceil(2);
        let affine = 2 * 2 * (rows * cols).div_ceil(workers).div_ceil(lanes);
        17 * workers + workers * (reductions + floats + 2 * self.row_broadcast(rows, cols) + affine)
    }

    /// One per-row broadcast (a mean subtracted, a scale) over `rows x cols` halves, per worker: each
    /// row shared by the workers when it is at least a vector per worker (8 cycles a row and half a
    /// cycle per element), else whole rows dealt to them.
    fn row_broadcast(&self, rows: u64, cols: u64) -> u64 {
        let workers = u64::from(self.workers.max(1));
        if cols >= workers * self.vector_f16_lanes.max(1) {
            rows * (8 + cols.div_ceil(workers).div_ceil(2))
        } else {
            rows.div_ceil(workers) * (8 + cols.div_ceil(2))
        }
    }

    /// The estimate of one online-softmax block over `keys x queries` scoresᵀ of type `scores`, in
    /// closed form: one launch (a strided reduction's, 16 cycles a worker), then per worker its share
    /// of the queries (whole 64-bit grains) reduced over the keys twice, for the maximum and for the
    /// sum (an outer loop per 64 bits of results: 6 cycles, the result's store, a cycle per further
    /// key), its share of the scores in whole vectors for the scale, the maximum's subtraction, the
    /// key bias and the causal mask (2 cycles a vector each), for float scores the cast to half (2
    /// cycles per 4 and 4 for the rest), and the exponential of halves (4 cycles per 4);
    /// after the first block, its queries' running maximum, rescale factor and sum (five float
    /// steps of 2 cycles a vector and an exponential).
    pub fn softmax_cycles(
        &self,
        keys: u32,
        queries: u32,
        scores: DType,
        causal: bool,
        biased: bool,
        first: bool,
    ) -> u64 {
        let workers = u64::from(self.workers.max(1));
        let (keys, queries) = (u64::from(keys), u64::from(queries));
        let n = keys * queries;
        let float_scores = scores != DType::F16;
        let reduce = |grain: u64, store: u64| {
            let share = queries.div_ceil(grain).div_ceil(workers) * grain;
            // Results a loop: as many of the grain as the stride (the queries) keeps aligned.
            let per_loop = (1..=grain)
                .rev()
                .find(|&e| grain.is_multiple_of(e) && queries.is_multiple_of(e))
                .unwrap_or(1);
            share.div_ceil(per_loop) * (6 + store + keys - 1)
        };
        let max = if float_scores {
            reduce(2, 4)
        } else {
            reduce(4, 8)
        };
        let sum = reduce(4, 7);
        let share = n.div_ceil(workers);
        let width = if float_scores { 2 } else { 4 };
        let per_score = 2 + u64::from(biased) + u64::from(causal);
        let scores_work = per_score * share.div_ceil(width) * 2
            + if float_scores { 2 * (share / 4) + 4 } else { 0 }
            + share.div_ceil(4) * 4;
        let query_vectors = queries.div_ceil(workers).div_ceil(2);
        let running = if first {
            0
        } else {
            5 * query_vectors * 2 + query_vectors * 6
        };
        16 * workers + workers * (max + sum + scores_work + running)
    }

    /// The estimate of rescaling a flash accumulator of `rows x cols` floats and adding a block's
    /// partials, in closed form: one launch (29 cycles a worker), then per worker its share of the
    /// elements in vectors of two floats, 3 cycles a vector for the rescale and 2 for the add; the
    /// first block copies float partials a row at a time (35 cycles and one per 4 bytes) or casts
    /// half ones (37 cycles a worker to launch, one per two elements).
    pub fn accumulate_cycles(&self, rows: u32, cols: u32, first: bool, partials: DType) -> u64 {
        let workers = u64::from(self.workers.max(1));
        let (rows, cols) = (u64::from(rows), u64::from(cols));
        let share = (rows * cols).div_ceil(workers);
        match (first, partials) {
            (true, DType::F16) => 12 + workers * 37 + workers * (share / 2 + 1 + 2 * (share % 2)),
            (true, _) => workers * (12 + rows.div_ceil(workers) * (35 + cols)),
            (false, _) => 29 * workers + 11 + workers * share.div_ceil(2) * (3 + 2),
        }
    }

    /// The estimate of merging `parts` flash states of `rows` accumulator rows into the half output
    /// over `queries` queries, in closed form: one launch (29 cycles a worker), then per worker, over
    /// its share of the queries in vectors of two floats, each state's weight (three steps of 2
    /// cycles a vector, the first 3, and an exponential of 6) and the sum's reciprocal (6); over its
    /// share of the accumulators, the first state weighted, each further one weighted and added,
    /// the result scaled (2 cycles a vector each) and cast to half (2 cycles per 4 and 4); a
    /// transposed output adds its rows' transposes, a grain of 4x4 elements costing 4 cycles.
    pub fn combine_cycles(&self, parts: u32, rows: u32, queries: u32, transposed: bool) -> u64 {
        let workers = u64::from(self.workers.max(1));
        let parts = u64::from(parts.max(1));
        let (rows, queries) = (u64::from(rows), u64::from(queries));
        let query_vectors = queries.div_ceil(workers).div_ceil(2);
        let weights = parts * query_vectors * (3 * 2 + 6) + query_vectors + query_vectors * 6;
        let share = (rows * queries).div_ceil(workers);
        let vectors = share.div_ceil(2);
        let merge = vectors * 2 * (1 + 2 * (parts - 1) + 1) + 2 * (share / 4) + 4;
        let mut cycles = 29 * workers + 11 + workers * (weights + merge);
        if transposed {
            let grains = rows.div_ceil(4 * workers) * queries.div_ceil(4);
            cycles += workers * (50 + 4 * grains);
        }
        cycles
    }

    /// The estimate of the syncs of `supersteps` supersteps: one internal sync ends each.
    pub fn sync_estimate(&self, supersteps: u64) -> u64 {
        supersteps.saturating_mul(self.sync_cycles)
    }

    /// Cycles to move `bytes` over the exchange at one tile's send rate, in whole words.
    pub fn exchange_words(&self, bytes: u64) -> u64 {
        bytes.div_ceil(u64::from(self.exchange_bytes_per_cycle))
    }

    pub fn host_link_microseconds(&self, bytes: u64) -> f64 {
        bytes as f64 / self.host_link_bytes_per_second as f64 * 1e6
    }

    /// `ipu-codegen target`: the model as a table.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let mut line = |k: &str, v: String| {
            let _ = writeln!(s, "{k:<34} {v}");
        };
        line("target", self.name.clone());
        line(
            "tiles",
            format!(
                "{} ({} columns; supertile pairs (2k, 2k+1))",
                self.tiles, self.columns
            ),
        );
        line("clock", format!("{} MHz", self.clock_khz as f64 / 1e3));
        line(
            "peak",
            format!("{:.3} TFLOPs (f16 in, f16 partials)", self.peak_tflops()),
        );
        line("workers per tile", self.workers.to_string());
        line(
            "AMP block",
            format!(
                "{}x{} weights, 64 MAC/cycle f16 partials, 32 MAC/cycle f32 partials",
                self.amp_block_depth, self.amp_block_width
            ),
        );
        line(
            "AMP passes per block",
            format!(
                "{} (f16 partials), {} (f32 partials)",
                self.amp_passes(DType::F16),
                self.amp_passes(DType::F32)
            ),
        );
        line(
            "AMP worker cycles per pass",
            format!(
                "{} + {}*rows; the supervisor waits {} after the fastest worker",
                self.amp_worker_fill_cycles, self.amp_row_cycles, self.worker_sync_cycles
            ),
        );
        line(
            "AMP supervisor cycles",
            format!(
                "{} per vertex, {} per block, {} per pass, {} per input-channel group after the first",
                self.amp_vertex_supervisor_cycles,
                self.amp_block_supervisor_cycles,
                self.worker_pass_cycles,
                self.amp_depth_group_supervisor_cycles
            ),
        );
        line(
            "AMP weight load",
            format!("{} B/cycle", self.weight_load_bytes_per_cycle),
        );
        line(
            "vertex overhead",
            format!("{} cycles", self.vertex_overhead_cycles),
        );
        line(
            "vector unit",
            format!(
                "{} f16 / {} f32 lanes per cycle; exp/tanh {} f16 lanes per cycle",
                self.vector_f16_lanes, self.vector_f32_lanes, self.transcendental_f16_lanes
            ),
        );
        line(
            "loads and stores",
            format!(
                "{} B a 64-bit access; {} B a 128-bit load from interleaved memory",
                self.memory_access_bytes, self.wide_load_bytes
            ),
        );
        line(
            "memory",
            format!(
                "[{:#x}, {:#x}) per tile ({} KiB); interleaved from {:#x}; {} KiB elements",
                self.memory_base,
                self.memory_end,
                (self.memory_end - self.memory_base) / 1024,
                self.interleaved_base,
                self.memory_element_bytes / 1024
            ),
        );
        line(
            "exchange",
            format!(
                "{} B/cycle send and receive per tile; mux switch {} cycle; an instruction issued \
                 every {} cycle; transit {} cycles",
                self.exchange_bytes_per_cycle,
                self.mux_switch_cycles,
                self.exchange_issue_cycles,
                self.exchange_transit_cycles
            ),
        );
        line("sync", format!("{} cycles per superstep", self.sync_cycles));
        line(
            "host link",
            format!("{} GB/s", self.host_link_bytes_per_second / 1_000_000_000),
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_matches_the_seed() {
        let t = Target::preset("mk2-1500").unwrap();
        assert!((t.peak_tflops() - 282.624).abs() < 1e-9);
    }

    #[test]
    fn a_causal_mask_and_a_key_bias_each_cost_an_element_wise_step_per_score() {
        let t = Target::preset("mk2-1500").unwrap();
        let open = t.softmax_cycles(120, 16, DType::F16, false, false, false);
        // 1,920 scores, 320 a worker: 80 vectors of four halves at 2 cycles each, six workers.
        let causal = t.softmax_cycles(120, 16, DType::F16, true, false, false);
        assert_eq!(causal - open, 6 * 80 * 2);
        let biased = t.softmax_cycles(120, 16, DType::F16, false, true, false);
        assert_eq!(biased - open, 6 * 80 * 2);
        // The first block keeps no running maximum or sum: 16 queries, 3 a worker, two vectors
        // of floats, five steps of 2 cycles a vector and an exponential of 6.
        let first = t.softmax_cycles(120, 16, DType::F16, false, false, true);
        assert_eq!(open - first, 6 * (5 * 2 * 2 + 2 * 6));
    }

    #[test]
    fn amp_cost_follows_the_per_worker_formula() {
        let t = Target::preset("mk2-1500").unwrap();
        // 48 rows -> 8 rows per worker, all equal, so the supervisor's wait shows; one 16x16 block,
        // one pass: 50 + 103 + 19 + 32 + 6 + 6*(19 + 4*8) + 14.
        assert_eq!(
            t.amp_cycles(48, 16, 16, DType::F16),
            50 + 103 + 19 + 32 + 6 + 6 * (19 + 32) + 14
        );
        // f32 partials: eight units, two passes of the same length.
        assert_eq!(
            t.amp_cycles(48, 16, 16, DType::F32),
            50 + 103 + 19 + 32 + 2 * (6 + 6 * (19 + 32) + 14)
        );
        // Eight rows: workers of two and one rows, 24 tile cycles apart, hide the wait; two depth
        // groups, so one group's overhead.
        assert_eq!(
            t.amp_cycles(8, 32, 16, DType::F16),
            50 + 103 + 2 * (19 + 32 + 6 + 6 * (19 + 8)) + 33
        );
    }

    #[test]
    fn an_epilogue_costs_its_launch_and_each_step_per_element() {
        let t = Target::preset("mk2-1500").unwrap();
        let gelu = EpilogueCost {
            partials: DType::F16,
            parts: 1,
            bias: false,
            bias_by_row: false,
            activation: Some(Activation::GeluTanh),
            residual: false,
            transposed: false,
        };
        // 6 rows of 64: 64 elements a worker at 5 cycles per 4 halves and the pipeline's 12, after
        // popnn's launch.
        assert_eq!(
            t.epilogue_cycles(6, 64, &gelu),
            20 * 6 + 9 + 6 * (64 * 5 / 4 + 12)
        );
        // A bias first (3 cycles per 4), then GELU.
        let biased = EpilogueCost { bias: true, ..gelu };
        assert_eq!(
            t.epilogue_cycles(6, 64, &biased),
            26 * 6 + 11 + 6 * (64 * 8 / 4 + 12)
        );
        // Nothing to apply: a copy, a 128-byte run a row.
        let copy = EpilogueCost {
            activation: None,
            ..gelu
        };
        assert_eq!(t.epilogue_cycles(6, 64, &copy), 6 * (12 + 35 + 32));
    }
}
