//! The device catches compiler bugs: for each class, a package from the small preset is broken in that
//! way and the run FAILs with a fault naming tile, superstep, cycle and buffer.

mod common;
use common::{SMALL, SMALL_ID, Sandbox};
use ipu_codegen::device::{Device, Fault, host_data};
use ipu_codegen::ids::TileId;
use ipu_codegen::ir::{BufferClass, Package, read_ipuexe, write_ipuexe};
use ipu_codegen::isa::{Amp, Epilogue, Instr, Placed, Receive, Send, TileProgram, VertexKind};
use ipu_codegen::progress::Silent;
use std::sync::OnceLock;

fn small_package() -> Package {
    static PACKAGE: OnceLock<Vec<u8>> = OnceLock::new();
    let bytes = PACKAGE.get_or_init(|| {
        let sb = Sandbox::new();
        sb.run(&["build", SMALL]).assert_ok();
        std::fs::read(sb.stages().join(SMALL_ID).join("model.ipuexe")).unwrap()
    });
    read_ipuexe(bytes).unwrap().1
}

/// The small encoder's package: its layer norms gather rows from several matmul blocks.
fn encoder_package() -> Package {
    static PACKAGE: OnceLock<Vec<u8>> = OnceLock::new();
    let bytes = PACKAGE.get_or_init(|| {
        let sb = Sandbox::new();
        sb.run(&["build", "bert-encoder-small"]).assert_ok();
        let id = std::fs::read_dir(sb.stages())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.join("model.ipuexe").exists())
            .unwrap();
        std::fs::read(id.join("model.ipuexe")).unwrap()
    });
    read_ipuexe(bytes).unwrap().1
}

fn run(p: &Package) -> Result<(), Fault> {
    let host = host_data(&p.graph, 7);
    let mut device = Device::load(p.clone())?;
    device.initialize(&host)?;
    device.run(&host, &Silent).map(|_| ())
}

fn program(p: &Package, tile: usize) -> TileProgram {
    TileProgram::decode(&p.tiles[tile].code).unwrap()
}

fn set_program(p: &mut Package, program: &TileProgram) {
    p.tiles[program.tile.index()].code = program.encode();
}

/// Runs a broken package and checks the fault's class and that it names where it happened.
fn assert_fault(p: &Package, class: &str) -> Fault {
    let fault = run(p).expect_err("a broken package must fail");
    let text = fault.to_string();
    assert!(text.contains(class), "expected `{class}`, got: {text}");
    assert!(
        text.starts_with(&format!(
            "{} step{} cycle {}:",
            fault.tile, fault.step, fault.cycle
        )),
        "{text}"
    );
    fault
}

/// The first AMP instruction of the first tile that has one, with its tile and index.
fn first_amp(p: &Package) -> (usize, usize, TileProgram) {
    (0..p.tiles.len())
        .find_map(|t| {
            let prog = program(p, t);
            prog.instrs
                .iter()
                .position(|i| matches!(i, Instr::Vertex(v) if matches!(**v, VertexKind::Amp(_))))
                .map(|i| (t, i, prog))
        })
        .unwrap()
}

fn edit_amp(p: &mut Package, f: impl FnOnce(&mut u32, &mut u32, &mut u32)) {
    let (_, i, mut prog) = first_amp(p);
    if let Some(amp) = amp_of(&mut prog.instrs[i]) {
        f(
            &mut amp.a.address,
            &mut amp.b.address,
            &mut amp.partials.address,
        );
    }
    set_program(p, &prog);
}

#[test]
fn the_unbroken_package_passes() {
    run(&small_package()).unwrap();
}

/// Each instruction with the exchange phase it belongs to (`None` outside exchange phases).
fn phases_of(prog: &TileProgram) -> Vec<Option<u32>> {
    let mut phase = None;
    prog.instrs
        .iter()
        .map(|i| {
            match i {
                Instr::Exchange { phase: id, .. } => phase = Some(id.0),
                Instr::Sync => phase = None,
                _ => {}
            }
            phase
        })
        .collect()
}

