//! Calibration cases of the general vector vertex: every unary function, every binary function
//! with each way an operand spreads, each reduction and the softmax, one vertex per tile in one
//! package, the device's cycles (poplibs' estimators) beside the compiler's estimate
//! (`Target::vector_op_cycles`).

use super::{Calibration, DATA_OFFSET, Micro, Operands};
use crate::device::Fault;
use crate::elements::{BinaryFn, DType, ReduceFn, UnaryFn};
use crate::isa::{Instr, Spread, Vector, VectorFn, VertexKind};
use crate::target::Target;

/// The cases: function, rows, cols and the spreads of `a` and `b`.
fn cases() -> Vec<(VectorFn, u32, u32, (Spread, Spread))> {
    let whole = (Spread::Whole, Spread::Whole);
    let mut cases: Vec<(VectorFn, u32, u32, (Spread, Spread))> = UnaryFn::PLAIN
        .into_iter()
        .chain([
            UnaryFn::Pow { exponent: 3.0 },
            UnaryFn::Pow { exponent: 2.0 },
        ])
        .map(|f| (VectorFn::Unary(f), 23, 96, whole))
        .collect();
    for f in BinaryFn::ALL {
        cases.push((VectorFn::Binary(f), 23, 96, whole));
    }
    for (f, rows, cols, spreads) in [
        (BinaryFn::Sub, 23, 96, (Spread::Whole, Spread::OneValue)),
        (BinaryFn::Mul, 23, 96, (Spread::OneValue, Spread::Whole)),
        (BinaryFn::Div, 23, 96, (Spread::Whole, Spread::OneValue)),
        (BinaryFn::Sub, 23, 96, (Spread::Whole, Spread::OneColumn)),
        (BinaryFn::Mul, 23, 9, (Spread::Whole, Spread::OneColumn)),
        (BinaryFn::Div, 23, 96, (Spread::Whole, Spread::OneColumn)),
        (BinaryFn::Add, 23, 96, (Spread::Whole, Spread::OneRow)),
    ] {
        cases.push((VectorFn::Binary(f), rows, cols, spreads));
    }
    for f in ReduceFn::ALL {
        cases.push((VectorFn::Reduce(f), 23, 384, whole));
    }
    cases.push((VectorFn::Softmax, 23, 384, whole));
    cases.push((VectorFn::Softmax, 64, 50, whole));
    cases
}

/// Every case's device cycles beside its estimate.
pub(super) fn vector_op_cases(target: &Target) -> Result<Vec<Calibration>, Fault> {
    let mut m = Micro::new(target, "compute");
    let cases = cases();
    for (tile, &(function, rows, cols, (a_spread, b_spread))) in cases.iter().enumerate() {
        let mut o = Operands {
            m: &mut m,
            tile: tile as u32,
            standard: target.memory_base + DATA_OFFSET,
            interleaved: target.interleaved_base,
        };
        let mut input = |spread: Spread| {
            let (r, c) = spread.extent(rows, cols);
            o.place(r, c, DType::F16, false, true)
        };
        let a = input(a_spread);
        let b = matches!(function, VectorFn::Binary(_)).then(|| input(b_spread));
        let out_cols = if matches!(function, VectorFn::Reduce(_)) {
            1
        } else {
            cols
        };
        let out = o.place(rows, out_cols, DType::F16, false, false);
        m.programs[tile].push(Instr::Vertex(VertexKind::Vector(Vector {
            function,
            a,
            a_spread,
            b,
            b_spread,
            out,
            rows,
            cols,
            transpose: false,
        })));
    }
    let e = m.run()?;
    Ok(cases
        .iter()
        .enumerate()
        .map(|(tile, &(function, rows, cols, spreads))| {
            let spread = match (function, spreads) {
                (VectorFn::Binary(_), (a, b)) => format!(" a {} b {}", a.name(), b.name()),
                _ => String::new(),
            };
            Calibration {
                case: format!("vector {} {rows}x{cols}{spread}", function.name()),
                kind: "vector",
                rows: None,
                hardware_cycles: None,
                device_cycles: u64::from(e.steps[0].tile_busy[tile]),
                estimate_cycles: target.vector_op_cycles(function, rows, cols, spreads),
                peak_cycles: None,
                note: "device: poplibs' estimators".to_string(),
            }
        })
        .collect())
}
