//! The profile file, its check, and what `report` makes of crafted profiles.

use super::summary::tile_furthest;
use super::*;
use crate::device::StepProfile;

/// What a damage says, and the damage.
type Damage = (&'static str, fn(&mut Execution));

fn execution(estimates: [Vec<u32>; 2]) -> Execution {
    let step = |operators: &[&str], tile_estimates: Vec<u32>| StepProfile {
        kind: "compute".to_string(),
        operators: operators.iter().map(|o| o.to_string()).collect(),
        estimated_cycles: 100,
        cycles: 100,
        sync_cycles: 118,
        estimated_sync_cycles: 90,
        tile_busy: vec![100, 90, 0],
        tile_estimates,
    };
    let [a, b] = estimates;
    Execution {
        workload: "w".to_string(),
        target: "mk2-1500".to_string(),
        package: ContentHash::of(b"package").hex(),
        clock_khz: 1_500_000,
        tiles_per_column: 3,
        cycles: 436,
        minimum_tile_cycles: 436,
        sync_cycles: 236,
        steps: vec![
            step(&["/l0/query/MatMul", "/l0/query/Add"], a),
            step(&["/l0/key/MatMul"], b),
        ],
        memory: vec![(0, 0); 3],
        input_bytes: 0,
        output_bytes: 0,
        weight_bytes: 0,
    }
}

#[test]
fn the_table_lists_the_tiles_and_steps_whose_estimates_are_furthest_off() {
    let e = execution([vec![100, 90, 0], vec![104, 90, 0]]);
    let t = Summary::of(&e).text();
    assert!(
        t.contains(
            "estimate furthest off by tile:\n  step1 tile0 estimate 104 device 100 (+4.0 %) serving \
             /l0/key/MatMul\n"
        ),
        "{t}"
    );
    // One tile's estimate moved: the list follows it, the others after it.
    let e = execution([vec![100, 81, 0], vec![104, 90, 0]]);
    let t = Summary::of(&e).text();
    assert!(
        t.contains(
            "estimate furthest off by tile:\n  step0 tile1 estimate 81 device 90 (-10.0 %) serving \
             /l0/query/MatMul, /l0/query/Add\n  \
             step1 tile0 estimate 104 device 100 (+4.0 %) serving /l0/key/MatMul\n"
        ),
        "{t}"
    );
    let errors: Vec<f64> = (tile_furthest(&e).iter())
        .map(|t| t.map_or(0.0, |t| 100.0 * t.error()))
        .collect();
    assert_eq!(errors, [4.0, -10.0, 0.0]);
    // The steps' syncs count: 100 + 90 estimated against 100 + 118 on the device.
    let steps = steps_furthest_off(&e, 5);
    assert_eq!(steps.len(), 2);
    assert_eq!(
        (steps[0].step, steps[0].estimate, steps[0].device),
        (0, 190, 218)
    );
    assert!(t.contains("estimate furthest off by superstep, sync included:\n  step0 estimate 190 device 218 (-12.8 %) serving /l0/query/MatMul, /l0/query/Add\n"), "{t}");
    let mut e = e;
    e.steps[1].estimated_cycles = 50;
    let steps = steps_furthest_off(&e, 1);
    assert_eq!((steps.len(), steps[0].step), (1, 1));
}

#[test]
fn a_consistent_profile_passes_the_check_and_each_inconsistency_is_named() {
    let good = execution([vec![100, 90, 0], vec![104, 90, 0]]);
    assert_eq!(check(&good), Vec::<String>::new());
    let damaged: [Damage; 8] = [
        ("package \"v7\" is not a blake3 hash", |e| {
            e.package = "v7".to_string()
        }),
        ("clock_khz is 0", |e| e.clock_khz = 0),
        ("3 tiles, 0 a column", |e| e.tiles_per_column = 0),
        ("step1: 2 busy figures for 3 tiles", |e| {
            e.steps[1].tile_busy.pop();
        }),
        ("step0: 1 estimates for 3 tiles", |e| {
            e.steps[0].tile_estimates = vec![5];
        }),
        ("step0: a tile busy 101 cycles in a step of 100", |e| {
            e.steps[0].tile_busy[2] = 101
        }),
        (
            "437 cycles are not the supersteps' 200 and the syncs' 236",
            |e| e.cycles = 437,
        ),
        ("236 sync cycles are not the sum of the steps' syncs", |e| {
            e.steps[1].sync_cycles = 117
        }),
    ];
    for (said, damage) in damaged {
        let mut e = good.clone();
        damage(&mut e);
        let errors = check(&e);
        assert!(errors.iter().any(|x| x == said), "{said}: {errors:?}");
    }
}

#[test]
fn a_crafted_profile_is_reported_without_a_panic_and_its_names_escaped() {
    let mut e = execution([Vec::new(), vec![1, 2, 3, 4, 5]]);
    e.workload = "<img src=x onerror=alert(1)>".to_string();
    e.tiles_per_column = 0;
    e.steps[0].tile_busy.clear();
    e.steps[1].tile_busy = vec![u32::MAX];
    e.target = "</title><script>alert(2)</script>".to_string();
    let page = html(&e, Err("<b>none</b>"));
    assert!(!page.contains("<img") && page.contains("&lt;img"), "{page}");
    assert!(!page.contains("alert(2)</script>") && !page.contains("<b>none"));
    let compared = compare::html(&e, &execution([Vec::new(), Vec::new()]));
    assert!(!compared.contains("<img") && compared.contains("&lt;img"));
    let _ = (Summary::of(&e).json(), trace(&e, true), trace(&e, false));
    let _ = Comparison::of(&e, &e).text();
}

#[test]
fn a_profile_file_reads_back_and_each_damage_is_refused_by_name() {
    let e = execution([vec![100, 90, 0], vec![104, 90, 0]]);
    let file = write_profile(&e);
    assert_eq!(read_profile(&file).unwrap(), e);
    let mut flipped = file.clone();
    *flipped.last_mut().unwrap() ^= 1;
    let mut magic = file.clone();
    magic[0] = b'X';
    let cases: [(&[u8], &str); 5] = [
        (&flipped, "does not match the hash"),
        (&file[..file.len() - 1], "truncated"),
        (&file[..5], "truncated"),
        (&[file.as_slice(), b"x"].concat(), "1 bytes past its end"),
        (&magic, "bad magic"),
    ];
    for (bytes, said) in cases {
        let error = read_profile(bytes).unwrap_err().to_string();
        assert!(error.contains(said), "{said}: {error}");
    }
    // A body of the schema before, behind a header that checks, is refused by the store.
    #[derive(serde::Serialize, serde::Deserialize)]
    #[serde(transparent)]
    struct Before(Execution);
    impl crate::store::Artifact for Before {
        const KIND: &'static str = "profile";
        const SCHEMA: u32 = 5;
    }
    let before = behind_header(&crate::store::encode(&Before(e)).joined());
    let error = read_profile(&before).unwrap_err().to_string();
    assert!(error.contains("profile schema 5"), "{error}");
}

/// xorshift64: deterministic, so a failure reproduces.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The header `write_profile` puts before `body`.
fn behind_header(body: &[u8]) -> Vec<u8> {
    let mut file = PROFILE_MAGIC.to_vec();
    file.extend_from_slice(&(body.len() as u64).to_le_bytes());
    file.extend_from_slice(&ContentHash::of(body).0);
    file.extend_from_slice(body);
    file
}

#[test]
fn random_bytes_and_mutations_of_a_profile_file_never_panic_the_reader() {
    let file = write_profile(&execution([vec![100, 90, 0], vec![104, 90, 0]]));
    let body = &file[PROFILE_HEADER..];
    let mut state = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..2000 {
        // Random bytes, half of them behind the magic so the reader gets further.
        let len = (next(&mut state) % 160) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next(&mut state) as u8).collect();
        if next(&mut state).is_multiple_of(2) {
            bytes.splice(0..0, PROFILE_MAGIC.iter().copied());
        }
        assert!(read_profile(&bytes).is_err());
        // One byte of the file changed: refused, whichever byte.
        let mut mutated = file.clone();
        let at = (next(&mut state) % file.len() as u64) as usize;
        mutated[at] ^= (next(&mut state) % 255 + 1) as u8;
        assert!(read_profile(&mutated).is_err(), "byte {at} changed");
        // One byte of the body changed behind a header that checks: the decoder sees it.
        let mut body = body.to_vec();
        let at = (next(&mut state) % body.len() as u64) as usize;
        body[at] = next(&mut state) as u8;
        let _ = read_profile(&behind_header(&body));
        // Random bytes behind a header that checks.
        let _ = read_profile(&behind_header(&bytes));
    }
}

