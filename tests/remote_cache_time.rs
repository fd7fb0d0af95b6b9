//! A second machine's empty store builds `minilm-encoder` from the remote cache with no phase
//! computed, the same `model.ipuexe`, and in at most half the time of the cold build that filled the
//! cache, measured in the same run (a test binary of its own, so no other test shares the machine).

mod common;
use common::Sandbox;
use common::cache_server::CacheServer;
use std::time::{Duration, Instant};

const WORKLOAD: &str = "minilm-encoder";

fn timed_build(sb: &Sandbox, url: &str) -> (common::Ran, Duration) {
    let started = Instant::now();
    let r = sb.run(&["build", WORKLOAD, "--remote-cache", url]);
    (r, started.elapsed())
}

fn package(sb: &Sandbox) -> Vec<u8> {
    let id = sb.run(&["id", WORKLOAD]);
    let id = id.assert_ok().stdout.trim().to_string();
    std::fs::read(sb.stages().join(id).join("model.ipuexe")).expect("a package")
}

#[test]
fn an_empty_store_builds_minilm_from_the_server_in_at_most_half_the_cold_time() {
    let Some(server) = CacheServer::start() else {
        return;
    };
    let (first, second) = (Sandbox::new(), Sandbox::new());
    let (cold, cold_time) = timed_build(&first, &server.url());
    assert_eq!(cold.assert_ok().phases_run(), common::phases());
    let (warm, warm_time) = timed_build(&second, &server.url());
    warm.assert_ok();
    assert!(warm.stdout.contains("phasesRun=- "), "{}", warm.stdout);
    assert_eq!(package(&second), package(&first));
    eprintln!("cold build {cold_time:?}, from the remote cache {warm_time:?}");
    assert!(
        warm_time * 2 <= cold_time,
        "from the remote cache {warm_time:?}, over half the cold build's {cold_time:?}"
    );
}