#[test]
fn two_senders_reaching_one_receiver_at_once() {
    let mut p = encoder_package();
    // A receiver switching to a second sender after a delay: with the delay moved after the second
    // switch, it switches while the first sender's data still arrives, and everything after issues
    // as before.
    for t in 0..p.tiles.len() {
        let mut prog = program(&p, t);
        let at = prog.instrs.windows(3).position(|w| {
            matches!(
                w,
                [Instr::Receive(_), Instr::Delay { .. }, Instr::Receive(_)]
            )
        });
        let Some(at) = at else { continue };
        prog.instrs.swap(at + 1, at + 2);
        set_program(&mut p, &prog);
        let f = assert_fault(&p, "two senders reach this tile at once");
        assert_eq!(f.tile.index(), t, "{f}");
        assert!(
            f.message.contains("instruction"),
            "names the instruction: {f}"
        );
        return;
    }
    panic!("no receiver with two receives a delay apart in the small encoder");
}

/// The first tile with an instruction `has` picks.
fn first_tile_with(p: &Package, has: impl Fn(&Instr) -> bool) -> usize {
    (0..p.tiles.len())
        .find(|&t| program(p, t).instrs.iter().any(&has))
        .expect("a tile with such an instruction")
}

#[test]
fn data_arriving_while_the_receiver_listens_elsewhere() {
    let mut p = small_package();
    let t = first_tile_with(&p, |i| matches!(i, Instr::Receive(_)));
    let mut prog = program(&p, t);
    // The last tile sends nothing in the small preset: the receive listens to it instead.
    let silent = TileId::from_index(p.tiles.len() - 1);
    assert!(
        !program(&p, silent.index())
            .instrs
            .iter()
            .any(|i| matches!(i, Instr::Send(_) | Instr::SendReceive(..)))
    );
    if let Some(r) = prog.instrs.iter_mut().find_map(receive_of) {
        r.from = silent;
    }
    set_program(&mut p, &prog);
    let f = assert_fault(&p, "arrives while it listens elsewhere");
    assert!(f.message.contains("buf"), "names the buffer: {f}");
}

#[test]
fn a_mux_switch_one_cycle_late() {
    let mut p = small_package();
    // A receive whose delay before it is one cycle longer, the delay after it one shorter: its mux
    // listens a cycle after its data begins to arrive, and everything after issues as before. Of
    // two words' cycles at least, so its data still arrives when the mux listens.
    let late = |w: &[Instr]| {
        matches!(w, [Instr::Delay { .. }, Instr::Receive(r), Instr::Delay { cycles }]
            if r.bytes >= 16 && *cycles >= 1)
    };
    let t = (0..p.tiles.len())
        .find(|&t| program(&p, t).instrs.windows(3).any(late))
        .expect("a receive between delays");
    let mut prog = program(&p, t);
    let at = prog.instrs.windows(3).position(late).unwrap();
    for (i, by) in [(at, 1), (at + 2, -1)] {
        if let Some(cycles) = delay_of(&mut prog.instrs[i]) {
            *cycles = cycles.saturating_add_signed(by);
        }
    }
    set_program(&mut p, &prog);
    let f = assert_fault(&p, "the switch comes too late");
    assert_eq!(f.tile.index(), t, "{f}");
}

#[test]
fn out_of_range_access() {
    let mut p = small_package();
    let end = p.target.memory_end;
    edit_amp(&mut p, |a, _, _| *a = end - 8);
    assert_fault(&p, "outside tile memory");
}

#[test]
fn misaligned_access() {
    let mut p = small_package();
    edit_amp(&mut p, |a, _, _| *a += 2);
    assert_fault(&p, "not 8-byte aligned");
}

#[test]
fn weight_loads_outside_interleaved_memory() {
    let mut p = small_package();
    let base = p.target.memory_base;
    edit_amp(&mut p, |_, b, _| *b = base + 0x1000);
    assert_fault(&p, "AMP weights b (128-bit loads) at");
}

#[test]
fn partials_outside_interleaved_memory() {
    let mut p = small_package();
    let base = p.target.memory_base;
    edit_amp(&mut p, |_, _, partials| *partials = base + 0x1000);
    let f = assert_fault(&p, "outside interleaved memory");
    assert!(f.message.contains("partials"), "{f}");
}

#[test]
fn amp_input_and_output_in_one_memory_element() {
    let mut p = small_package();
    edit_amp(&mut p, |_, b, partials| *partials = *b);
    assert_fault(&p, "shares memory element");
}

#[test]
fn read_of_never_written_memory() {
    let mut p = small_package();
    // Far above anything the small preset uses, inside standard memory.
    let unused = p.target.interleaved_base - 0x4000;
    edit_amp(&mut p, |a, _, _| *a = unused);
    let f = assert_fault(&p, "reads never-written memory");
    assert!(f.message.contains("(no buffer)"), "{f}");
}

