//! Fingerprints the compiler's source, so the store's action keys change whenever the code does.

use std::path::Path;

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
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
    for root in ["src", "workloads", "Cargo.toml"] {
        let p = Path::new(root);
        if p.is_dir() {
            visit(p, &mut files)
        } else {
            files.push(p.to_path_buf())
        }
        println!("cargo:rerun-if-changed={root}");
    }
    files.sort();
    // FNV-1a over paths and contents: no dependencies in the build script.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in files {
        for b in f
            .to_string_lossy()
            .bytes()
            .chain(std::fs::read(&f).unwrap_or_default())
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=IPU_CODEGEN_SOURCE_HASH={h:016x}");
}
