//! Progress: the library reports every superstep, every reference row and every exchange pattern it
//! schedules to the `Progress` it is given, exactly once; the command line draws bars on a terminal
//! only, so output to a pipe carries no progress text and is what `--quiet` gives.

mod common;
use common::pipeline::small;
use common::{SMALL, Sandbox};
use ipu_codegen::device::{Device, host_data};
use ipu_codegen::progress::Progress;
use ipu_codegen::stages::lower_exchanges::{LowerExchangesConfig, lower_exchanges};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Every report, in order: `start what len`, `advance n`, `finish`.
#[derive(Default)]
struct Counting(Mutex<Vec<(&'static str, u64)>>);

impl Progress for Counting {
    fn start(&self, what: &'static str, len: u64) {
        self.0.lock().unwrap().push((what, len));
    }
    fn advance(&self, units: u64) {
        self.0.lock().unwrap().push(("advance", units));
    }
    fn finish(&self) {
        self.0.lock().unwrap().push(("finish", 0));
    }
}

impl Counting {
    /// The one step reported: its name, its length and the units advanced; panics unless it was
    /// started once, then only advanced, then finished once.
    fn step(self) -> (&'static str, u64, u64) {
        let events = self.0.into_inner().unwrap();
        let (first, last) = (events.first().unwrap(), events.last().unwrap());
        assert_eq!(last.0, "finish", "{events:?}");
        let middle = &events[1..events.len() - 1];
        assert!(middle.iter().all(|e| e.0 == "advance"), "{events:?}");
        (first.0, first.1, middle.iter().map(|e| e.1).sum())
    }
}

#[test]
fn the_device_reports_every_superstep_and_the_reference_every_row_exactly_once() {
    let built = small();
    let package = &built.package;
    let host = host_data(&package.graph, 7);
    let mut device = Device::load(package.clone()).unwrap();
    device.initialize(&host).unwrap();
    let supersteps = device.supersteps() as u64;
    let counting = Counting::default();
    device.run(&host, &counting).unwrap();
    assert_eq!(counting.step(), ("supersteps", supersteps, supersteps));
    assert!(supersteps > 1);

    let counting = Counting::default();
    ipu_codegen::numerics::reference(&package.graph, &host, &counting);
    let rows: u64 = (package.graph.ops.iter())
        .map(|op| u64::from(package.graph.value(op.out).rows))
        .sum();
    assert_eq!(counting.step(), ("reference rows", 2 * rows, 2 * rows));
}

#[test]
fn exchange_scheduling_reports_every_pattern_it_schedules_exactly_once() {
    let built = small();
    let counting = Counting::default();
    let exchanges = lower_exchanges(
        &built.selected,
        &built.storage,
        &built.target,
        &LowerExchangesConfig {},
        &BTreeMap::new(),
        &counting,
    )
    .unwrap();
    let distinct: std::collections::BTreeSet<_> =
        exchanges.phases.iter().map(|p| p.pattern).collect();
    let n = distinct.len() as u64;
    assert_eq!(counting.step(), ("exchange patterns scheduled", n, n));
    // Nothing to schedule (every schedule known) reports nothing.
    let known: BTreeMap<_, _> = (exchanges.phases.iter())
        .map(|p| (p.pattern, p.schedule.clone()))
        .collect();
    let counting = Counting::default();
    let again = lower_exchanges(
        &built.selected,
        &built.storage,
        &built.target,
        &LowerExchangesConfig {},
        &known,
        &counting,
    )
    .unwrap();
    assert_eq!(again, exchanges);
    assert!(counting.0.into_inner().unwrap().is_empty());
}

/// What a bar draws: its carriage returns, its brackets of `=` and `>`, its step names.
fn has_progress_text(text: &str) -> bool {
    text.contains('\r')
        || text.contains("=>")
        || [
            "supersteps [",
            "reference rows [",
            "exchange patterns scheduled [",
        ]
        .iter()
        .any(|bar| text.contains(bar))
}

#[test]
fn a_run_into_pipes_draws_no_progress_and_prints_what_quiet_prints() {
    let sb = Sandbox::new();
    let loud = sb.run(&["run", SMALL]);
    loud.assert_ok();
    assert!(!has_progress_text(&loud.stderr), "{}", loud.stderr);
    assert!(!has_progress_text(&loud.stdout), "{}", loud.stdout);
    let quiet = sb.run(&["run", SMALL, "--quiet"]);
    quiet.assert_ok();
    // The same lines, but for each process's own peak memory.
    let measured = |stdout: &str| -> Vec<String> {
        (stdout.lines())
            .map(|l| l.split(" hostPeakMiB=").next().unwrap_or(l).to_string())
            .collect()
    };
    assert_eq!(measured(&loud.stdout), measured(&quiet.stdout));
    assert!(quiet.stdout.contains(" hostPeakMiB="), "{}", quiet.stdout);
    // Without RUST_LOG (which the sandbox sets to info), quiet logs no INFO either, only warnings
    // and errors.
    let unset = |args: &[&str]| {
        let out = common::ran(sb.command(args).env_remove("RUST_LOG").output().unwrap());
        out.assert_ok();
        out.stderr
    };
    assert!(unset(&["run", SMALL]).contains(" INFO "));
    for flag in ["--quiet", "-q"] {
        let stderr = unset(&["run", SMALL, flag]);
        assert!(!stderr.contains(" INFO "), "{flag}: {stderr}");
    }
}

/// `ipu-codegen ARGS` under `script`, a pseudo-terminal: what the terminal showed.
fn on_terminal(sb: &Sandbox, args: &str) -> String {
    let binary = env!("CARGO_BIN_EXE_ipu-codegen");
    let line = format!("'{binary}' {args}");
    let base = sb.command(&[]);
    let mut c = base
        .get_envs()
        .fold(std::process::Command::new("script"), |mut s, (k, v)| {
            match v {
                Some(v) => s.env(k, v),
                None => s.env_remove(k),
            };
            s
        });
    let out = c
        .args(["-qfc", &line, "/dev/null"])
        .current_dir(sb.dir.path())
        .env("TERM", "xterm")
        .output()
        .unwrap();
    let r = common::ran(out);
    r.assert_ok();
    r.stdout
}

/// Whether `script` (util-linux), which gives a terminal, is missing ([`common::skip_without`]).
fn script_missing() -> bool {
    let present = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok();
    common::skip_without("`script` (util-linux)", present)
}

#[test]
fn log_lines_and_bars_never_share_a_terminal_line_skipped_without_script() {
    if script_missing() {
        return;
    }
    // A sweep logs its builds while its bar is drawn.
    let sb = Sandbox::new();
    let drawn = on_terminal(
        &sb,
        &format!("sweep {SMALL} --vary tokens=21,30,40 --vary blocks=1,2"),
    );
    assert!(drawn.contains("sweep builds ["), "{drawn}");
    assert!(
        drawn.contains("INFO"),
        "the log lines reach the terminal:\n{drawn}"
    );
    let mixed: Vec<&str> = drawn
        .split(['\r', '\n'])
        .filter(|l| l.contains("INFO") && l.contains("sweep "))
        .collect();
    assert!(
        mixed.is_empty(),
        "a log line and a bar on one line: {mixed:?}"
    );
}

#[test]
fn a_run_on_a_terminal_draws_its_bars_unless_quiet_skipped_without_script() {
    if script_missing() {
        return;
    }
    let sb = Sandbox::new();
    let on_terminal = |extra: &str| on_terminal(&sb, &format!("run {SMALL} {extra}"));
    let drawn = on_terminal("");
    for bar in [
        "exchange patterns scheduled [",
        "supersteps [",
        "reference rows [",
    ] {
        assert!(drawn.contains(bar), "no `{bar}` on the terminal:\n{drawn}");
    }
    assert!(drawn.contains("numericalTest=PASS"), "{drawn}");
    let quiet = on_terminal("--quiet");
    assert!(!has_progress_text(&quiet.replace("\r\n", "\n")), "{quiet}");
    assert!(quiet.contains("numericalTest=PASS"), "{quiet}");
}
