//! `ipu-codegen report`: the table, the Chrome trace and the HTML page, which headless Chromium renders
//! with a 1472-cell heat map and lays out within a 1,400-pixel window; every superstep named by the
//! graph operations (for an ONNX import, the nodes) it serves.

mod common;
use common::{SMALL, SMALL_ID, Sandbox};
use ipu_codegen::ir::{open_ipuexe, read_ipuexe};
use ipu_codegen::report::{read_profile, write_profile};
use std::process::Command;

fn profiled() -> Sandbox {
    let sb = Sandbox::new();
    sb.run(&["run", SMALL]).assert_ok();
    sb
}

fn report(sb: &Sandbox, extra: &[&str]) -> common::Ran {
    let profile = sb.stages().join(SMALL_ID).join("execution.ipuprofile");
    let mut args = vec!["report", profile.to_str().unwrap()];
    args.extend_from_slice(extra);
    let r = sb.run(&args);
    r.assert_ok();
    r
}

#[test]
fn the_table_lists_every_superstep_with_its_estimate() {
    let sb = profiled();
    let r = report(&sb, &[]);
    for step in 0..8 {
        assert!(r.stdout.contains(&format!("step{step} ")), "{}", r.stdout);
    }
    assert!(
        r.stdout.contains("est/sim")
            && r.stdout.contains("compute")
            && r.stdout.contains("exchange"),
        "{}",
        r.stdout
    );
}

#[test]
fn the_trace_has_a_track_per_tile_or_per_column() {
    let sb = profiled();
    let path = sb.path("trace.json");
    report(&sb, &["--trace", path.to_str().unwrap()]);
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let tracks = events.iter().filter(|e| e["ph"] == "M").count();
    assert_eq!(tracks, 1472);
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "X" && e["cat"] == "compute")
    );
    assert!(
        events
            .iter()
            .all(|e| e["ph"] != "X" || e["dur"].as_f64().unwrap() >= 0.0)
    );
    report(&sb, &["--trace", path.to_str().unwrap(), "--per-column"]);
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "M")
            .count(),
        16
    );
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// Headless Chromium with the flags a test needs, its profile folder in the sandbox.
fn headless(browser: &str, sb: &Sandbox) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1200",
    ])
    .arg(format!("--user-data-dir={}", sb.path("chromium").display()));
    c
}

