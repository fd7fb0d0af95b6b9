//! `run`'s `.npz` archives and `--input NAME=@FILE`: inputs bound from one archive (numpy's `savez` and
//! `savez_compressed`), every output written into one (which numpy reads back), the same run as with
//! `.npy` files; a damaged or mismatched archive is an error naming the file and the entry, never a
//! panic. The checks against numpy are skipped, and say so, where numpy is missing.

mod common;
use common::{SMALL, Sandbox};
use ipu_codegen::tensors::{Elements, Tensor, npy, npz};
use std::process::Command;

/// The small preset's input.
fn x() -> Tensor {
    Tensor {
        shape: vec![21, 40],
        elements: Elements::F32((0..21 * 40).map(|i| (i % 13) as f32 / 8.0 - 0.7).collect()),
    }
}

fn python(sb: &Sandbox, python: &str, program: &str) -> String {
    let out = Command::new(python)
        .args(["-c", program])
        .current_dir(sb.dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `.npy` bytes of each output a run wrote into `dir` with `--output-dir`.
fn npy_outputs(sb: &Sandbox, dir: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(sb.path(dir))
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn an_archive_binds_inputs_and_holds_outputs_as_npy_files_do() {
    let sb = Sandbox::new();
    std::fs::write(sb.path("x.npy"), npy::write(&x())).unwrap();
    std::fs::write(
        sb.path("in.npz"),
        npz::write(&[("x".to_string(), x())]).unwrap(),
    )
    .unwrap();
    let plain = sb.run(&["run", SMALL, "--input", "x=x.npy", "--output-dir", "a"]);
    plain.assert_ok();
    let at = sb.run(&["run", SMALL, "--input", "x=@x.npy", "--output-dir", "b"]);
    at.assert_ok();
    let archive = sb.run(&[
        "run",
        SMALL,
        "--inputs",
        "in.npz",
        "--output-dir",
        "c",
        "--output",
        "out.npz",
    ]);
    archive.assert_ok();
    assert!(
        archive.stdout.contains("output=out.npz\n"),
        "{}",
        archive.stdout
    );
    let a = npy_outputs(&sb, "a");
    assert_eq!(a, npy_outputs(&sb, "b"), "NAME=@FILE binds as NAME=FILE");
    assert_eq!(
        a,
        npy_outputs(&sb, "c"),
        "an archive binds as .npy files do"
    );
    // The archive holds each output as the .npy file holds it.
    let outputs = npz::read(&std::fs::read(sb.path("out.npz")).unwrap(), 1 << 30).unwrap();
    assert_eq!(outputs.len(), a.len());
    for ((name, tensor), (file, bytes)) in outputs.iter().zip(&a) {
        assert_eq!(format!("{name}.npy"), *file);
        assert_eq!(npy::write(tensor), *bytes, "{name}");
    }
    // Another seed's inputs would give other outputs: the archive's x was used.
    let seeded = sb.run(&["run", SMALL, "--output-dir", "d"]);
    seeded.assert_ok();
    assert_ne!(a, npy_outputs(&sb, "d"));
}

#[test]
fn numpy_writes_archives_run_reads_and_reads_run_s_archive() {
    let py = common::python_with_numpy();
    if common::skip_without("numpy (IPU_CODEGEN_PYTHON or python3)", py.is_some()) {
        return;
    }
    let py = py.unwrap_or_default();
    let sb = Sandbox::new();
    std::fs::write(sb.path("x.npy"), npy::write(&x())).unwrap();
    python(
        &sb,
        &py,
        "import numpy as np\nx = np.load('x.npy')\nnp.savez('stored.npz', x=x)\n\
         np.savez_compressed('deflated.npz', x=x)",
    );
    sb.run(&["run", SMALL, "--input", "x=x.npy", "--output-dir", "want"])
        .assert_ok();
    let want = npy_outputs(&sb, "want");
    for (archive, dir) in [("stored.npz", "stored"), ("deflated.npz", "deflated")] {
        sb.run(&[
            "run",
            SMALL,
            "--inputs",
            archive,
            "--output-dir",
            dir,
            "--output",
            &format!("{dir}-out.npz"),
        ])
        .assert_ok();
        assert_eq!(npy_outputs(&sb, dir), want, "{archive}");
    }
    // numpy reads the outputs' archive: the same names, shapes, types and values as the .npy files.
    let said = python(
        &sb,
        &py,
        "import numpy as np, os\nz = np.load('stored-out.npz')\n\
         for name in sorted(z.files):\n    a = z[name]\n    b = np.load(os.path.join('want', name + '.npy'))\n\
         \x20   assert a.dtype == b.dtype and a.shape == b.shape and (a == b).all(), name\n\
         \x20   print(name, a.dtype, a.shape)",
    );
    assert_eq!(said.lines().count(), want.len(), "{said}");
    println!("numpy: {said}");
}

#[test]
fn damaged_or_mismatched_archives_are_errors_naming_file_and_entry() {
    let sb = Sandbox::new();
    let good = npz::write(&[("x".to_string(), x())]).unwrap();
    let write = |name: &str, bytes: &[u8]| std::fs::write(sb.path(name), bytes).unwrap();
    write("cut.npz", &good[..good.len() / 2]);
    write("wrong.npz", &npz::write(&[("y".to_string(), x())]).unwrap());
    let mut short = x();
    short.shape = vec![20, 42];
    write(
        "shape.npz",
        &npz::write(&[("x".to_string(), short)]).unwrap(),
    );
    let mut damaged = good.clone();
    let at = damaged.windows(6).position(|w| w == npy::MAGIC).unwrap();
    damaged[at + 6] = 9;
    write("damaged.npz", &damaged);
    let mut text = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    text.start_file("notes.txt", zip::write::SimpleFileOptions::default())
        .unwrap();
    std::io::Write::write_all(&mut text, b"hello").unwrap();
    write("text.npz", &text.finish().unwrap().into_inner());
    write("x.npy", &npy::write(&x()));
    write("twice.npz", &good);
    for (args, said) in [
        (
            &["--inputs", "cut.npz"][..],
            "inputs archive cut.npz: not a .npz archive",
        ),
        (
            &["--inputs", "wrong.npz"],
            "wrong.npz (entry y.npy): the package takes no input \"y\"",
        ),
        (
            &["--inputs", "shape.npz"],
            "shape.npz (entry x.npy): tensor \"x\" has shape [20, 42]",
        ),
        (&["--inputs", "damaged.npz"], "damaged.npz: entry \"x.npy\""),
        (
            &["--inputs", "text.npz"],
            "text.npz: entry \"notes.txt\" is not an array",
        ),
        (
            &["--inputs", "missing.npz"],
            "reading inputs archive missing.npz",
        ),
        (
            &["--inputs", "x.npy"],
            "inputs archive x.npy is not a .npz archive",
        ),
        (
            &["--inputs", "twice.npz", "--input", "x=x.npy"],
            "--input x: given twice",
        ),
        (&["--input", "x=@"], "--input \"x=@\": no file after `=`"),
        (&["--input", "=x.npy"], "expected NAME=FILE.npy"),
    ] {
        let mut all = vec!["run", SMALL];
        all.extend(args);
        let r = sb.run(&all);
        r.assert_clean_failure();
        assert!(r.stderr.contains(said), "{args:?}: {}", r.stderr);
    }
}
