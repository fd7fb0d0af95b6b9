//! `ipu-codegen plans`: the candidates per operator, the finalists, and the chosen one, which is the
//! plan the device runs.

mod common;
use common::{SMALL, SMALL_ATTENTION, Sandbox, assert_pass};
use serde_json::Value;

fn plans_json(sb: &Sandbox, extra: &[&str]) -> Value {
    let mut args = vec!["plans", SMALL, "--json"];
    args.extend_from_slice(extra);
    let r = sb.run(&args);
    r.assert_ok();
    serde_json::from_str(&r.stdout).expect("plans --json prints JSON")
}

#[test]
fn the_chosen_finalist_is_the_plan_the_device_runs() {
    let sb = Sandbox::new();
    let table = plans_json(&sb, &[]);
    let finalists = table["finalists"].as_array().unwrap();
    let chosen: Vec<&Value> = finalists.iter().filter(|f| f["chosen"] == true).collect();
    assert_eq!(chosen.len(), 1, "{table}");
    // The device's summary names the estimate of the program it ran: the chosen finalist's.
    let out = assert_pass(&sb, &["run", SMALL]);
    let estimated = out
        .split_whitespace()
        .find_map(|w| w.strip_prefix("estimatedCycles="))
        .unwrap();
    assert_eq!(chosen[0]["modelledCycles"].to_string(), estimated, "{out}");
    // Every operator lists candidates, fastest first.
    for op in table["operators"].as_array().unwrap() {
        let cycles: Vec<u64> = (op["candidates"].as_array().unwrap().iter())
            .map(|c| c["cycles"].as_u64().unwrap())
            .collect();
        assert!(!cycles.is_empty() && cycles.is_sorted(), "{op}");
    }
    // The text says the same.
    let r = sb.run(&["plans", SMALL]);
    r.assert_ok();
    assert_eq!(r.stdout.matches("<- chosen").count(), 1, "{}", r.stdout);
    assert!(
        r.stdout.contains("op0 block0.fc1: matmul 21x40x72"),
        "{}",
        r.stdout
    );
}

#[test]
fn the_table_shows_only_the_forms_and_weight_panels_allowed() {
    let sb = Sandbox::new();
    let table = plans_json(
        &sb,
        &["--form", "transposed", "--weight-panels", "gathered"],
    );
    let rows: Vec<&Value> = (table["operators"].as_array().unwrap().iter())
        .flat_map(|op| op["candidates"].as_array().unwrap())
        .chain(
            (table["finalists"].as_array().unwrap().iter())
                .flat_map(|f| f["operators"].as_array().unwrap()),
        )
        .collect();
    assert!(!rows.is_empty());
    for row in rows {
        assert_eq!(row["form"], "transposed", "{row}");
        assert_eq!(row["weights"], "gathered", "{row}");
        assert_eq!(row["residentBytes"], 0, "{row}");
    }
}

#[test]
fn no_matmul_candidate_costs_less_than_its_floor() {
    let sb = Sandbox::new();
    let r = sb.run(&["plans", "minilm-encoder", "--json", "--top", "1000"]);
    r.assert_ok();
    let table: Value = serde_json::from_str(&r.stdout).expect("plans --json prints JSON");
    let mut matmuls = 0;
    let mut summed = 0;
    for op in table["operators"].as_array().unwrap() {
        let Some(floor) = op["floor"]["cycles"].as_u64() else {
            assert!(op["floor"].is_null(), "{op}");
            continue;
        };
        assert!(op["shape"].as_str().unwrap().starts_with("matmul"), "{op}");
        matmuls += 1;
        summed += floor;
        let candidates = op["candidates"].as_array().unwrap();
        assert_eq!(candidates.len() as u64, op["shortlisted"].as_u64().unwrap());
        for c in candidates {
            let cycles = c["cycles"].as_u64().unwrap();
            assert!(
                cycles >= floor,
                "{} costs {cycles}, under its floor {floor}: {c}",
                op["name"]
            );
        }
    }
    assert!(matmuls >= 4, "{table}");
    assert_eq!(table["matmulFloorCycles"].as_u64(), Some(summed));
    let r = sb.run(&["plans", "minilm-encoder"]);
    r.assert_ok();
    let line = format!("matmul floor: {summed} cycles");
    assert!(r.stdout.contains(&line), "{}", r.stdout);
    // Its operators run in supersteps of their own, so the program the device runs costs more.
    let out = assert_pass(&sb, &["run", "minilm-encoder"]);
    let cycles: u64 = (out.split_whitespace())
        .find_map(|w| w.strip_prefix("cycles="))
        .and_then(|c| c.parse().ok())
        .expect("the run's cycles");
    assert!(
        cycles > summed,
        "the device ran {cycles} cycles, under the floor {summed}"
    );
    // A workload without matmuls has no floor line.
    let r = sb.run(&["plans", SMALL_ATTENTION]);
    r.assert_ok();
    assert!(!r.stdout.contains("floor"), "{}", r.stdout);
}
