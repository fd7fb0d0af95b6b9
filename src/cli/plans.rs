//! `ipu-codegen plans`: why a plan won. Per operator, the fastest candidates of the shortlist the
//! joint search chose among (operand form, weights, partition, estimated cycles, compute, its vector
//! part, exchange, working and resident bytes a tile), and for a matmul the floor no plan of it goes
//! below (`Target::matmul_floor`); then the joint finalists with their estimates, the one
//! `select_finalist` chose marked with its mapping and modelled cycles, and the matmuls' floors
//! summed (in the text, only when there are matmuls). Text, or the same fields as JSON.

use ipu_codegen::ir::{Graph, Mid, Operator, OperatorEstimate, Partition, Selected};
use ipu_codegen::stages::lower_mid::Candidate;
use ipu_codegen::target::Target;
use serde_json::{Value, json};
use std::fmt::Write as _;

/// A matmul's operand form and weight panels under a partition, as the table names them.
fn form_and_weights(op: &Operator, p: &Partition) -> (&'static str, &'static str) {
    match (op, p) {
        (Operator::MatMul(_), Partition::Grid(g)) => (
            if g.transposed { "transposed" } else { "normal" },
            if g.resident { "resident" } else { "gathered" },
        ),
        _ => ("-", "-"),
    }
}

fn estimate_json(e: &OperatorEstimate) -> Value {
    json!({
        "cycles": e.cycles,
        "computeCycles": e.compute_cycles,
        "vectorCycles": e.vector_cycles,
        "exchangeCycles": e.exchange_cycles,
        "workingBytes": e.panel_bytes + e.other_bytes + e.interleaved_bytes,
        "residentBytes": e.resident.interleaved + e.resident.either,
    })
}

fn shape(op: &Operator) -> String {
    match op {
        Operator::MatMul(m) if m.parts.len() > 1 => {
            let widths: Vec<String> = m.parts.iter().map(|p| p.cols.to_string()).collect();
            format!(
                "matmul {}x{}x{}, {} weights side by side ({})",
                m.m,
                m.k,
                m.n,
                m.parts.len(),
                widths.join(" + ")
            )
        }
        Operator::MatMul(m) => format!("matmul {}x{}x{}", m.m, m.k, m.n),
        Operator::LayerNorm(l) => format!("layer norm {}x{}", l.rows, l.cols),
        Operator::Vector(v) => format!("vector {} {}x{}", v.function.name(), v.rows, v.cols),
        Operator::Assemble(a) => {
            format!("assemble {}x{}, {} pieces", a.rows, a.cols, a.pieces.len())
        }
        Operator::Attention(a) => format!(
            "attention {} groups, {} queries x {} keys",
            a.groups(),
            a.shape.queries,
            a.shape.keys
        ),
    }
}

/// A matmul's floor on `target`'s tiles, as JSON; `null` for any other operator.
fn floor_json(op: &Operator, target: &Target) -> Value {
    let Operator::MatMul(m) = op else {
        return Value::Null;
    };
    let f = target.matmul_floor(m.m, m.k, m.n, m.partials, target.tiles);
    json!({
        "cycles": f.cycles,
        "rows": f.rows,
        "depth": f.depth,
        "cols": f.cols,
        "tiles": f.tiles,
        "form": if f.transposed { "transposed" } else { "normal" },
    })
}

/// The plan table as JSON: `operators` (each with its `candidates`, fastest first, and a matmul's
/// `floor`), `finalists` and `matmulFloorCycles`.
pub fn json(
    target: &Target,
    graph: &Graph,
    operators: &[Operator],
    shortlists: &[Vec<Candidate>],
    mid: &Mid,
    selected: &Selected,
    top: usize,
) -> Value {
    let ops: Vec<Value> = operators
        .iter()
        .zip(shortlists)
        .map(|(op, list)| {
            let candidates: Vec<Value> = (list.iter().take(top).enumerate())
                .map(|(rank, c)| {
                    let (form, weights) = form_and_weights(op, &c.partition);
                    let mut v = estimate_json(&c.estimate);
                    v["rank"] = json!(rank + 1);
                    v["form"] = json!(form);
                    v["weights"] = json!(weights);
                    v["partition"] = json!(c.partition.to_string());
                    v
                })
                .collect();
            json!({
                "id": op.id().to_string(),
                "name": op.name(),
                "shape": shape(op),
                "shortlisted": list.len(),
                "floor": floor_json(op, target),
                "candidates": candidates,
            })
        })
        .collect();
    let matmul_floor: u64 = (ops.iter())
        .filter_map(|op| op["floor"]["cycles"].as_u64())
        .sum();
    let finalists: Vec<Value> = (mid.finalists.iter().enumerate())
        .map(|(f, plan)| {
            let chosen = selected.finalist as usize == f;
            let parts: Vec<Value> = (mid.operators.iter().zip(&plan.partitions))
                .zip(&plan.operators)
                .map(|((op, p), e)| {
                    let (form, weights) = form_and_weights(op, p);
                    let mut v = estimate_json(e);
                    v["form"] = json!(form);
                    v["weights"] = json!(weights);
                    v["partition"] = json!(p.to_string());
                    v
                })
                .collect();
            json!({
                "finalist": f,
                "estimatedCycles": plan.estimate.cycles,
                "estimatedExchangeCycles": plan.estimate.exchange_cycles,
                "peakBytes": plan.estimate.peak_total_bytes,
                "chosen": chosen,
                "mapping": chosen.then(|| selected.mapping.name()),
                "modelledCycles": chosen.then_some(selected.estimate.cycles),
                "operators": parts,
            })
        })
        .collect();
    let layers = mid.layers.map(|l| {
        json!({
            "start": l.start,
            "end": l.end(),
            "count": l.count,
            "period": l.period,
        })
    });
    json!({
        "workload": graph.workload,
        "operators": ops,
        "layers": layers,
        "finalists": finalists,
        "matmulFloorCycles": matmul_floor,
    })
}

