//! Progress bars on stderr for a command's long steps, drawn only when stderr is a terminal and
//! `--quiet` was not given: output to pipes and files is byte for byte what it is without them.
//!
//! [`Bar`] is one bar any command can use (`Bar::new(len, "what")`, `inc`, `finish`); [`Terminal`]
//! is the library's `Progress` drawn as bars, one step at a time, what the commands pass into the
//! library. Bars of steps running side by side (a run's device and its host reference) are drawn
//! together, one line each. A bar is removed from the terminal when it finishes or is dropped, so
//! what the command prints afterwards reads as it would without it. Nothing drawn changes an
//! artifact or a summary. [`LogWriter`] is where log lines go: it lifts the bars off the terminal
//! while a line is written, so log lines and bars never overwrite each other.

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use ipu_codegen::progress::Progress;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex};

/// Set once from `--quiet`, before any bar is made.
static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: draw no bars.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether bars are drawn: stderr is a terminal and `--quiet` was not given.
fn drawn() -> bool {
    !QUIET.load(Ordering::Relaxed) && std::io::stderr().is_terminal()
}

/// The bars on the terminal, drawn together on stderr.
static BARS: LazyLock<MultiProgress> = LazyLock::new(MultiProgress::new);

/// Log output on stderr, written with the bars lifted off the terminal.
#[derive(Clone, Copy, Default)]
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if drawn() {
            BARS.suspend(|| std::io::stderr().write(buf))
        } else {
            std::io::stderr().write(buf)
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> LogWriter {
        LogWriter
    }
}

/// One progress bar: `what`, the bar, units done of `len`, time spent.
pub struct Bar(ProgressBar);

impl Bar {
    /// A bar of `len` units named `what`, on stderr when bars are drawn, hidden otherwise.
    pub fn new(len: u64, what: &str) -> Bar {
        if !drawn() {
            return Bar(ProgressBar::hidden());
        }
        let bar = BARS.add(ProgressBar::new(len));
        let style = ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(what.to_string());
        // Drawn once as its step begins: the terminal's rate limit would otherwise skip a step that
        // ends within it.
        bar.force_draw();
        Bar(bar)
    }

    /// `units` more are done.
    pub fn inc(&self, units: u64) {
        self.0.inc(units);
    }

    /// The step is over: the bar leaves the terminal.
    pub fn finish(&self) {
        self.0.finish_and_clear();
        BARS.remove(&self.0);
    }
}

impl Drop for Bar {
    /// A step cut short (an error) leaves no bar behind either.
    fn drop(&mut self) {
        if !self.0.is_finished() {
            self.finish();
        }
    }
}

/// The library's [`Progress`] as bars: one [`Bar`] per step, from `start` to `finish`.
#[derive(Default)]
pub struct Terminal {
    step: Mutex<Option<Bar>>,
}

impl Terminal {
    /// The bar of the current step, if any; a poisoned lock only loses a bar.
    fn with_step(&self, f: impl FnOnce(&mut Option<Bar>)) {
        if let Ok(mut step) = self.step.lock() {
            f(&mut step);
        }
    }
}

impl Progress for Terminal {
    fn start(&self, what: &'static str, len: u64) {
        self.with_step(|step| *step = Some(Bar::new(len, what)));
    }

    fn advance(&self, units: u64) {
        self.with_step(|step| {
            if let Some(bar) = step {
                bar.inc(units);
            }
        });
    }

    fn finish(&self) {
        self.with_step(|step| {
            if let Some(bar) = step.take() {
                bar.finish();
            }
        });
    }
}