/// Chromium's stdout for `page`, opened with `mode` (`--dump-dom`, `--screenshot=FILE`).
fn render(browser: &str, sb: &Sandbox, mode: &str, page: &std::path::Path) -> Vec<u8> {
    let out = headless(browser, sb)
        .arg(mode)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Pixels of a screenshot whose channels differ by more than 80: coloured, not grey.
fn coloured_pixels(browser: &str, sb: &Sandbox, page: &std::path::Path) -> usize {
    let shot = sb.path("shot.png");
    let _ = std::fs::remove_file(&shot);
    render(
        browser,
        sb,
        &format!("--screenshot={}", shot.display()),
        page,
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    buf[..info.buffer_size()]
        .chunks(channels)
        .filter(|p| {
            let (lo, hi) = (p[..3].iter().min().unwrap(), p[..3].iter().max().unwrap());
            hi - lo > 80
        })
        .count()
}

/// Needs headless Chromium: ignored where it is absent (`make test` runs it when
/// `IPU_CODEGEN_REQUIRE_CHROMIUM` is set, as `.ci/run` does, and then fails without it).
#[test]
#[ignore = "needs headless Chromium: cargo test --release --test report -- --ignored"]
fn the_html_page_renders_a_heat_map_of_1472_tiles_in_headless_chromium() {
    let browser = chromium().expect("no Chromium (chromium, chromium-browser or google-chrome)");
    let sb = profiled();
    // The profile alone (no package beside it): the page has the heat maps and no memory map.
    let alone = sb.path("alone.ipuprofile");
    std::fs::copy(
        sb.stages().join(SMALL_ID).join("execution.ipuprofile"),
        &alone,
    )
    .unwrap();
    let page = sb.path("profile.html");
    let r = sb.run(&[
        "report",
        alone.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    r.assert_ok();
    let out = render(browser, &sb, "--dump-dom", &page);
    let dom = String::from_utf8_lossy(&out);
    // The cells are made by the page's script: counting them in the rendered DOM shows it ran.
    let busy_map = dom
        .split(r#"id="busy""#)
        .nth(1)
        .unwrap()
        .split(r#"id="memory""#)
        .next()
        .unwrap();
    assert_eq!(busy_map.matches(r#"class="cell""#).count(), 1472);
    assert!(dom.contains("BSP timeline"));
    // The screenshot has colour: the heat maps and the timeline. The same page without its script
    // draws none of them, and the count falls below the bar.
    let coloured = coloured_pixels(browser, &sb, &page);
    let without_script = coloured_pixels(browser, &sb, &without_scripts(&sb, &page, "bare"));
    eprintln!("coloured pixels: {coloured} with the script, {without_script} without");
    assert!(coloured > 40_000, "{coloured} coloured pixels");
    assert!(
        without_script < 40_000,
        "{without_script} coloured pixels without the script"
    );
    // With the package beside the profile, the page also maps a tile's memory, drawn without a
    // script: the bare page gains colour.
    report(&sb, &["--html", page.to_str().unwrap()]);
    let mapped = coloured_pixels(browser, &sb, &without_scripts(&sb, &page, "mapped"));
    eprintln!("coloured pixels without the script: {mapped} with the memory map");
    assert!(
        mapped > without_script + 40_000,
        "{mapped} coloured pixels with the memory map"
    );
}

/// `page` with its script removed, as `name.html`.
fn without_scripts(sb: &Sandbox, page: &std::path::Path, name: &str) -> std::path::PathBuf {
    let html = std::fs::read_to_string(page).unwrap();
    let (head, rest) = html.split_once("<script").unwrap();
    let bare = sb.path(&format!("{name}.html"));
    std::fs::write(
        &bare,
        format!("{head}{}", &rest[rest.find("</script>").unwrap() + 9..]),
    )
    .unwrap();
    bare
}

/// Every superstep of every small preset, as the device ran it, within ±5 % of the compiler's estimate,
/// sync included; the same profile with one estimate a fifth too high fails.
#[test]
fn every_superstep_estimate_is_within_five_percent_of_the_device() {
    let sb = Sandbox::new();
    for preset in [SMALL, "attention-flash-small", "bert-encoder-small"] {
        sb.run(&["run", preset]).assert_ok();
        let id = sb
            .run(&["id", preset])
            .assert_ok()
            .stdout
            .trim()
            .to_string();
        let bytes = std::fs::read(sb.stages().join(&id).join("execution.ipuprofile")).unwrap();
        let mut e = read_profile(&bytes).unwrap();
        let worst = ipu_codegen::report::steps_furthest_off(&e, 1)[0];
        assert!(
            worst.error.abs() <= 0.05,
            "{preset}: step{} estimate off by {:+.3}",
            worst.step,
            worst.error
        );
        let busiest = (0..e.steps.len())
            .max_by_key(|&i| e.steps[i].cycles)
            .unwrap();
        e.steps[busiest].estimated_cycles = e.steps[busiest].cycles * 6 / 5;
        let worst = ipu_codegen::report::steps_furthest_off(&e, 1)[0];
        assert_eq!(worst.step, busiest);
        assert!(
            worst.error.abs() > 0.05,
            "{preset}: a wrong estimate passes"
        );
    }
}

#[test]
fn an_inconsistent_profile_is_refused_naming_the_file_and_what_is_wrong() {
    let sb = profiled();
    let path = sb.stages().join(SMALL_ID).join("execution.ipuprofile");
    let good = read_profile(&std::fs::read(&path).unwrap()).unwrap();
    let damaged: [Damage; 3] = [
        ("clock_khz is 0", |e| e.clock_khz = 0),
        ("0 a column", |e| e.tiles_per_column = 0),
        ("busy figures", |e| e.steps[0].tile_busy.clear()),
    ];
    for (said, damage) in damaged {
        let mut e = good.clone();
        damage(&mut e);
        let crafted = sb.path("crafted.ipuprofile");
        std::fs::write(&crafted, write_profile(&e)).unwrap();
        let page = sb.path("crafted.html");
        let r = sb.run(&[
            "report",
            crafted.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ]);
        r.assert_clean_failure();
        assert!(
            r.stderr
                .contains("crafted.ipuprofile is not a consistent execution profile")
                && r.stderr.contains(said),
            "{}",
            r.stderr
        );
        assert!(!page.exists(), "no page from a refused profile");
    }
}

/// What a damage says, and the damage.
type Damage = (&'static str, fn(&mut ipu_codegen::device::Execution));

#[test]
fn the_profile_names_the_package_it_measured_by_its_body_hash() {
    let sb = profiled();
    let build = sb.stages().join(SMALL_ID);
    let package = std::fs::read(build.join("model.ipuexe")).unwrap();
    let profile =
        read_profile(&std::fs::read(build.join("execution.ipuprofile")).unwrap()).unwrap();
    assert_eq!(
        profile.package,
        open_ipuexe(&package).unwrap().body_hash.hex()
    );
    let r = report(&sb, &[]);
    assert!(
        r.stdout.contains(&format!("package={} ", profile.package)),
        "{}",
        r.stdout
    );
}

#[test]
fn a_damaged_truncated_or_foreign_profile_file_is_refused_naming_the_file_and_writing_nothing() {
    let sb = profiled();
    let bytes = std::fs::read(sb.stages().join(SMALL_ID).join("execution.ipuprofile")).unwrap();
    let mut flipped = bytes.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x20;
    let mut foreign = bytes.clone();
    foreign[..8].copy_from_slice(b"IPUEXE\0\x01");
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("flipped", flipped, "does not match the hash in its header"),
        (
            "truncated",
            bytes[..bytes.len() - 100].to_vec(),
            "is truncated",
        ),
        ("header-only", bytes[..20].to_vec(), "is truncated"),
        ("foreign", foreign, "bad magic"),
    ];
    for (name, damaged, said) in cases {
        let file = sb.path(&format!("{name}.ipuprofile"));
        std::fs::write(&file, damaged).unwrap();
        let (page, trace) = (
            sb.path(&format!("{name}.html")),
            sb.path(&format!("{name}.json")),
        );
        let r = sb.run(&[
            "report",
            file.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ]);
        r.assert_clean_failure();
        assert!(
            r.stderr
                .contains(&format!("{name}.ipuprofile is not an execution profile"))
                && r.stderr.contains(said),
            "{name}: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty(), "{name}: {}", r.stdout);
        assert!(!page.exists() && !trace.exists(), "{name}: nothing written");
    }
}

#[test]
fn every_superstep_of_a_run_names_the_graph_operations_it_serves() {
    let sb = profiled();
    let build = sb.stages().join(SMALL_ID);
    let (_, package) = read_ipuexe(&std::fs::read(build.join("model.ipuexe")).unwrap()).unwrap();
    let profile =
        read_profile(&std::fs::read(build.join("execution.ipuprofile")).unwrap()).unwrap();
    let ops: Vec<&str> = package.graph.ops.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(profile.steps.len(), package.steps.len());
    for (i, (s, p)) in profile.steps.iter().zip(&package.steps).enumerate() {
        assert_eq!(s.operators, p.operators, "step{i}: the package's names");
        assert!(!s.operators.is_empty(), "step{i} names no operation");
        for name in &s.operators {
            assert!(
                ops.contains(&name.as_str()),
                "step{i}: {name} is no graph operation"
            );
        }
        // Each exchange gathers what the compute step after it reads.
        if s.kind == "exchange" {
            assert_eq!(s.operators, profile.steps[i + 1].operators, "step{i}");
        }
    }
    // The two blocks' steps name different operations.
    assert_ne!(profile.steps[1].operators, profile.steps[9].operators);
    // The table's rows end with them; the package's dump shows them.
    let r = report(&sb, &[]);
    for (i, s) in profile.steps.iter().enumerate() {
        let row = r
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("step{i} ")));
        assert!(
            row.is_some_and(|row| row.ends_with(&format!("  {}", s.operators.join(", ")))),
            "step{i}: {row:?}"
        );
    }
    let dump = sb.run(&["show", "build-images", SMALL]);
    let serves = format!(" serves {}", profile.steps[1].operators.join(", "));
    assert!(
        (dump.assert_ok().stdout.lines())
            .any(|l| l.starts_with("  step1 compute ") && l.ends_with(&serves)),
        "{}",
        dump.stdout
    );
}

#[test]
fn an_imported_models_supersteps_are_named_by_its_onnx_nodes() {
    use prost::Message;
    let sb = Sandbox::new();
    let model = common::test_model("encoder.onnx");
    let bytes = std::fs::read(&model).unwrap();
    sb.run(&common::import_args(&model, "out/encoder.toml"))
        .assert_ok();
    sb.run(&["run", "out/encoder.toml", "--random-inputs"])
        .assert_ok();
    let id = sb
        .run(&["id", "out/encoder.toml"])
        .stdout
        .trim()
        .to_string();
    let path = sb.stages().join(&id).join("execution.ipuprofile");
    let profile = read_profile(&std::fs::read(&path).unwrap()).unwrap();
    let nodes: Vec<String> = ipu_codegen::onnx::proto::ModelProto::decode(bytes.as_slice())
        .unwrap()
        .graph
        .unwrap()
        .node
        .into_iter()
        .map(|n| n.name)
        .collect();
    for (i, s) in profile.steps.iter().enumerate() {
        assert!(!s.operators.is_empty(), "step{i} names no node");
        for name in &s.operators {
            assert!(
                nodes.contains(name),
                "step{i}: {name} is no node of the model"
            );
        }
    }
    // The query projection's matmul and its bias are served by one step.
    assert!(
        profile.steps.iter().any(|s| s.kind == "compute"
            && s.operators.contains(&"/l0/query/MatMul_48".to_string())
            && s.operators.contains(&"/l0/query/Add_49".to_string())),
        "{:?}",
        profile
            .steps
            .iter()
            .map(|s| &s.operators)
            .collect::<Vec<_>>()
    );
}

/// A profile of 98 supersteps with long operation names, like an imported model's, made from the
/// small MLP's (its figures repeated, its totals kept consistent).
fn many_steps(sb: &Sandbox) -> std::path::PathBuf {
    let path = sb.stages().join(SMALL_ID).join("execution.ipuprofile");
    let mut e = read_profile(&std::fs::read(&path).unwrap()).unwrap();
    let steps = e.steps.clone();
    e.steps = (0..98)
        .map(|i| {
            let mut s = steps[i % steps.len()].clone();
            s.operators = vec![
                format!("/encoder/layer.{}/attention/self/query/MatMul_{i}", i / 33),
                format!("/encoder/layer.{}/attention/self/query/Add_{i}", i / 33),
            ];
            s
        })
        .collect();
    e.sync_cycles = e.steps.iter().map(|s| s.sync_cycles).sum();
    e.cycles = e.steps.iter().map(|s| s.cycles).sum::<u64>() + e.sync_cycles;
    e.minimum_tile_cycles = e.cycles;
    let crafted = sb.path("many.ipuprofile");
    std::fs::write(&crafted, write_profile(&e)).unwrap();
    crafted
}

/// What the page's layout does wrong in the browser, one line each, written into the page's body by a
/// script added to a copy of `page`: an element wider than its box or the window, a timeline label
/// wider than its bar; and how many heat-map cells name an operation in their tooltip.
const LAYOUT_CHECK: &str = r#"<script>
window.addEventListener("load", () => setTimeout(() => {
  const problems = [];
  if (document.documentElement.scrollWidth > window.innerWidth) {
    problems.push("page " + document.documentElement.scrollWidth + " wide in " + window.innerWidth);
  }
  for (const el of document.body.querySelectorAll("*")) {
    if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) {
      problems.push(el.tagName + "." + el.className + " " + el.scrollWidth + " > " + el.clientWidth);
    }
    const r = el.getBoundingClientRect();
    if (r.right > window.innerWidth + 1) problems.push(el.tagName + " ends at " + r.right);
  }
  for (const text of document.querySelectorAll("svg.timeline text")) {
    const bar = text.previousElementSibling;
    if (text.getBBox().width + 2 > bar.width.baseVal.value) {
      problems.push("label " + text.textContent + " on a bar " + bar.width.baseVal.value + " wide");
    }
  }
  const named = Array.from(document.querySelectorAll(".cell")).filter(c => c.title.includes("serving /encoder/")).length;
  document.body.setAttribute("data-problems", JSON.stringify(problems));
  document.body.setAttribute("data-named", named);
  document.body.setAttribute("data-labels", document.querySelectorAll("svg.timeline text").length);
}, 0));
</script></body>"#;

/// The layout check's findings in `page`: (problems, cells naming an operation, timeline labels).
fn layout_problems(
    browser: &str,
    sb: &Sandbox,
    page: &std::path::Path,
) -> (Vec<String>, usize, usize) {
    let html = std::fs::read_to_string(page).unwrap();
    let checked = page.with_extension("checked.html");
    std::fs::write(&checked, html.replace("</body>", LAYOUT_CHECK)).unwrap();
    let out = render(browser, sb, "--dump-dom", &checked);
    let dom = String::from_utf8_lossy(&out).to_string();
    let attribute = |name: &str| {
        let rest = &dom[dom
            .find(&format!("{name}=\""))
            .unwrap_or_else(|| panic!("no {name}: {dom}"))
            + name.len()
            + 2..];
        rest[..rest.find('"').unwrap()].replace("&quot;", "\"")
    };
    let problems: Vec<String> = serde_json::from_str(&attribute("data-problems")).unwrap();
    let named = attribute("data-named").parse().unwrap();
    let labels = attribute("data-labels").parse().unwrap();
    (problems, named, labels)
}

/// Needs headless Chromium: ignored where it is absent, as the page-rendering test above.
#[test]
#[ignore = "needs headless Chromium: cargo test --release --test report -- --ignored"]
fn the_pages_fit_a_1400_pixel_window_with_uncut_labels_in_headless_chromium() {
    let browser = chromium().expect("no Chromium (chromium, chromium-browser or google-chrome)");
    let sb = profiled();
    let many = many_steps(&sb);
    let real = sb.stages().join(SMALL_ID).join("execution.ipuprofile");
    let page = sb.path("many.html");
    let package = sb.stages().join(SMALL_ID).join("model.ipuexe");
    let r = sb.run(&[
        "report",
        many.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
        "--package",
        package.to_str().unwrap(),
    ]);
    r.assert_ok();
    assert!(
        std::fs::read_to_string(&page)
            .unwrap()
            .contains("memory map of tile")
    );
    let (problems, named, labels) = layout_problems(browser, &sb, &page);
    assert_eq!(problems, Vec::<String>::new());
    assert!(labels > 0, "no timeline label");
    // The busy tiles' tooltips name the operations of their busiest steps.
    assert!(named > 0, "no cell names an operation");
    let compared = sb.path("compare.html");
    let r = sb.run(&[
        "report",
        many.to_str().unwrap(),
        real.to_str().unwrap(),
        "--html",
        compared.to_str().unwrap(),
    ]);
    r.assert_ok();
    let (problems, _, _) = layout_problems(browser, &sb, &compared);
    assert_eq!(problems, Vec::<String>::new());
}
