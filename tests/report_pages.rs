//! `ipu-codegen report`'s JSON, a tile's memory map on the page, and the comparison of two profiles,
//! each checked against what the profile and the package say read independently.

mod common;
use common::{SMALL, SMALL_ID, Sandbox};
use ipu_codegen::ir::read_ipuexe;
use ipu_codegen::report::read_profile;

/// The small MLP run with its default two blocks and with one.
fn two_runs() -> (Sandbox, String, String) {
    let sb = Sandbox::new();
    sb.run(&["run", SMALL]).assert_ok();
    let one = sb.run(&["id", SMALL, "--blocks", "1"]);
    one.assert_ok();
    sb.run(&["run", SMALL, "--blocks", "1"]).assert_ok();
    let profile = |id: &str| {
        sb.stages()
            .join(id)
            .join("execution.ipuprofile")
            .to_str()
            .unwrap()
            .to_string()
    };
    let (a, b) = (profile(SMALL_ID), profile(one.stdout.trim()));
    (sb, a, b)
}

#[test]
fn report_json_has_the_profiles_figures_and_the_tables_fields() {
    let (sb, a, _) = two_runs();
    let profile = read_profile(&std::fs::read(&a).unwrap()).unwrap();
    let r = sb.run(&["report", &a, "--json"]);
    r.assert_ok();
    let json: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(json["cycles"], profile.cycles);
    assert_eq!(json["package"], profile.package.as_str());
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps.len(), profile.steps.len());
    for (s, p) in steps.iter().zip(&profile.steps) {
        assert_eq!(
            (s["cycles"].as_u64(), s["kind"].as_str()),
            (Some(p.cycles), Some(&*p.kind))
        );
    }
    let compute: u64 = profile
        .steps
        .iter()
        .filter(|s| s.kind == "compute")
        .map(|s| s.cycles)
        .sum();
    assert_eq!(json["computeCycles"], compute);
    // The text prints the same figures.
    let text = sb.run(&["report", &a]);
    assert!(text.stdout.contains(&format!("cycles={} ", profile.cycles)));
    assert!(text.stdout.contains(&format!("compute {compute} (")));
}

