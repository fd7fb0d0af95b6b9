//! `ipu-codegen sweep`: the table, the CSV and the JSON hold the same rows, one per point in grid order
//! whatever the thread count; a point's cycles are what `run` prints for the same flags; a second
//! sweep builds nothing; a point that fails is a row; bad `--vary` inputs are named errors; the page
//! plots one path per line and escapes what it shows. (The README's example runs in tests/readme.rs.)

mod common;
use common::{SMALL, SMALL_ATTENTION, Sandbox};
use std::collections::BTreeMap;

/// A table's header and rows as cells (no cell of these sweeps holds a space: no point fails).
fn table(stdout: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = stdout
        .lines()
        .filter(|l| !l.starts_with("csv=") && !l.starts_with("html="));
    let header = lines.next().expect("a header").split_whitespace();
    let rows = lines
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    (header.map(str::to_string).collect(), rows)
}

/// A CSV without quoted fields: its header and rows.
fn csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect());
    (lines.next().expect("a header"), lines.collect())
}

/// The `key=value` fields of the summary line of `run`'s stdout.
fn summary(stdout: &str) -> BTreeMap<String, String> {
    let line = stdout
        .lines()
        .find(|l| l.contains(" cycles="))
        .unwrap_or_else(|| panic!("no summary line in {stdout}"));
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The cells of the row whose leading cells are `values`.
fn row<'a>(rows: &'a [Vec<String>], values: &[&str]) -> &'a [String] {
    rows.iter()
        .find(|r| r.iter().zip(values).all(|(c, v)| c == v))
        .unwrap_or_else(|| panic!("no row {values:?} in {rows:?}"))
}

/// Four builds, three seeds each.
const GRID: [&str; 7] = [
    "--vary",
    "tokens=21,30",
    "--vary",
    "partials=f16,f32",
    "--vary",
    "seed=5,6,7",
    "--check",
];

#[test]
fn table_csv_and_json_agree_row_by_row_in_grid_order() {
    let sb = Sandbox::new();
    let mut args = vec!["sweep", SMALL, "--csv", "sweep.csv"];
    args.extend(GRID);
    let first = sb.run(&args);
    first.assert_ok();
    assert!(!first.phases_run().is_empty(), "the first sweep built");
    let (header, rows) = table(&first.stdout);
    assert_eq!(
        header,
        [
            "tokens",
            "partials",
            "seed",
            "cycles",
            "efficiencyPercent",
            "estimatedCycles",
            "estimateErrorPercent",
            "hardwareTest",
            "numericalTest",
            "build",
            "error"
        ]
    );
    let points: Vec<[&str; 3]> = rows.iter().map(|r| [&*r[0], &*r[1], &*r[2]]).collect();
    let mut grid = Vec::new();
    for tokens in ["21", "30"] {
        for partials in ["f16", "f32"] {
            for seed in ["5", "6", "7"] {
                grid.push([tokens, partials, seed]);
            }
        }
    }
    assert_eq!(points, grid);
    for r in &rows {
        assert_eq!(r[7..9], ["PASS", "PASS"], "{r:?}");
        assert_eq!(r[10], "-", "{r:?}");
    }
    // The seeds of a point share its build; f32 partials cost cycles, so the points' figures differ.
    assert_eq!(rows[0][9], rows[2][9]);
    assert_ne!(rows[0][9], rows[3][9]);
    assert_ne!(rows[0][3], rows[3][3]);

    let (csv_header, csv_rows) = csv(&std::fs::read_to_string(sb.path("sweep.csv")).unwrap());
    assert_eq!(csv_header, header);
    let as_table = |c: &String| if c.is_empty() { "-".into() } else { c.clone() };
    let csv_rows: Vec<Vec<String>> = csv_rows
        .iter()
        .map(|r| r.iter().map(as_table).collect())
        .collect();
    assert_eq!(csv_rows, rows);

    // A second sweep builds nothing, and with one thread prints the same rows.
    let mut json_args = vec!["sweep", SMALL, "--json"];
    json_args.extend(GRID);
    let json = sb.run(&json_args);
    json.assert_ok();
    assert_eq!(
        json.phases_run(),
        Vec::<String>::new(),
        "the second sweep built"
    );
    let mut one_thread = sb.command(&json_args);
    one_thread.env("RAYON_NUM_THREADS", "1");
    let one_thread = common::ran(one_thread.output().unwrap());
    one_thread.assert_ok();
    assert_eq!(one_thread.stdout, json.stdout);

    let sweep: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(sweep["kind"], "sweep");
    let objects: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_value(sweep["rows"].clone()).unwrap();
    assert_eq!(objects.len(), rows.len());
    for (object, r) in objects.iter().zip(&rows) {
        assert_eq!(
            object.keys().cloned().collect::<Vec<_>>().len(),
            header.len()
        );
        for (key, cell) in header.iter().zip(r) {
            match &object[key] {
                serde_json::Value::Null => assert_eq!(cell, "-", "{key}"),
                serde_json::Value::String(s) => assert_eq!(s, cell, "{key}"),
                n => assert_eq!(
                    n.as_f64().unwrap(),
                    cell.parse::<f64>().unwrap(),
                    "{key}: {n} against {cell}"
                ),
            }
        }
    }
}

