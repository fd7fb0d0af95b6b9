//! Phases given artifacts of different builds refuse them with an error naming what does not match,
//! instead of indexing past their ends.

mod common;
use common::pipeline::small;
use ipu_codegen::driver::PhaseConfigs;
use ipu_codegen::stages::{emit, place_storage};

#[test]
fn emit_refuses_schedules_of_another_program() {
    let b = small();
    let mut exchanges = b.exchanges.clone();
    exchanges.phases.pop();
    let c = PhaseConfigs::default();
    let err = emit::emit(&b.selected, &exchanges, &b.placement, &b.target, &c.emit)
        .expect_err("one schedule short");
    let n = b.selected.exchanges.len();
    let message = err.to_string();
    assert!(
        message.contains(&format!("the schedules ({} phases)", n - 1))
            && message.contains(&format!("a program of {n} exchange phases")),
        "{message}"
    );
}

#[test]
fn emit_refuses_a_placement_of_another_program() {
    let b = small();
    let mut placement = b.placement.clone();
    placement.addresses.pop();
    let c = PhaseConfigs::default();
    let err = emit::emit(&b.selected, &b.exchanges, &placement, &b.target, &c.emit)
        .expect_err("one address short");
    let message = err.to_string();
    assert!(
        message.contains(&format!(
            "{} addresses for the program's {} buffers",
            b.selected.buffers.len() - 1,
            b.selected.buffers.len()
        )),
        "{message}"
    );
}

#[test]
fn place_storage_refuses_schedules_of_another_program() {
    let b = small();
    let mut exchanges = b.exchanges.clone();
    exchanges.phases.pop();
    let c = PhaseConfigs::default();
    let err = place_storage::place_storage(&b.selected, &exchanges, &b.target, &c.place_storage)
        .expect_err("one schedule short");
    let message = err.to_string();
    assert!(message.contains("come from different builds"), "{message}");
}
