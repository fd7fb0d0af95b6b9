//! The reference target model (`mk2-1500` and its siblings) as data, plus the compiler's closed-form
//! cost estimates. Every number here is hashed into every action key, so a change to the model
//! recomputes everything that depends on it.
//!
//! Sources for each figure (sections of `research/ipu-hardware.md` beside the design brief; the brief's
//! §4 table fixes the defaults): tiles, clock and peak: §1; memory map, elements, interleaving and
//! alignment: §2; workers and barrel scheduling: §3; exchange rates, mux switch, multicast, supertile
//! pairs, transit and sync: §4; AMP rates, the per-worker block formula (poplibs 1x1 convolution
//! estimate), weight loads, supervisor overhead and vector-unit rates: §5; host link: §6.
//!
//! A boolean is costed as the f16 the device holds it as.
//!
//! The simulated device times what it executes with its own model of the mechanisms (`device::timing`)
//! from these parameters; the estimates here are that model in closed form, for ranking plans.
//! `ipu-codegen calibrate` sets the device beside Graphcore's measured AMP curve and beside the
//! estimates.

mod assemble;
mod vector_ops;

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
    pub exchange_bytes_per_cycle: u32,
    pub mux_switch_cycles: u32,
    pub exchange_transit_cycles: u32,
    pub sync_cycles: u64,
    pub host_link_bytes_per_second: u64,
}

/// What a vector vertex does per element and per row, for [`Target::vector_cycles`]; nothing at f16
/// width by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorCost {
    /// The width of the per-element operations.
    pub dtype: DType,
    pub ops: u64,
    pub transcendentals: u64,
    /// Bytes loaded and stored per element, one access each `memory_access_bytes`.
    pub bytes: u64,
    /// The vertex's other accesses, in bytes of whole accesses (a bias or gamma row loaded once; an
    /// epilogue's every access, counted per row), shared among the workers in proportion to their
    /// rows.
    pub vertex_bytes: u64,
    /// Per row: f32 operations and transcendentals, and accesses (for a row's whole stored rows, each
    /// rounded up to whole accesses as the device counts them).
    pub row_ops: u64,
    pub row_transcendentals: u64,
    pub row_accesses: u64,
    /// What every worker with rows does itself beside them: f32 operations, transcendentals and bytes
    /// loaded.
    pub worker_ops: u64,
    pub worker_transcendentals: u64,
    pub worker_bytes: u64,
}

impl Default for VectorCost {
    fn default() -> VectorCost {
        VectorCost {
            dtype: DType::F16,
            ops: 0,
            transcendentals: 0,
            bytes: 0,
            vertex_bytes: 0,
            row_ops: 0,
            row_transcendentals: 0,
            row_accesses: 0,
            worker_ops: 0,
            worker_transcendentals: 0,
            worker_bytes: 0,
        }
    }
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
    /// Lane operations and transcendentals per output element: an add per extra part, a cast unless
    /// one f16 part is the sum, a bias add, the activation and a residual add. GELU with tanh takes
    /// six lane operations and a tanh, the loop of poplibs' `NonLinearityLoop_gelu.S` (x², x³, one
    /// `f16v4mix` for the tanh's argument, add 1, halve, times x); GELU with erf, which has no
    /// instruction, seven and an erf.
    pub fn ops(&self) -> (u64, u64) {
        let parts = u64::from(self.parts.max(1));
        let cast = u64::from(self.partials != DType::F16 || parts > 1);
        let activation = match self.activation {
            None => 0,
            Some(Activation::GeluTanh) => 6,
            Some(Activation::GeluErf) => 7,
        };
        let ops = parts - 1 + cast + u64::from(self.bias) + activation + u64::from(self.residual);
        (ops, u64::from(self.activation.is_some()))
    }
}