#[test]
fn a_points_figures_are_what_run_prints_for_its_flags() {
    // The estimate equals the device's cycles here, so it is the points that must not stand in for
    // each other: their figures differ.
    let sb = Sandbox::new();
    let r = sb.run(&[
        "sweep",
        SMALL_ATTENTION,
        "--vary",
        "key-tokens=45,50",
        "--csv",
        "sweep.csv",
    ]);
    r.assert_ok();
    let (header, rows) = csv(&std::fs::read_to_string(sb.path("sweep.csv")).unwrap());
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let run = summary(&common::assert_pass(
        &sb,
        &["run", SMALL_ATTENTION, "--key-tokens", "50"],
    ));
    assert!(run["workload"].contains("-k50"), "{}", run["workload"]);
    let cycles: f64 = run["cycles"].parse().unwrap();
    let estimated: f64 = run["estimatedCycles"].parse().unwrap();
    let (first, second) = (row(&rows, &["45"]), row(&rows, &["50"]));
    for name in ["cycles", "efficiencyPercent", "estimatedCycles"] {
        assert_eq!(second[column(name)], run[name], "{name}");
    }
    assert_eq!(
        second[column("estimateErrorPercent")],
        format!("{:+.2}", 100.0 * (estimated - cycles) / cycles)
    );
    // The other point's figures differ, so a row taken from the wrong point would fail.
    assert_ne!(first[column("cycles")], run["cycles"]);
    assert_ne!(first[column("estimatedCycles")], run["estimatedCycles"]);
}

#[test]
fn a_point_that_fails_is_a_row_with_its_error_and_the_rest_still_run() {
    let sb = Sandbox::new();
    let r = sb.run(&["sweep", SMALL, "--vary", "tokens=0,21", "--csv", "s.csv"]);
    r.assert_clean_failure();
    assert!(
        r.stderr
            .contains("1 of 2 points failed: point 0 (tokens=0)"),
        "{}",
        r.stderr
    );
    let lines: Vec<&str> = r.stdout.lines().map(str::trim_start).collect();
    assert_eq!(lines.len(), 4, "{}", r.stdout);
    assert!(
        lines[1].starts_with("0 ") && lines[1].ends_with("tokens must be positive, got 0"),
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with("21 ") && lines[2].contains(" PASS "));
    assert_eq!(lines[3], "csv=s.csv");
    let text = std::fs::read_to_string(sb.path("s.csv")).unwrap();
    assert!(
        text.lines().nth(1).unwrap().starts_with("0,,,,,,,"),
        "{text}"
    );
}

