//! Calibration cases of the general vector vertex: every unary function, every binary function
//! (the comparisons included) with each way an operand spreads, the select in each of the codelets
//! Poplar picks for it (`Select`, `BroadcastSelect`, `BroadcastSelectorSelect`), each reduction
//! and the softmax, one vertex per tile in one package, the device's cycles (poplibs' estimators)
//! beside the compiler's estimate (`Target::vector_op_cycles`).

use super::{Calibration, DATA_OFFSET, Micro, Operands};
use crate::device::Fault;
use crate::elements::{BinaryFn, DType, ReduceFn, UnaryFn};
use crate::isa::{Instr, Spread, Vector, VectorFn, VertexKind};
use crate::target::Target;

/// A case: function, rows, cols and its operands' spreads.
type Case = (VectorFn, u32, u32, Vec<Spread>);

/// The cases.
fn cases() -> Vec<Case> {
    let whole = vec![Spread::Whole];
    let mut cases: Vec<Case> = UnaryFn::PLAIN
        .into_iter()
        .chain([
            UnaryFn::Pow { exponent: 3.0 },
            UnaryFn::Pow { exponent: 2.0 },
        ])
        .map(|f| (VectorFn::Unary(f), 23, 96, whole.clone()))
        .collect();
    for f in BinaryFn::ALL {
        cases.push((VectorFn::Binary(f), 23, 96, vec![Spread::Whole; 2]));
    }
    for (f, rows, cols, spreads) in [
        (BinaryFn::Sub, 23, 96, (Spread::Whole, Spread::OneValue)),
        (BinaryFn::Mul, 23, 96, (Spread::OneValue, Spread::Whole)),
        (BinaryFn::Div, 23, 96, (Spread::Whole, Spread::OneValue)),
        (BinaryFn::Sub, 23, 96, (Spread::Whole, Spread::OneColumn)),
        (BinaryFn::Mul, 23, 9, (Spread::Whole, Spread::OneColumn)),
        (BinaryFn::Div, 23, 96, (Spread::Whole, Spread::OneColumn)),
        (BinaryFn::Add, 23, 96, (Spread::Whole, Spread::OneRow)),
        (BinaryFn::Less, 23, 96, (Spread::Whole, Spread::OneValue)),
        (BinaryFn::Equal, 23, 96, (Spread::OneValue, Spread::Whole)),
        (BinaryFn::Greater, 23, 96, (Spread::OneValue, Spread::Whole)),
        (
            BinaryFn::NotEqual,
            23,
            96,
            (Spread::Whole, Spread::OneColumn),
        ),
    ] {
        cases.push((VectorFn::Binary(f), rows, cols, vec![spreads.0, spreads.1]));
    }
    use Spread::{OneColumn, OneRow, OneValue, Whole};
    for (rows, cols, spreads) in [
        (23, 96, [Whole, Whole, Whole]),
        (23, 9, [Whole, Whole, Whole]),
        (23, 96, [OneColumn, OneRow, Whole]),
        (23, 96, [Whole, OneValue, OneValue]),
        (7, 33, [Whole, OneValue, OneValue]),
        (23, 96, [OneValue, Whole, Whole]),
        (7, 33, [OneValue, OneRow, Whole]),
    ] {
        cases.push((VectorFn::Select, rows, cols, spreads.to_vec()));
    }
    for f in ReduceFn::ALL {
        cases.push((VectorFn::Reduce(f), 23, 384, whole.clone()));
    }
    cases.push((VectorFn::Softmax, 23, 384, whole.clone()));
    cases.push((VectorFn::Softmax, 64, 50, whole));
    cases
}

/// Every case's device cycles beside its estimate.
pub(super) fn vector_op_cases(target: &Target) -> Result<Vec<Calibration>, Fault> {
    let mut m = Micro::new(target, "compute");
    let cases = cases();
    for (tile, (function, rows, cols, spreads)) in cases.iter().enumerate() {
        let (function, rows, cols) = (*function, *rows, *cols);
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
        let operands = spreads.iter().map(|&s| (input(s), s)).collect();
        let out_cols = if matches!(function, VectorFn::Reduce(_)) {
            1
        } else {
            cols
        };
        let out = o.place(rows, out_cols, DType::F16, false, false);
        m.programs[tile].push(Instr::Vertex(Box::new(VertexKind::Vector(Vector {
            function,
            operands,
            out,
            rows,
            cols,
            transpose: false,
        }))));
    }
    let e = m.run()?;
    Ok(cases
        .iter()
        .enumerate()
        .map(|(tile, (function, rows, cols, spreads))| {
            let (function, rows, cols) = (*function, *rows, *cols);
            let spread: String = if function.spreads() {
                (function.roles().iter().zip(spreads))
                    .map(|(role, s)| format!(" {role} {}", s.name()))
                    .collect()
            } else {
                String::new()
            };
            Calibration {
                case: format!("vector {} {rows}x{cols}{spread}", function.name()),
                kind: "vector",
                rows: None,
                hardware_cycles: None,
                device_cycles: u64::from(e.steps[0].tile_busy[tile]),
                estimate_cycles: target.vector_op_cycles(function, rows, cols, spreads),
                peak_cycles: None,
                elements: Some(u64::from(rows) * u64::from(cols)),
                note: "device: poplibs' estimators".to_string(),
            }
        })
        .collect())
}