/// Lane operations per score of the online softmax's pass for the probabilities, beside the exp
/// (f16, `f16v2exp`): the scaled subtraction of the maximum, one `f16v4mix` on f16 scores (the
/// instruction poplibs' GELU forms its tanh's argument with) and the probability's f32 sum, one
/// `f16v4acc` into the worker's f32 accumulators (as poplibs' half-to-float `ReduceAdd`); f32
/// scores are subtracted at f32 width and take a cast to f16 for the exp.
pub fn softmax_probability_ops(scores: DType) -> u64 {
    match scores {
        DType::F16 | DType::Bool => 2,
        DType::F32 | DType::I64 => 3,
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
            exchange_transit_cycles: 10,
            sync_cycles: 118,
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

    /// The estimate of a vector-unit vertex over `rows` rows of `cols` elements: per element `ops` lane
    /// operations at `dtype` width, `transcendentals` exp/tanh and `bytes` loaded and stored; per row
    /// `row_ops` more f32 operations. The rows are dealt to the workers; a worker's bundles are the larger
    /// of its operations over the lane width and its bytes over one access, and the slowest worker sets
    /// the time (the device's mechanism, `device::timing::vector`, in closed form).
    pub fn vector_cycles(&self, rows: u32, cols: u32, work: VectorCost) -> u64 {
        self.vertex_overhead_cycles + self.vector_pass(rows, cols, &work).0
    }

    /// A later pass of a vertex's workers over `rows` rows of `cols` elements: the supervisor starts
    /// them and ends the pass no sooner than its wait after the fastest (`device::timing::passes`).
    pub fn later_pass_cycles(&self, rows: u32, cols: u32, work: VectorCost) -> u64 {
        let (slowest, fastest) = self.vector_pass(rows, cols, &work);
        self.supervised_pass(slowest, fastest)
    }

    /// A pass the supervisor starts the workers on, given its slowest and fastest worker's tile
    /// cycles: it ends no sooner than the supervisor's wait after the fastest.
    fn supervised_pass(&self, slowest: u64, fastest: u64) -> u64 {
        self.worker_pass_cycles + slowest.max(fastest + self.worker_sync_cycles)
    }

    /// Tile cycles of the slowest and the fastest worker with rows in a pass doing `work`.
    fn vector_pass(&self, rows: u32, cols: u32, work: &VectorCost) -> (u64, u64) {
        if rows == 0 {
            return (0, 0);
        }
        let bundles = |worker_rows: u64| {
            let elements = worker_rows * u64::from(cols);
            let lanes = match work.dtype {
                DType::F16 | DType::Bool => self.vector_f16_lanes,
                DType::F32 | DType::I64 => self.vector_f32_lanes,
            };
            let compute = (elements * work.ops).div_ceil(lanes)
                + (worker_rows * work.row_ops).div_ceil(self.vector_f32_lanes)
                + (elements * work.transcendentals + worker_rows * work.row_transcendentals)
                    .div_ceil(self.transcendental_f16_lanes)
                + work.worker_ops.div_ceil(self.vector_f32_lanes)
                + work
                    .worker_transcendentals
                    .div_ceil(self.transcendental_f16_lanes);
            let memory = (elements * work.bytes).div_ceil(self.memory_access_bytes)
                + (work.vertex_bytes.div_ceil(self.memory_access_bytes) * worker_rows)
                    .div_ceil(u64::from(rows.max(1)))
                + work.worker_bytes.div_ceil(self.memory_access_bytes)
                + worker_rows * work.row_accesses;
            u64::from(self.workers) * compute.max(memory)
        };
        (
            bundles(u64::from(rows.div_ceil(self.workers))),
            bundles(u64::from((rows / self.workers).max(1))),
        )
    }

    /// The 64-bit grains of `vector_f16_lanes` elements the workers of an epilogue over `rows x
    /// cols` share, each row's own (poplibs' `DIVIDE_BY_WORKER` deals elementwise work so).
    pub fn epilogue_grains(&self, rows: u32, cols: u32) -> u64 {
        u64::from(rows) * u64::from(cols).div_ceil(self.vector_f16_lanes)
    }

    /// The estimate of a matmul epilogue over `rows x cols` outputs: its operations
    /// ([`EpilogueCost::ops`]) at f16 width over its grains ([`Target::epilogue_grains`]), against
    /// the accesses it makes as the device counts them, whole ones per row: its own AMP partials
    /// loaded from interleaved memory (128-bit loads), the other parts likewise when they lie there
    /// (`interleaved_parts`) and 64 bits at a time when not, the residual loaded and the output
    /// stored (64-bit), or a transposed output stored a row per column; the bias loaded once. The
    /// workers share the accesses as they share the grains.
    pub fn epilogue_cycles(
        &self,
        rows: u32,
        cols: u32,
        e: &EpilogueCost,
        interleaved_parts: bool,
    ) -> u64 {
        let (ops, transcendentals) = e.ops();
        let (rows64, cols64) = (u64::from(rows), u64::from(cols));
        let access = self.memory_access_bytes;
        let narrow = |bytes: u64| bytes.div_ceil(access);
        let partials_row = cols64 * u64::from(e.partials.bytes());
        let other_parts = u64::from(e.parts.max(1) - 1);
        let wide = partials_row.div_ceil(self.wide_load_bytes);
        let per_row = wide
            + other_parts
                * if interleaved_parts {
                    wide
                } else {
                    narrow(partials_row)
                }
            + u64::from(e.residual) * narrow(2 * cols64)
            + if e.transposed { 0 } else { narrow(2 * cols64) };
        let once = match (e.bias, e.bias_by_row) {
            (false, _) => 0,
            (true, false) => narrow(2 * cols64),
            (true, true) => narrow(2 * rows64),
        } + if e.transposed {
            cols64 * narrow(2 * rows64)
        } else {
            0
        };
        let grains = self.epilogue_grains(rows, cols);
        self.vector_cycles(
            u32::try_from(grains).unwrap_or(u32::MAX),
            self.vector_f16_lanes as u32,
            VectorCost {
                dtype: DType::F16,
                ops,
                transcendentals,
                vertex_bytes: (rows64 * per_row + once) * access,
                ..VectorCost::default()
            },
        )
    }

    /// The estimate of a layer norm over `rows x cols` f16 elements, in f32: per element a sum, a
    /// subtraction, a square-and-add, a scale, a gamma multiply, a beta add and a cast (seven f32 lane
    /// operations), an f16 load and store; per row eight operations for the mean, the variance and one
    /// reciprocal square root; gamma and beta loaded once.
    pub fn layer_norm_cycles(&self, rows: u32, cols: u32) -> u64 {
        self.vector_cycles(
            rows,
            cols,
            VectorCost {
                dtype: DType::F32,
                ops: 7,
                row_ops: 8,
                bytes: 4,
                vertex_bytes: 4 * u64::from(cols),
                ..VectorCost::default()
            },
        )
    }

    /// The estimate of one online-softmax block over `keys x queries` scores of type `scores`
    /// (`device::timing::passes` in closed form): four passes of the workers, over the keys for each
    /// query's maximum (a max per score, loaded from the AMP's interleaved partials), over the queries
    /// to merge the workers' maxima and find the rescale factor (a merge per worker with keys, three
    /// f32 operations and an exp; the running max and sum loaded, the factor stored), over the keys
    /// again for the probabilities ([`softmax_probability_ops`] and an exp per score, the score loaded
    /// again and its probability stored), and over the queries to merge the sums
    /// (a merge per worker with keys and two operations; the running max and sum stored). Under a key
    /// bias (`biased`) each score's operations in both passes over the keys gain a bias add, and each
    /// pass loads the bias row; under a causal mask each key row a select, one bundle.
    pub fn softmax_cycles(
        &self,
        keys: u32,
        queries: u32,
        scores: DType,
        causal: bool,
        biased: bool,
    ) -> u64 {
        let merges = u64::from(keys.min(self.workers).max(1)) - 1;
        // Whole accesses per key row, as the device counts them: the row's scores (AMP partials,
        // interleaved: 128-bit loads), and in the second pass over the keys its probabilities stored.
        let scores_row =
            (u64::from(queries) * u64::from(scores.bytes())).div_ceil(self.wide_load_bytes);
        let probabilities_row = (2 * u64::from(queries)).div_ceil(self.memory_access_bytes);
        // The key bias, one f16 per key, loaded by both passes over the keys.
        let key_bias = if biased {
            (2 * u64::from(keys)).next_multiple_of(self.memory_access_bytes)
        } else {
            0
        };
        let over_keys = |ops: u64, transcendentals: u64, row_accesses: u64| VectorCost {
            dtype: scores,
            ops: ops + u64::from(biased),
            transcendentals,
            row_ops: if causal { self.vector_f32_lanes } else { 0 },
            row_accesses,
            vertex_bytes: key_bias,
            ..VectorCost::default()
        };
        let over_queries = |ops: u64, transcendentals: u64, bytes: u64| VectorCost {
            dtype: DType::F32,
            ops,
            transcendentals,
            bytes,
            ..VectorCost::default()
        };
        self.vector_cycles(keys, queries, over_keys(1, 0, scores_row))
            + self.later_pass_cycles(queries, 1, over_queries(merges + 3, 1, 12))
            + self.later_pass_cycles(
                keys,
                queries,
                over_keys(
                    softmax_probability_ops(scores),
                    1,
                    scores_row + probabilities_row,
                ),
            )
            + self.later_pass_cycles(queries, 1, over_queries(merges + 2, 0, 8))
    }

    /// The estimate of rescaling an f32 accumulator of `rows x cols` and adding a block's partials of
    /// type `partials`: a multiply and an add per element; per row the partials loaded (AMP partials,
    /// interleaved: 128-bit loads), the accumulator loaded and stored (64-bit accesses; the first block
    /// copies the partials, loading no accumulator), whole accesses per row as the device counts them.
    /// An accumulator that lands in interleaved memory with 16-byte rows loads faster on the device;
    /// the estimate does not count on it.
    pub fn accumulate_cycles(&self, rows: u32, cols: u32, first: bool, partials: DType) -> u64 {
        let cols_bytes = |bytes: u64| u64::from(cols) * bytes;
        let partials_row = cols_bytes(u64::from(partials.bytes())).div_ceil(self.wide_load_bytes);
        let state_row = cols_bytes(4).div_ceil(self.memory_access_bytes);
        self.vector_cycles(
            rows,
            cols,
            VectorCost {
                dtype: DType::F32,
                ops: if first { 1 } else { 2 },
                row_accesses: partials_row + if first { state_row } else { 2 * state_row },
                vertex_bytes: if first { 0 } else { 4 * u64::from(cols) },
                ..VectorCost::default()
            },
        )
    }

    /// The estimate of merging `parts` flash states of `rows` accumulator rows into the f16 output over
    /// `queries` queries: the accumulator rows dealt to the workers; each worker computes every
    /// query's weights itself (per part one exp, two operations and the division by the weighted
    /// sums, from the part's max and sum it loads); per element a multiply, a multiply-add per
    /// further part and a cast; per row every part's state row loaded and the output row stored, or
    /// with `transposed` output a stored row per query, whole accesses per row as the device counts
    /// them.
    pub fn combine_cycles(&self, parts: u32, rows: u32, queries: u32, transposed: bool) -> u64 {
        let parts = u64::from(parts);
        let access = self.memory_access_bytes;
        let state_row = (4 * u64::from(queries)).div_ceil(access);
        let (out_row, transposed_out) = if transposed {
            let stored_row = (2 * u64::from(rows)).div_ceil(access);
            (0, u64::from(queries) * stored_row * access)
        } else {
            ((2 * u64::from(queries)).div_ceil(access), 0)
        };
        self.vector_cycles(
            rows,
            queries,
            VectorCost {
                dtype: DType::F32,
                ops: 2 * parts,
                row_accesses: parts * state_row + out_row,
                vertex_bytes: transposed_out,
                worker_ops: 3 * parts * u64::from(queries),
                worker_transcendentals: parts * u64::from(queries),
                worker_bytes: 2 * parts * state_row * access,
                ..VectorCost::default()
            },
        )
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
                "{} B/cycle send and receive per tile; mux switch {} cycle; transit {} cycles",
                self.exchange_bytes_per_cycle, self.mux_switch_cycles, self.exchange_transit_cycles
            ),
        );
        line("sync", format!("{} cycles", self.sync_cycles));
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
    fn a_causal_mask_costs_a_key_row_one_select_and_a_key_bias_each_score_an_add() {
        let t = Target::preset("mk2-1500").unwrap();
        let open = t.softmax_cycles(120, 16, DType::F16, false, false);
        // 120 keys, 20 a worker: one bundle a row in each of the two passes over the keys.
        let causal = t.softmax_cycles(120, 16, DType::F16, true, false);
        assert_eq!(causal - open, 2 * 6 * 20);
        // An add per score: 20 rows of 16 scores over 4 lanes, 80 bundles a pass.
        let biased = t.softmax_cycles(120, 16, DType::F16, false, true);
        assert_eq!(biased - open, 2 * 6 * 80);
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
    fn gelu_takes_poplibs_loop_of_eight_bundles_per_four_halves() {
        let t = Target::preset("mk2-1500").unwrap();
        // NonLinearityLoop_gelu.S: per 64-bit vector of four halves six f16v4 operations and two
        // f16v2tanh, eight bundles. One f16 part, so no sum or cast: 6 rows of 64, 16 grains of four
        // halves a worker.
        let gelu = EpilogueCost {
            partials: DType::F16,
            parts: 1,
            bias: false,
            bias_by_row: false,
            activation: Some(Activation::GeluTanh),
            residual: false,
            transposed: false,
        };
        // A worker's loads and stores (the partials at 16 bytes, the output at 8: 24 bundles) hide
        // under its 128 bundles of arithmetic.
        assert_eq!(
            t.epilogue_cycles(6, 64, &gelu, false),
            t.vertex_overhead_cycles + 6 * (64 / 4) * 8
        );
    }
}
