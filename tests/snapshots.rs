//! Snapshots of every phase's text dump for the small preset (`ipu-codegen show <phase>`).

mod common;
use common::{SMALL, Sandbox, phases};

#[test]
fn every_phase_dump_matches_its_snapshot() {
    let sb = Sandbox::new();
    for what in std::iter::once("graph").chain(phases()) {
        let r = sb.run(&["show", what, SMALL]);
        r.assert_ok();
        insta::assert_snapshot!(what, r.stdout);
    }
}
