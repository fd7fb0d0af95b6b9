//! Fingerprints what determines the compiler's output: its source (`src/`), `Cargo.toml`,
//! `Cargo.lock` and the rustc version, so the store's action keys change whenever any of them does.
//! The workload presets are data read at run time and stay out of it: editing one invalidates only
//! its own builds.

use std::path::{Path, PathBuf};

fn visit(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            visit(&p, files);
        } else {
            files.push(p);
        }
    }
}

fn main() {
    let mut files = Vec::new();
    for root in ["src", "Cargo.toml", "Cargo.lock"] {
        let p = Path::new(root);
        if p.is_dir() {
            visit(p, &mut files)
        } else {
            files.push(p.to_path_buf())
        }
        println!("cargo:rerun-if-changed={root}");
    }
    files.sort();
    let mut h = blake3::Hasher::new_derive_key("ipu-codegen compiler fingerprint v1");
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    for f in &files {
        field(f.to_string_lossy().as_bytes());
        field(&std::fs::read(f).unwrap_or_default());
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    field(&version);
    let hex = h.finalize().to_hex();
    println!("cargo:rustc-env=IPU_CODEGEN_SOURCE_HASH={}", &hex[..16]);
}