/// The plan table as text, from its JSON.
pub fn text(table: &Value) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "plans {}",
        table["workload"].as_str().unwrap_or_default()
    );
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let row = |s: &mut String, c: &Value, lead: &str| {
        let _ = writeln!(
            s,
            "{lead}{:<10} {:<8} {:>8} {:>8} {:>7} {:>8} {:>8} {:>7}  {}",
            c["form"].as_str().unwrap_or_default(),
            c["weights"].as_str().unwrap_or_default(),
            n(&c["cycles"]),
            n(&c["computeCycles"]),
            n(&c["vectorCycles"]),
            n(&c["exchangeCycles"]),
            n(&c["workingBytes"]).div_ceil(1024),
            n(&c["residentBytes"]).div_ceil(1024),
            c["partition"].as_str().unwrap_or_default(),
        );
    };
    let header =
        "form       weights    cycles  compute  vector exchange work KiB res KiB  partition";
    for op in table["operators"].as_array().into_iter().flatten() {
        let _ = writeln!(
            s,
            "{} {}: {}, {} candidates shortlisted",
            op["id"].as_str().unwrap_or_default(),
            op["name"].as_str().unwrap_or_default(),
            op["shape"].as_str().unwrap_or_default(),
            n(&op["shortlisted"])
        );
        let floor = &op["floor"];
        if floor.is_object() {
            let _ = writeln!(
                s,
                "  floor {} cycles: {}x{}x{} blocks on {} tiles, {} (the AMP and the depth partials' exchange alone)",
                n(&floor["cycles"]),
                n(&floor["rows"]),
                n(&floor["depth"]),
                n(&floor["cols"]),
                n(&floor["tiles"]),
                floor["form"].as_str().unwrap_or_default(),
            );
        }
        let _ = writeln!(s, "  rank {header}");
        for c in op["candidates"].as_array().into_iter().flatten() {
            row(&mut s, c, &format!("  {:<4} ", n(&c["rank"])));
        }
    }
    let layers = &table["layers"];
    if layers.is_object() {
        let _ = writeln!(
            s,
            "layers: operators {}..{} are {} copies of {} operators, planned alike in every finalist",
            n(&layers["start"]),
            n(&layers["end"]),
            n(&layers["count"]),
            n(&layers["period"])
        );
    }
    let _ = writeln!(
        s,
        "finalists (the joint search's, by estimated cycles; select_finalist models the first that fits under every mapping, the rest under its cheapest):"
    );
    for f in table["finalists"].as_array().into_iter().flatten() {
        let chosen = if f["chosen"].as_bool().unwrap_or(false) {
            format!(
                "  <- chosen: mapping {}, modelled {} cycles",
                f["mapping"].as_str().unwrap_or_default(),
                n(&f["modelledCycles"])
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "  finalist {}: estimated {} cycles, exchange {}, peak {} KiB a tile{chosen}",
            n(&f["finalist"]),
            n(&f["estimatedCycles"]),
            n(&f["estimatedExchangeCycles"]),
            n(&f["peakBytes"]).div_ceil(1024)
        );
        let _ = writeln!(s, "    {header}");
        for o in f["operators"].as_array().into_iter().flatten() {
            row(&mut s, o, "    ");
        }
    }
    let has_matmuls =
        (table["operators"].as_array().into_iter().flatten()).any(|op| op["floor"].is_object());
    if has_matmuls {
        let _ = writeln!(
            s,
            "matmul floor: {} cycles, every matmul's floor summed (each runs in supersteps of its own: no program costs less)",
            n(&table["matmulFloorCycles"])
        );
    }
    s
}
