//! Snapshots of every phase's text dump for the small presets (`ipu-codegen show <phase>`).

mod common;
use common::{SMALL, SMALL_ATTENTION, Sandbox, phases};

#[test]
fn every_phase_dump_matches_its_snapshot() {
    let sb = Sandbox::new();
    for what in std::iter::once("graph").chain(phases()) {
        let r = sb.run(&["show", what, SMALL]);
        r.assert_ok();
        insta::assert_snapshot!(what, r.stdout);
    }
}

#[test]
fn every_attention_phase_dump_matches_its_snapshot() {
    let sb = Sandbox::new();
    for what in std::iter::once("graph").chain(phases()) {
        let r = sb.run(&["show", what, SMALL_ATTENTION]);
        r.assert_ok();
        insta::assert_snapshot!(format!("attention_{what}"), r.stdout);
    }
}