/// `execution` with a different memory on each tile, so every map has a range.
fn varied() -> Execution {
    let mut e = execution([vec![100, 81, 0], vec![104, 90, 0]]);
    e.memory = vec![(100, 16), (50, 0), (0, 0)];
    e
}

#[test]
fn every_step_and_tile_tooltip_names_the_operations_it_serves() {
    let e = varied();
    let page = html(&e, Err("none"));
    // The timeline's bars and the table's rows name each step's operations in full.
    assert!(
        page.contains("step0 compute: 100 cycles (estimate 100); serves /l0/query/MatMul, /l0/query/Add</title>"),
        "{page}"
    );
    assert!(
        page.contains("step1 compute: 100 cycles (estimate 100); serves /l0/key/MatMul</title>")
    );
    assert!(page.contains(r#"<tr data-step="0" data-serves="/l0/query/MatMul, /l0/query/Add">"#));
    assert!(page.contains(r#"<td class="names">/l0/key/MatMul</td>"#));
    // The tiles' tooltips read the names from the rows, by the step each tile is about: tile1 is
    // busiest in step0 (90 cycles, the first of equals) and furthest off in step0 (-10 %).
    assert!(page.contains("const busiest = [0,0,-1];"), "{page}");
    assert!(page.contains("const errorSteps = [1,0,-1];"), "{page}");
    assert!(page.contains(r##"querySelectorAll("#steps tr[data-step]")"##));
    assert!(page.contains(r#"", serving " + serves[s]"#));
    // The text names them where the estimate is furthest off, and on every step's row.
    let text = Summary::of(&e).text();
    let row = text.lines().find(|l| l.starts_with("step1 ")).unwrap();
    assert!(row.ends_with("  /l0/key/MatMul"), "{row}");
    // A name is text, never markup.
    let mut e = e;
    e.steps[0].operators = vec!["<b>x</b>".to_string()];
    let page = html(&e, Err("none"));
    assert!(!page.contains("<b>x") && page.contains("&lt;b&gt;x"));
}

/// The text between `from` and the next `to` after it, in `page`.
fn between<'a>(page: &'a str, from: &str, to: &str) -> &'a str {
    let rest = &page[page.find(from).unwrap_or_else(|| panic!("no {from}")) + from.len()..];
    &rest[..rest.find(to).unwrap()]
}

#[test]
fn every_heat_map_has_a_legend_with_its_scales_ends_and_unit() {
    let e = varied();
    let page = html(&e, Err("none"));
    // Busy cycles over the run: 200, 180 and 0; memory 116, 50 and 0 bytes; the estimate from
    // -10 % to +4 %, drawn from -10 % to +10 % around 0.
    let legends: Vec<&str> = page.split(r#"<div class="legend""#).skip(1).collect();
    assert_eq!(legends.len(), 3, "{page}");
    let ends = |legend: &str| {
        (
            between(legend, r#"<span class="lo">"#, "<").to_string(),
            between(legend, r#"<span class="hi">"#, "<").to_string(),
        )
    };
    assert_eq!(ends(legends[0]), ("0 cycles".into(), "200 cycles".into()));
    assert_eq!(ends(legends[1]), ("0 bytes".into(), "116 bytes".into()));
    assert_eq!(ends(legends[2]), ("-10.0 %".into(), "+10.0 %".into()));
    assert!(legends[2].contains("<span>+0.0 %</span>"));
    // Each legend is drawn before the map's caption, and the script colours the cells on the
    // legend's scale.
    for (map, legend) in ["busy", "memory", "estimate"].iter().zip(&legends) {
        assert!(page.find(&format!(r#"id="{map}""#)) < page.find(*legend));
        assert!(
            legend.contains("linear-gradient(to right, hsl("),
            "{legend}"
        );
    }
    assert!(page.contains("const busyScale = [0, 200];"), "{page}");
    assert!(page.contains("const memoryScale = [0, 116];"));
    assert!(page.contains("const errorScale = [-10, 10];"));
}

/// The timeline's bars with their labels: (width, label) of each bar that has one.
fn labelled_bars(svg: &str) -> Vec<(f64, String)> {
    svg.split("<g>")
        .skip(1)
        .filter(|g| g.contains("<text"))
        .map(|g| {
            let width: f64 = between(g, r#"width=""#, "\"").parse().unwrap();
            let text = between(g, "<text", "</text>");
            (width, text[text.find('>').unwrap() + 1..].to_string())
        })
        .collect()
}

#[test]
fn tables_are_tables_in_boxes_of_their_own_and_timeline_labels_fit_their_bars() {
    let mut e = varied();
    // 98 steps, one of them long with a long name: only bars wide enough carry a label.
    let long = "/encoder/layer.0/attention/self/query/MatMul_48".to_string();
    let template = e.steps[0].clone();
    e.steps = (0..98)
        .map(|i| StepProfile {
            operators: vec![format!("{long}_{i}")],
            cycles: if i == 40 { 30_000 } else { 100 },
            ..template.clone()
        })
        .collect();
    e.sync_cycles = 98 * 118;
    e.cycles = e.steps.iter().map(|s| s.cycles).sum::<u64>() + e.sync_cycles;
    for page in [html(&e, Err("none")), compare::html(&e, &varied())] {
        assert!(!page.contains("<pre"), "no preformatted table");
        // Every table sits in a box that scrolls it, so the page never does.
        let tables = page.matches("<table").count();
        assert!(tables >= 1);
        assert_eq!(
            page.matches(r#"<div class="scroll"><table"#).count(),
            tables
        );
        assert!(!page.contains("overflow: hidden") && !page.contains("overflow:hidden"));
        // A timeline label is never wider than its bar: the long step carries its full name, the
        // short ones none, or a number that fits.
        let svg = between(&page, r#"<svg class="timeline""#, "</svg>");
        let bars = labelled_bars(svg);
        assert!(!bars.is_empty(), "{svg}");
        for (width, label) in &bars {
            assert!(
                page::label_width(label) + 4.0 <= *width,
                "{label} on {width}"
            );
        }
        if page.contains("step40 ") {
            assert!(
                bars.iter().any(|(_, l)| *l == format!("step40 {long}_40")),
                "{bars:?}"
            );
        }
    }
}

#[test]
fn every_ratio_of_a_comparison_is_labelled_as_it_is_computed() {
    let a = varied();
    let mut b = varied();
    b.steps[1].cycles = 50;
    b.steps.push(b.steps[0].clone());
    b.cycles = b.steps.iter().map(|s| s.cycles + s.sync_cycles).sum();
    b.sync_cycles = 3 * 118;
    let c = Comparison::of(&a, &b);
    let text = c.text();
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("step ")).unwrap();
    let columns: Vec<&str> = lines[header].split_whitespace().collect();
    assert_eq!(columns.last(), Some(&"B/A"), "{text}");
    // Every step's ratio is its B cycles over its A cycles.
    for (line, p) in lines[header + 1..].iter().zip(&c.steps) {
        let ratio = line.split_whitespace().last().unwrap();
        match (p.cycles_a, p.cycles_b) {
            (Some(x), Some(y)) => assert_eq!(ratio, format!("{:.3}", y as f64 / x as f64)),
            _ => assert_eq!(ratio, "-"),
        }
    }
    // The run's ratio under the same label, computed the same way.
    let run = format!("B/A {:.3}", b.cycles as f64 / a.cycles as f64);
    let footer = lines.last().unwrap();
    assert!(footer.ends_with(&run), "{footer}");
    assert!(!text.contains("A/B"), "{text}");
    let page = compare::html(&a, &b);
    assert!(page.contains(&run) && !page.contains("A/B"), "{page}");
    assert!(page.contains("<th>B/A</th>"));
    assert!(page.contains(&format!("<td>{:.3}</td>", 50.0 / 100.0)));
}