#[test]
fn write_into_a_live_buffer() {
    let mut p = small_package();
    // Point an epilogue's output at a resident weight piece on its tile.
    let (t, i, mut prog) = (0..p.tiles.len())
        .find_map(|t| {
            let prog = program(&p, t);
            prog.instrs
                .iter()
                .position(
                    |i| matches!(i, Instr::Vertex(v) if matches!(**v, VertexKind::Epilogue(_))),
                )
                .map(|i| (t, i, prog))
        })
        .unwrap();
    let weight = p.tiles[t]
        .buffers
        .iter()
        .find(|b| b.label.class == BufferClass::WeightHome)
        .unwrap()
        .address;
    if let Some(e) = epilogue_of(&mut prog.instrs[i]) {
        e.out.address = weight;
    }
    set_program(&mut p, &prog);
    let f = assert_fault(&p, "still live");
    assert!(f.message.contains("WeightHome"), "names the buffer: {f}");
}

#[test]
fn a_broken_package_fails_the_hardware_test_on_the_command_line() {
    let mut p = small_package();
    edit_amp(&mut p, |a, _, _| *a += 2);
    let sb = Sandbox::new();
    let path = sb.path("broken.ipuexe");
    std::fs::write(&path, write_ipuexe(&ipu_codegen::store::encode(&p))).unwrap();
    let r = sb.run(&["run", path.to_str().unwrap()]);
    r.assert_clean_failure();
    assert!(r.stdout.contains("hardwareTest=FAIL"), "{}", r.stdout);
    assert!(r.stdout.contains("not 8-byte aligned"), "{}", r.stdout);
}

