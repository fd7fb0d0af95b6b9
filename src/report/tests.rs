//! The profile file, its check, and what `report` makes of crafted profiles.

use super::summary::tile_errors;
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
    assert_eq!(tile_errors(&e), [4.0, -10.0, 0.0]);
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
    let before = behind_header(&crate::store::encode(&Before(e)));
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
