//! Calibration cases of the data-movement vertex (`isa::Assemble`): a 2-D transpose, a batch of
//! transposes, a slice of every other row, a slice of every other column, a concat of two inputs
//! along the columns and a patch extraction, one vertex per tile in one package, the device's
//! cycles (poplibs' memcpy and transpose estimators) beside the compiler's estimate
//! (`Target::assemble_cycles`).

use super::{Calibration, DATA_OFFSET, Micro, Operands};
use crate::device::Fault;
use crate::elements::{DType, Strided};
use crate::isa::{Assemble, CopyPiece, Instr, VertexKind};
use crate::target::Target;

/// A case: its name, the sources' rows and columns, the output's, and the pieces.
struct Case {
    name: &'static str,
    sources: Vec<(u32, u32)>,
    out: (u32, u32),
    pieces: Vec<CopyPiece>,
}

fn piece(source: u32, shape: &[u32], from: (u64, &[i64]), to: (u64, &[i64])) -> CopyPiece {
    let strided = |(offset, strides): (u64, &[i64])| Strided {
        offset,
        strides: strides.to_vec(),
    };
    CopyPiece {
        source,
        shape: shape.to_vec(),
        from: strided(from),
        to: strided(to),
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "transpose 64x48",
            sources: vec![(64, 48)],
            out: (48, 64),
            pieces: vec![piece(0, &[48, 64], (0, &[1, 48]), (0, &[64, 1]))],
        },
        Case {
            name: "transpose 8x(12x16)",
            sources: vec![(96, 16)],
            out: (128, 12),
            pieces: vec![piece(
                0,
                &[8, 16, 12],
                (0, &[192, 1, 16]),
                (0, &[192, 12, 1]),
            )],
        },
        Case {
            name: "slice rows step 2 of 80x64",
            sources: vec![(80, 64)],
            out: (40, 64),
            pieces: vec![piece(0, &[40, 64], (0, &[128, 1]), (0, &[64, 1]))],
        },
        Case {
            name: "slice columns step 2 of 24x32",
            sources: vec![(24, 32)],
            out: (24, 16),
            pieces: vec![piece(0, &[24, 16], (1, &[32, 2]), (0, &[16, 1]))],
        },
        Case {
            name: "concat 48x24 and 48x40 along columns",
            sources: vec![(48, 24), (48, 40)],
            out: (48, 64),
            pieces: vec![
                piece(0, &[48, 24], (0, &[24, 1]), (0, &[64, 1])),
                piece(1, &[48, 40], (0, &[40, 1]), (24, &[64, 1])),
            ],
        },
        Case {
            name: "patches 4x4 of 3x16x16",
            sources: vec![(48, 16)],
            out: (16, 48),
            pieces: vec![piece(
                0,
                &[4, 4, 3, 4, 4],
                (0, &[64, 4, 256, 16, 1]),
                (0, &[192, 48, 16, 4, 1]),
            )],
        },
    ]
}

/// Every case's device cycles beside its estimate.
pub(super) fn assemble_cases(target: &Target) -> Result<Vec<Calibration>, Fault> {
    let mut m = Micro::new(target, "compute");
    let cases = cases();
    for (tile, case) in cases.iter().enumerate() {
        let mut o = Operands {
            m: &mut m,
            tile: tile as u32,
            standard: target.memory_base + DATA_OFFSET,
            interleaved: target.interleaved_base,
        };
        let sources = (case.sources.iter())
            .map(|&(r, c)| o.place(r, c, DType::F16, false, true))
            .collect();
        let out = o.place(case.out.0, case.out.1, DType::F16, false, false);
        m.programs[tile].push(Instr::Vertex(Box::new(VertexKind::Assemble(Assemble {
            sources,
            extents: case.sources.clone(),
            out,
            rows: case.out.0,
            cols: case.out.1,
            pieces: case.pieces.clone(),
        }))));
    }
    let e = m.run()?;
    Ok(cases
        .iter()
        .enumerate()
        .map(|(tile, case)| Calibration {
            case: format!("assemble {}", case.name),
            kind: "assemble",
            rows: None,
            hardware_cycles: None,
            device_cycles: u64::from(e.steps[0].tile_busy[tile]),
            estimate_cycles: target.assemble_cycles(&case.pieces),
            peak_cycles: None,
            elements: Some(u64::from(case.out.0) * u64::from(case.out.1)),
            note: "device: poplibs' memcpy and transpose estimators".to_string(),
        })
        .collect())
}
