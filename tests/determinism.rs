//! The same inputs give byte-identical artifacts whatever the thread count.

mod common;
use common::{Sandbox, phases};

#[test]
fn artifact_hashes_do_not_depend_on_thread_count() {
    let mlp = [
        "build",
        "siglip-mlp-small",
        "--tokens",
        "70",
        "--dimension",
        "96",
        "--hidden",
        "200",
    ];
    same_artifacts_on_one_and_two_threads(&mlp, "siglip-mlp-f16-b1-t70-d96-h200-n2-bias");
    let attention = ["build", "attention-flash-small", "--causal", "true"];
    same_artifacts_on_one_and_two_threads(
        &attention,
        "attention-flash-f16-b1-t37-h2-d24-k45-causal-pf32",
    );
}

fn same_artifacts_on_one_and_two_threads(args: &[&str], id: &str) {
    let runs: Vec<(Sandbox, Vec<String>)> = ["1", "2"]
        .into_iter()
        .map(|threads| {
            let sb = Sandbox::new();
            let out = common::ran(
                sb.command(args)
                    .env("RAYON_NUM_THREADS", threads)
                    .output()
                    .unwrap(),
            );
            out.assert_ok();
            let hashes = phases()
                .iter()
                .map(|p| sb.record(id, p)["output"].as_str().unwrap().to_string())
                .collect();
            (sb, hashes)
        })
        .collect();
    assert_eq!(runs[0].1, runs[1].1);
    let package = |sb: &Sandbox| std::fs::read(sb.stages().join(id).join("model.ipuexe")).unwrap();
    assert_eq!(package(&runs[0].0), package(&runs[1].0));
}
