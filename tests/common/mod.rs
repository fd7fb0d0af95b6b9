//! A sandbox per test: its own store and stages directory, and the `ipu-codegen` binary; `pipeline`
//! builds the small presets phase by phase in-process, for tests of the verifiers.

#![allow(dead_code)]

pub mod cache_server;
pub mod pipeline;

use ipu_codegen::progress::Silent;
use std::path::PathBuf;
use std::process::{Command, Output};

pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

pub struct Ran {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Phases whose body ran (cache misses), from the `package build phase finished` lines.
    pub fn phases_run(&self) -> Vec<String> {
        self.stderr
            .lines()
            .filter(|l| l.contains("package build phase finished") && l.contains("cached=false"))
            .filter_map(|l| {
                l.split("phase=\"")
                    .nth(2)
                    .or_else(|| l.split("phase=\"").nth(1))
            })
            .map(|rest| rest.split('"').next().unwrap_or_default().to_string())
            .collect()
    }

    pub fn assert_ok(&self) -> &Self {
        assert!(
            self.status.success(),
            "command failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    pub fn assert_clean_failure(&self) -> &Self {
        assert!(
            !self.status.success(),
            "command should fail\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        assert!(
            !self.stderr.contains("panicked"),
            "command panicked:\n{}",
            self.stderr
        );
        self
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn cache(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    pub fn stages(&self) -> PathBuf {
        self.dir.path().join("stages")
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ipu-codegen"));
        c.args(args)
            .current_dir(self.dir.path())
            .env("IPU_CODEGEN_CACHE", self.cache())
            .env("IPU_CODEGEN_STAGES", self.stages())
            .env("RUST_LOG", "info")
            .env_remove("RAYON_NUM_THREADS");
        c
    }

    pub fn run(&self, args: &[&str]) -> Ran {
        ran(self.command(args).output().expect("run ipu-codegen"))
    }

    /// The store verifies clean and a rebuild of the small preset runs no phase.
    pub fn assert_intact_and_warm(&self) {
        let verify = self.run(&["cache", "verify"]);
        verify.assert_ok();
        assert!(verify.stdout.contains("damaged=0"), "{}", verify.stdout);
        let ran = self.run(&["build", SMALL]).assert_ok().phases_run();
        assert!(ran.is_empty(), "the rebuild ran {ran:?}");
    }

    pub fn record(&self, build: &str, phase: &str) -> serde_json::Value {
        let path = self.stages().join(build).join(format!("{phase}.json"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).expect("stage record is JSON")
    }

    pub fn object_path(&self, hash: &str) -> PathBuf {
        self.cache().join("objects").join(&hash[..2]).join(hash)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

pub fn ran(out: Output) -> Ran {
    Ran {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `args`, which must print numericalTest=PASS and hardwareTest=PASS; returns stdout.
pub fn assert_pass(sb: &Sandbox, args: &[&str]) -> String {
    let r = sb.run(args);
    r.assert_ok();
    assert!(r.stdout.contains("numericalTest=PASS"), "{}", r.stdout);
    assert!(r.stdout.contains("hardwareTest=PASS"), "{}", r.stdout);
    r.stdout
}

/// A package built in a sandbox and run on the device in-process with the seeded data.
pub struct InProcess {
    pub package: ipu_codegen::ir::Package,
    pub host: Vec<Vec<f32>>,
    /// The graph's (first) output value and the device's data for it.
    pub out: ipu_codegen::ids::ValueId,
    pub output: Vec<f32>,
}

/// Builds `workload` (a preset and its flags, separated by spaces; id `id`) and runs it on the device
/// in-process with the data of `seed`.
pub fn run_in_process(workload: &str, id: &str, seed: u64) -> InProcess {
    use ipu_codegen::device::{Device, host_data};
    use ipu_codegen::ir::{ValueRole, read_ipuexe};
    let sb = Sandbox::new();
    let args: Vec<&str> = std::iter::once("build")
        .chain(workload.split_whitespace())
        .collect();
    sb.run(&args).assert_ok();
    let bytes = std::fs::read(sb.stages().join(id).join("model.ipuexe")).unwrap();
    let (_, package) = read_ipuexe(&bytes).unwrap();
    let host = host_data(&package.graph, seed);
    let mut device = Device::load(package.clone()).unwrap();
    device.initialize(&host).unwrap();
    let (_, mut outputs) = device.run(&host, &Silent).unwrap();
    let out = (package.graph.values.iter())
        .find(|v| v.role == ValueRole::Output)
        .unwrap()
        .id;
    let output = outputs.remove(&out).unwrap();
    InProcess {
        package,
        host,
        out,
        output,
    }
}

/// Builds `workload` (id `id`), runs it on the device in-process, and checks that its output passes
/// while the same output with one element pushed past the tolerance, or made NaN, fails.
pub fn corruption_fails_the_check(workload: &str, id: &str, seed: u64) {
    use ipu_codegen::numerics;
    let InProcess {
        package,
        host,
        out,
        mut output,
    } = run_in_process(workload, id, seed);
    let reference = numerics::reference(&package.graph, &host, &Silent);
    let check = numerics::check(&output, &reference, out);
    assert!(check.pass, "{check:?}");

    // One element off by a little more than the tolerance fails.
    let i = output.len() / 2;
    output[i] = half::f16::from_f64(f64::from(output[i]) + 1.5 * check.tolerance + 0.001).to_f32();
    assert!(
        !numerics::check(&output, &reference, out).pass,
        "a corrupted element must fail"
    );
    // A NaN fails.
    output[i] = f32::NAN;
    assert!(
        !numerics::check(&output, &reference, out).pass,
        "a NaN must fail"
    );
}

/// A deterministic generator (xorshift64*), so every random trial reproduces from its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

pub const SMALL: &str = "siglip-mlp-small";
pub const SMALL_ATTENTION: &str = "attention-flash-small";
pub const SMALL_ATTENTION_ID: &str = "attention-flash-f16-b1-t37-h2-d24-k45-pf32";
pub const SMALL_ID: &str = "siglip-mlp-f16-b1-t21-d40-h72-n2-bias";
/// The seeds the small presets' specs name (their `run` default).
pub const SMALL_SEED: u64 = 7;
pub const SMALL_ATTENTION_SEED: u64 = 3;

pub fn phases() -> Vec<&'static str> {
    ipu_codegen::driver::PIPELINE
        .iter()
        .map(|p| p.name())
        .collect()
}

/// A sandbox holding a graph-spec workload as `NAME.toml` and its weights as `NAME.safetensors`,
/// every weight deterministic values scaled by 1/√fan_in; the parsed spec beside it.
pub fn graph_workload(text: &str, name: &str) -> (Sandbox, ipu_codegen::workload::GraphSpec) {
    use ipu_codegen::ir::ValueRole;
    use ipu_codegen::onnx::WeightData;
    use ipu_codegen::workload::{GraphSpec, graph_spec};
    let sb = Sandbox::new();
    let spec = GraphSpec::parse(text, &format!("{name}.toml")).unwrap();
    let weights = (spec.graph.values.iter())
        .filter(|v| v.role == ValueRole::Weight)
        .map(|v| {
            let data = (0..v.elements())
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0 / (v.fan_in.max(1) as f32).sqrt())
                .collect();
            (v.name.clone(), WeightData::F32(data))
        })
        .collect();
    std::fs::write(sb.path(&format!("{name}.toml")), text).unwrap();
    std::fs::write(
        sb.path(&format!("{name}.safetensors")),
        graph_spec::safetensors_bytes(&spec.graph, &weights).unwrap(),
    )
    .unwrap();
    (sb, spec)
}

/// Whether a test must be skipped because `tool`, something this project did not write, is not
/// installed (`present` false): it says `skipped: …` on stderr. With `IPU_CODEGEN_REQUIRE_TOOLS` set,
/// as `.ci/run` sets it after installing them, a missing tool fails the test instead.
pub fn skip_without(tool: &str, present: bool) -> bool {
    if present {
        return false;
    }
    assert!(
        std::env::var_os("IPU_CODEGEN_REQUIRE_TOOLS").is_none(),
        "{tool} is not installed, and IPU_CODEGEN_REQUIRE_TOOLS requires it"
    );
    eprintln!("skipped: {tool} is not installed");
    true
}

/// The Python that checks against numpy: `IPU_CODEGEN_PYTHON`, else `python3`, if it imports numpy.
pub fn python_with_numpy() -> Option<String> {
    let python = std::env::var("IPU_CODEGEN_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = std::process::Command::new(&python)
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(python)
}

/// A committed test model, `tests/models/NAME`.
pub fn test_model(name: &str) -> String {
    format!("{}/tests/models/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The arguments that import `model` with both inputs (`input_ids`, `attention_mask`) at 1x24 and
/// write its spec to `out`.
pub fn import_args<'a>(model: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "import",
        model,
        "--shape",
        "input_ids=1x24",
        "--shape",
        "attention_mask=1x24",
        "-o",
        out,
    ]
}