/// What a craft is refused with, and the craft.
type Craft<T> = (&'static str, fn(&mut T));

#[test]
fn a_package_with_a_crafted_target_or_graph_is_refused_when_read() {
    let base = small_package();
    let sb = Sandbox::new();
    let path = sb.path("crafted.ipuexe");
    let cases: [Craft<Package>; 5] = [
        ("its target \"mk2-1500\" is not the preset", |p| {
            p.target.memory_end = u32::MAX
        }),
        ("its target \"mk2-1500\" is not the preset", |p| {
            p.target.tiles = 1 << 30
        }),
        ("its graph is malformed: op", |p| {
            p.graph.ops[0].out = ipu_codegen::ids::ValueId::from_index(9999)
        }),
        ("its graph is malformed: value", |p| {
            p.graph.values[0].rows = 0
        }),
        ("more than a run holds on the host", |p| {
            for _ in 0..3 {
                let mut v = p.graph.values[0].clone();
                v.id = ipu_codegen::ids::ValueId::from_index(p.graph.values.len());
                (v.rows, v.cols, v.shape) = (1 << 15, 1 << 15, Vec::new());
                p.graph.values.push(v);
            }
        }),
    ];
    for (said, craft) in cases {
        let mut p = base.clone();
        craft(&mut p);
        std::fs::write(&path, write_ipuexe(&ipu_codegen::store::encode(&p))).unwrap();
        let r = sb.run(&["run", path.to_str().unwrap()]);
        r.assert_clean_failure();
        assert!(r.stderr.contains(said), "{said}: {}", r.stderr);
    }
    // The package uncrafted runs: the refusals are the crafts'.
    std::fs::write(&path, write_ipuexe(&ipu_codegen::store::encode(&base))).unwrap();
    sb.run(&["run", path.to_str().unwrap()]).assert_ok();
}

#[test]
fn a_wide_send_while_the_pair_mate_sends() {
    let mut p = small_package();
    // An even tile and its mate both opening an exchange phase with a send, both at cycle 0; make
    // the even tile's send wide.
    let opens_with_send = |prog: &TileProgram, at: usize| {
        matches!(prog.instrs.get(at), Some(Instr::Exchange { .. }))
            && matches!(prog.instrs.get(at + 1), Some(Instr::Send(_)))
    };
    for t in (0..p.tiles.len()).step_by(2) {
        let (mut prog, mate) = (program(&p, t), program(&p, t + 1));
        let (phases, mate_phases) = (phases_of(&prog), phases_of(&mate));
        let found = (0..prog.instrs.len()).find(|&at| {
            opens_with_send(&prog, at)
                && (0..mate.instrs.len())
                    .any(|m| opens_with_send(&mate, m) && mate_phases[m] == phases[at])
        });
        let Some(at) = found else { continue };
        if let Some(s) = send_of(&mut prog.instrs[at + 1]) {
            s.wide = true;
        }
        set_program(&mut p, &prog);
        let f = assert_fault(&p, "while its pair mate");
        assert_eq!(f.tile.index(), t, "{f}");
        return;
    }
    panic!("no pair of mates both sending at the start of a phase in the small preset");
}

#[test]
fn misaligned_row_stride() {
    let mut p = small_package();
    let (_, i, mut prog) = first_amp(&p);
    if let Some(amp) = amp_of(&mut prog.instrs[i]) {
        amp.a.stride += 2;
    }
    set_program(&mut p, &prog);
    assert_fault(&p, "row stride");
}

#[test]
fn a_damaged_host_program_is_a_fault_not_a_panic() {
    let mut p = small_package();
    p.host.run_inputs[0].rect.col1 += 1000;
    let fault = run(&p).expect_err("a host transfer beyond its value must fail");
    assert!(fault.message.contains("does not fit"), "{fault}");
}

/// The tiles are written side by side, but the fault a damaged `initialize` gives is its first
/// failing transfer in stream order, whichever tile it writes: two transfers written side by side
/// are sent past memory's end, the earlier one to a lower tile than the later one, then (the two
/// swapped in the stream) to a higher one.
#[test]
fn a_host_write_fault_is_the_first_failing_transfer_in_order() {
    let base = small_package();
    let init = &base.host.initialize;
    // The first transfer, and the first after it to another tile: written side by side.
    let i = 0;
    let j = (init.iter().position(|t| t.tile != init[i].tile)).expect("transfers to two tiles");
    for swapped in [false, true] {
        let mut p = base.clone();
        if swapped {
            p.host.initialize.swap(i, j);
        }
        let end = p.target.memory_end;
        p.host.initialize[i].address = end;
        p.host.initialize[j].address = end;
        let fault = run(&p).expect_err("a write past memory must fail");
        assert_eq!(fault.tile, p.host.initialize[i].tile, "{fault}");
    }
}

#[test]
fn a_package_naming_a_target_with_a_zero_rate_is_refused_not_run() {
    let base = small_package();
    for zero in 0..4 {
        let mut p = base.clone();
        match zero {
            0 => p.target.workers = 0,
            1 => p.target.memory_access_bytes = 0,
            2 => p.target.wide_load_bytes = 1 << 40,
            _ => p.target.amp_block_depth = 0,
        }
        let fault = run(&p).expect_err("an impossible target must be refused");
        assert!(fault.to_string().contains("impossible target"), "{fault}");
    }
}

// A package's addresses, lengths, strides and counts near u32::MAX: each sum or product that would
// pass 32 bits is a fault naming the tile and the instruction, never a wrap and never a panic.

/// The first instruction of the first tile for which `edit` applies (returns true), edited.
fn edit_first(p: &mut Package, mut edit: impl FnMut(&mut Instr) -> bool) -> usize {
    for t in 0..p.tiles.len() {
        let mut prog = program(p, t);
        if prog.instrs.iter_mut().any(&mut edit) {
            set_program(p, &prog);
            return t;
        }
    }
    panic!("no instruction to edit in the package");
}

/// Runs a crafted package and checks it faults on `tile` with a message holding every one of `said`.
fn assert_overflow_fault(p: &Package, tile: usize, said: &[&str]) {
    let fault = assert_fault(p, said[0]);
    assert_eq!(fault.tile.index(), tile, "{fault}");
    for s in said {
        assert!(fault.message.contains(s), "expected `{s}`: {fault}");
    }
}

#[test]
fn an_amp_row_stride_near_u32_max_is_a_fault_not_a_wrap() {
    let mut p = small_package();
    // Aligned, so only the rows' addresses are wrong: row 1 would wrap to 16 bytes below row 0.
    let t = edit_first(&mut p, |i| match amp_of(i) {
        Some(amp) if amp.depth >= 2 => {
            amp.b.stride = u32::MAX - 15;
            true
        }
        _ => false,
    });
    assert_overflow_fault(
        &p,
        t,
        &["AMP weights b", "runs past the 32-bit address space"],
    );
}

#[test]
fn an_operand_of_more_bytes_than_tile_memory_is_a_fault_before_it_is_read() {
    let mut p = small_package();
    // Every row at one address: nothing passes u32 or leaves memory, but the rows hold more bytes
    // than the tile has.
    let t = edit_first(&mut p, |i| match amp_of(i) {
        Some(amp) => {
            (amp.rows, amp.a.stride, amp.partials.stride) = (100_000, 0, 0);
            true
        }
        None => false,
    });
    assert_overflow_fault(
        &p,
        t,
        &["AMP partials", "holds more bytes than tile memory"],
    );
}

#[test]
fn a_buffer_ending_past_u32_is_refused_when_the_package_loads() {
    let mut p = small_package();
    let t = p.tiles.iter().position(|t| !t.buffers.is_empty()).unwrap();
    p.tiles[t].buffers[0].address = u32::MAX - 4;
    let fault = Device::load(p.clone())
        .err()
        .expect("a buffer past u32 must be refused");
    assert_eq!(fault.tile.index(), t, "{fault}");
    assert!(
        fault.message.contains("buffer table") && fault.message.contains("ends past the 32-bit"),
        "{fault}"
    );
}

#[test]
fn a_send_run_ending_past_u32_is_a_fault_on_the_sender() {
    let mut p = small_package();
    let t = edit_first(&mut p, |i| match i {
        Instr::Send(Send { run, .. }) => {
            (run.count, run.stride) = (2, u32::MAX - 3);
            true
        }
        _ => false,
    });
    assert_overflow_fault(
        &p,
        t,
        &["exchange send", "ends past the 32-bit address space"],
    );
}

#[test]
fn a_receive_run_longer_than_u32_is_a_fault_on_the_receiver() {
    let mut p = small_package();
    let t = edit_first(&mut p, |i| match i {
        Instr::Receive(Receive { run, .. }) => {
            (run.bytes, run.count) = (1 << 16, 1 << 16);
            true
        }
        _ => false,
    });
    assert_overflow_fault(&p, t, &["exchange receive", "holds more than 2^32 bytes"]);
}

#[test]
fn a_receive_window_near_u32_max_is_named_unwrapped() {
    let mut p = small_package();
    let mut bytes = 0;
    let t = edit_first(&mut p, |i| match i {
        Instr::Receive(Receive { skip, bytes: b, .. }) => {
            (*skip, bytes) = (u32::MAX - 1, *b);
            true
        }
        _ => false,
    });
    let end = u64::from(u32::MAX - 1) + u64::from(bytes);
    assert_overflow_fault(&p, t, &[&format!("expects bytes {}..{end}", u32::MAX - 1)]);
}

#[test]
fn a_send_arriving_past_u32_cycles_is_a_fault() {
    let mut p = small_package();
    // A tile whose code in a phase is one send, delayed to leave just before the last cycle a phase
    // can name: its code ends within the count, its words arrive past it.
    let lone_send =
        |w: &[Instr]| matches!(w, [Instr::Exchange { .. }, Instr::Send(_), Instr::Sync]);
    let t = (0..p.tiles.len())
        .find(|&t| program(&p, t).instrs.windows(3).any(lone_send))
        .expect("a tile sending one piece in a phase");
    let mut prog = program(&p, t);
    let label = prog.instrs.windows(3).position(lone_send).unwrap();
    // Its last word leaves at cycle u32::MAX - 2, its issue slot ends at u32::MAX - words.
    let Instr::Send(send) = prog.instrs[label + 1] else {
        unreachable!()
    };
    let cycles = send.bytes.div_ceil(4).div_ceil(1 + u32::from(send.wide));
    prog.instrs.insert(
        label + 1,
        Instr::Delay {
            cycles: u32::MAX - 2 - cycles,
        },
    );
    set_program(&mut p, &prog);
    assert_overflow_fault(
        &p,
        t,
        &["arrives at cycle", "past the phase's 32-bit count"],
    );
}

#[test]
fn exchange_code_past_u32_cycles_is_a_fault_naming_the_instruction() {
    let mut p = small_package();
    let t = first_tile_with(&p, |i| matches!(i, Instr::Exchange { .. }));
    let mut prog = program(&p, t);
    let label = prog
        .instrs
        .iter()
        .position(|i| matches!(i, Instr::Exchange { .. }))
        .unwrap();
    // Its issue slot and its cycles take the code one cycle past u32.
    prog.instrs
        .insert(label + 1, Instr::Delay { cycles: u32::MAX });
    set_program(&mut p, &prog);
    assert_overflow_fault(
        &p,
        t,
        &[
            "instruction 1 `delay 4294967295` keeps the tile's exchange code running until cycle 4294967296",
            "past the phase's 32-bit count",
        ],
    );
}

#[test]
fn a_host_row_stride_near_u32_max_is_a_fault_naming_the_stored_row() {
    let mut p = small_package();
    let transfer = (p.host.initialize.iter_mut())
        .find(|t| {
            let rows = if t.transposed {
                t.rect.cols()
            } else {
                t.rect.rows()
            };
            rows >= 2
        })
        .unwrap();
    transfer.stride = u32::MAX - 1;
    let t = transfer.tile.index();
    assert_overflow_fault(&p, t, &["stored row 1", "passes the 32-bit address space"]);
}

#[test]
fn a_compute_superstep_past_u32_cycles_is_a_fault_not_a_truncation() {
    let mut p = small_package();
    p.target.vertex_overhead_cycles = u64::MAX / 4;
    let fault = assert_fault(&p, "past the superstep's 32-bit count");
    let kinds = [
        "amp",
        "epilogue",
        "softmax",
        "accumulate",
        "combine",
        "layer_norm",
    ];
    assert!(
        kinds
            .iter()
            .any(|k| fault.message.starts_with(&format!("{k}: takes "))),
        "names the vertex: {fault}"
    );
}

#[test]
fn syncs_past_u64_cycles_are_a_fault() {
    let mut p = small_package();
    // The syncs' product just passes u64: wrapped, it would be smaller than one superstep.
    let supersteps = p.steps.len() as u64;
    p.target.sync_cycles = u64::MAX / supersteps + 1;
    assert_fault(&p, "syncs of");
}

fn amp_of(i: &mut Instr) -> Option<&mut Amp<Placed>> {
    match i {
        Instr::Vertex(v) => match v.as_mut() {
            VertexKind::Amp(a) => Some(a),
            _ => None,
        },
        _ => None,
    }
}

fn epilogue_of(i: &mut Instr) -> Option<&mut Epilogue<Placed>> {
    match i {
        Instr::Vertex(v) => match v.as_mut() {
            VertexKind::Epilogue(e) => Some(e),
            _ => None,
        },
        _ => None,
    }
}

fn send_of(i: &mut Instr) -> Option<&mut Send> {
    match i {
        Instr::Send(s) => Some(s),
        _ => None,
    }
}

fn receive_of(i: &mut Instr) -> Option<&mut Receive> {
    match i {
        Instr::Receive(r) => Some(r),
        _ => None,
    }
}

fn delay_of(i: &mut Instr) -> Option<&mut u32> {
    match i {
        Instr::Delay { cycles } => Some(cycles),
        _ => None,
    }
}

/// Every u32 field below of the first AMP, epilogue, send, receive and delay set near u32::MAX, one
/// at a time: the run ends or faults, never panics.
#[test]
fn fields_near_u32_max_never_panic_the_device() {
    let base = small_package();
    type Field = fn(&mut Instr, u32) -> bool;
    let fields: [Field; 12] = [
        |i, x| amp_of(i).map(|a| a.rows = x).is_some(),
        |i, x| amp_of(i).map(|a| a.depth = x).is_some(),
        |i, x| amp_of(i).map(|a| a.cols = x).is_some(),
        |i, x| amp_of(i).map(|a| a.b.stride = x).is_some(),
        |i, x| amp_of(i).map(|a| a.partials.address = x).is_some(),
        |i, x| epilogue_of(i).map(|e| e.rows = x).is_some(),
        |i, x| epilogue_of(i).map(|e| e.out.stride = x).is_some(),
        |i, x| send_of(i).map(|s| s.run.offset = x).is_some(),
        |i, x| send_of(i).map(|s| s.bytes = x).is_some(),
        |i, x| {
            receive_of(i)
                .map(|r| (r.run.count, r.run.stride) = (3, x))
                .is_some()
        },
        |i, x| receive_of(i).map(|r| r.from = TileId(x)).is_some(),
        |i, x| delay_of(i).map(|d| *d = x).is_some(),
    ];
    for (f, field) in fields.iter().enumerate() {
        for x in [u32::MAX, u32::MAX - 7, 1 << 31] {
            let mut p = base.clone();
            edit_first(&mut p, |i| field(i, x));
            if let Err(fault) = run(&p) {
                assert!(!fault.message.is_empty(), "field {f} = {x:#x}");
            }
        }
    }
}