#[test]
fn two_profiles_compare_step_by_step_and_a_run_against_itself_differs_nowhere() {
    let (sb, a, b) = two_runs();
    let (pa, pb) = (
        read_profile(&std::fs::read(&a).unwrap()).unwrap(),
        read_profile(&std::fs::read(&b).unwrap()).unwrap(),
    );
    assert!(
        pa.steps.len() > pb.steps.len(),
        "two blocks have more steps than one"
    );
    let r = sb.run(&["report", &a, &b, "--json"]);
    r.assert_ok();
    let c: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        c["delta"],
        i64::try_from(pb.cycles).unwrap() - i64::try_from(pa.cycles).unwrap()
    );
    let steps = c["steps"].as_array().unwrap();
    assert_eq!(steps.len(), pa.steps.len());
    for (i, s) in steps.iter().enumerate() {
        let want_b = pb.steps.get(i).map(|s| s.cycles);
        let sync_b = pb.steps.get(i).map(|s| s.sync_cycles);
        assert_eq!(s["cyclesA"].as_u64(), Some(pa.steps[i].cycles));
        assert_eq!(s["cyclesB"].as_u64(), want_b);
        assert_eq!(s["syncA"].as_u64(), Some(pa.steps[i].sync_cycles));
        assert_eq!(s["syncB"].as_u64(), sync_b);
        // The step's delta counts its sync, so the steps' deltas add up to the runs'.
        let delta = (want_b.unwrap_or(0) + sync_b.unwrap_or(0)) as i64
            - (pa.steps[i].cycles + pa.steps[i].sync_cycles) as i64;
        assert_eq!(s["delta"], delta, "step{i}");
    }
    let deltas: i64 = steps.iter().map(|s| s["delta"].as_i64().unwrap()).sum();
    assert_eq!(c["delta"], deltas);
    // The table and the page.
    let page = sb.path("compare.html");
    let t = sb.run(&["report", &a, &b, "--html", page.to_str().unwrap()]);
    t.assert_ok();
    assert!(
        t.stdout
            .contains(&format!("cycles: A {} B {}", pa.cycles, pb.cycles)),
        "{}",
        t.stdout
    );
    // The last step is A's alone: B's side shows `-`.
    let last = format!("step{} ", pa.steps.len() - 1);
    let line = t.stdout.lines().find(|l| l.starts_with(&last)).unwrap();
    assert_eq!(line.split_whitespace().nth(3), Some("-"), "{line}");
    let html = std::fs::read_to_string(&page).unwrap();
    // Both runs' bars in the chart, beside both timelines' bars (a step and its sync each).
    assert_eq!(
        html.matches(r#"<rect class="step""#).count(),
        2 * pa.steps.len()
    );
    assert_eq!(
        html.matches("<rect").count(),
        4 * pa.steps.len() + 2 * pb.steps.len()
    );
    // A run against itself: every delta is zero.
    let same = sb.run(&["report", &a, &a, "--json"]);
    let c: serde_json::Value = serde_json::from_str(&same.stdout).unwrap();
    assert!(
        c["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["delta"] == 0)
    );
    assert_eq!(c["speedup"], 1.0);
    // What takes one profile is refused with two.
    let r = sb.run(&[
        "report",
        &a,
        &b,
        "--trace",
        sb.path("t.json").to_str().unwrap(),
    ]);
    r.assert_clean_failure();
    assert!(r.stderr.contains("take one profile"), "{}", r.stderr);
}

/// `report PROFILE --html page.html EXTRA…`: the run, and the page if it succeeded.
fn page(sb: &Sandbox, profile: &str, extra: &[&str]) -> (common::Ran, String) {
    let page = sb.path("page.html");
    let _ = std::fs::remove_file(&page);
    let mut args = vec!["report", profile, "--html", page.to_str().unwrap()];
    args.extend_from_slice(extra);
    let r = sb.run(&args);
    let html = std::fs::read_to_string(&page).unwrap_or_default();
    (r, html)
}

#[test]
fn the_page_maps_a_tiles_buffers_from_the_package_the_profile_measured() {
    let (sb, a, b) = two_runs();
    let package = std::path::Path::new(&a).with_file_name("model.ipuexe");
    let (_, p) = read_ipuexe(&std::fs::read(&package).unwrap()).unwrap();
    // The tile with the most buffers, asked for by number: one rect per buffer, each listed.
    let tile = (0..p.tiles.len())
        .max_by_key(|&t| p.tiles[t].buffers.len())
        .unwrap();
    let (r, html) = page(&sb, &a, &["--tile", &tile.to_string()]);
    r.assert_ok();
    assert!(
        html.contains(&format!("memory map of tile {tile}")),
        "{html}"
    );
    let buffers = &p.tiles[tile].buffers;
    assert_eq!(html.matches(r#"class="buffer""#).count(), buffers.len());
    for bf in buffers {
        assert!(html.contains(&format!(
            "{:#x}, {} bytes: {:?}",
            bf.address, bf.bytes, bf.label.class
        )));
    }
    // The default tile is the one using the most memory.
    let profile = read_profile(&std::fs::read(&a).unwrap()).unwrap();
    let most = profile.memory.iter().map(|&(s, i)| s + i).max().unwrap();
    let busiest = profile
        .memory
        .iter()
        .position(|&(s, i)| s + i == most)
        .unwrap();
    let (r, html) = page(&sb, &a, &[]);
    r.assert_ok();
    assert!(
        html.contains(&format!("memory map of tile {busiest}<")),
        "tile {busiest}"
    );
    // Another run's package is refused by its hash; a tile off the chip by its number.
    let other = std::path::Path::new(&b).with_file_name("model.ipuexe");
    let (r, _) = page(&sb, &a, &["--package", other.to_str().unwrap()]);
    r.assert_clean_failure();
    assert!(
        r.stderr.contains("but the profile measured package"),
        "{}",
        r.stderr
    );
    let (r, _) = page(&sb, &a, &["--tile", "5000"]);
    r.assert_clean_failure();
    assert!(
        r.stderr
            .contains("tile 5000 is not on the chip (1472 tiles)"),
        "{}",
        r.stderr
    );
    // Without the package beside it, the page says why it has no map.
    let alone = sb.path("alone.ipuprofile");
    std::fs::copy(&a, &alone).unwrap();
    let (r, html) = page(&sb, alone.to_str().unwrap(), &[]);
    r.assert_ok();
    assert!(html.contains("No memory map: no package at"), "{html}");
}