#[test]
fn bad_vary_inputs_are_errors_that_name_what_is_wrong() {
    let sb = Sandbox::new();
    let cases: [(&[&str], &str); 10] = [
        (&["tokens"], "--vary \"tokens\": expected NAME=V1,V2,..."),
        (
            &["tokenz=1,2"],
            "unknown name \"tokenz\"; names: target, batch, tokens,",
        ),
        (&["tokenz=1,2"], "; did you mean `tokens`?"),
        (&["tokens="], "tokens has an empty value list"),
        (&["tokens=21,,30"], "the list of tokens has an empty value"),
        (
            &["tokens=abc"],
            "invalid value 'abc' for '--tokens <TOKENS>'",
        ),
        (
            &["partials=f64"],
            "unknown type \"f64\" for --partials <PARTIALS>; types: f16, f32",
        ),
        (
            &["build=x"],
            "a sweep names each point's build folder itself",
        ),
        (&["tokens=21", "tokens=30"], "tokens is varied twice"),
        (
            &[
                "tokens=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17",
                "batch=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16",
            ],
            "the grid has 272 points (tokens 17 × batch 16), over the limit of 256",
        ),
    ];
    for (vary, expected) in cases {
        let mut args = vec!["sweep", SMALL];
        for v in vary {
            args.extend(["--vary", v]);
        }
        let r = sb.run(&args);
        r.assert_clean_failure();
        assert!(r.stderr.contains(expected), "{vary:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{vary:?}: {}", r.stdout);
    }
    // Nothing was built.
    assert!(!sb.stages().exists());
    sb.run(&["sweep", SMALL]).assert_clean_failure();
}

#[test]
fn the_page_plots_one_path_per_line_against_the_first_axis() {
    let sb = Sandbox::new();
    sb.run(&[
        "sweep",
        SMALL,
        "--vary",
        "tokens=21,30,42",
        "--vary",
        "partials=f16,f32",
        "--html",
        "sweep.html",
    ])
    .assert_ok();
    let page = std::fs::read_to_string(sb.path("sweep.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    // Self-contained: no script, nothing fetched (the SVG namespace is a name, not an address).
    let fetched = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for needle in ["<script", "http:", "https:", "src=", "<link"] {
        assert!(!fetched.contains(needle), "the page has {needle}");
    }
    let plots: Vec<&str> = page.split("<svg").skip(1).collect();
    assert_eq!(plots.len(), 2, "cycles and efficiency");
    for plot in &plots {
        let plot = &plot[..plot.find("</svg>").unwrap()];
        let paths: Vec<&str> = plot.split("<path class=\"line\"").skip(1).collect();
        assert_eq!(paths.len(), 2, "one line per partials value");
        for path in paths {
            let d = path
                .split("d=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            assert_eq!(
                (d.matches('M').count(), d.matches('L').count()),
                (1, 2),
                "three points joined: {d}"
            );
        }
        for label in ["tokens", ">21<", ">30<", ">42<"] {
            assert!(plot.contains(label), "the x axis lacks {label}");
        }
    }
    for label in ["partials=f16", "partials=f32"] {
        assert!(
            page.contains(&format!("</span>{label}</li>")),
            "the legend lacks {label}"
        );
    }
    assert_eq!(page.matches("<tr>").count(), 7, "a header and six rows");
}

#[test]
fn the_page_escapes_the_workload_and_errors_it_shows() {
    let sb = Sandbox::new();
    let hostile = "<b onmouseover=alert(1)>.toml";
    let preset = ipu_codegen::workload::preset_text(SMALL).unwrap();
    std::fs::write(
        sb.path(hostile),
        preset.replace("name = \"siglip-mlp\"", "name = \"<i>x</i>\""),
    )
    .unwrap();
    let r = sb.run(&["sweep", hostile, "--vary", "tokens=21", "--html", "p.html"]);
    r.assert_clean_failure();
    let page = std::fs::read_to_string(sb.path("p.html")).unwrap();
    assert!(
        !page.contains("<b onmouseover") && !page.contains("<i>x"),
        "{page}"
    );
    assert!(
        page.contains("&lt;b onmouseover=alert(1)&gt;.toml"),
        "{page}"
    );
    assert!(page.contains("&lt;i&gt;x&lt;/i&gt;"), "{page}");
}
