//! `select_finalist`: graph + mid + target -> `selected`.
//!
//! For finalist plans under tile mappings (grid cell to tile: row-major, column-major, or the column
//! blocks sharing a panel adjacent), builds the whole program: buffers on tiles with their
//! lifetimes, supersteps (per operator an exchange phase then a compute set, and a second pair when a
//! matmul's depth or an attention's keys are split over tiles), the exchange phases as transfer lists
//! and the host streams; then costs it with the more exact model (per-tile exchange load of the
//! actual transfers, compute per tile) and chooses the cheapest of those whose live buffers fit every
//! tile at every step beside the code reserve (one that does not is passed over with a log line),
//! and besides those the config passes over: a finalist under a mapping whose storage
//! `place_storage` could not place in an earlier try of the build. The first finalist that fits is
//! modelled under every mapping, the others under its cheapest only ([`cheapest`]). Each program is
//! let go once costed; the chosen one is built again, whole (with five or more such layers, the
//! middle ones copied from the third, `builder::replicate`: the same program). When the mid's last three or more
//! layers are planned alike (`Mid::layers`) and repeat exactly ([`repeats_exactly`]), a candidate
//! is modelled on its operators through the second layer, each later layer costed as the second
//! ([`through_second_layer`]: the same operators under the same partitions read the same layout,
//! so build the same steps); a tile that overflows there overflows in the whole program, and a
//! chosen one whose whole program overflows is set aside and the choice made again, the other
//! candidates' models kept.
//!
//! Storage layout: every buffer holds a rectangle of one value, row-major or transposed, every stored row
//! at the buffer's alignment (8 bytes; 16 for weight panels, probabilities, partials and a flash state
//! the AMP writes). Weights and
//! inputs live in *home* pieces spread over the grid (weights persist across runs); each operator
//! gathers its operands (a matmul's A and B panels, an attention's queries, keys and values) with
//! multicast transfers from wherever those rectangles live.
//!
//! Invariants (checked by [`verify()`]): every transfer's rectangle lies inside its source buffer and every
//! destination buffer; every panel is covered exactly once by its incoming transfers; every buffer read
//! in a step was written in an earlier step (or by the host) and is live across its uses; AMP partials and
//! weight panels are marked interleaved, and the partials own their memory elements.
//!
//! Modules: this one holds the config, the entry and the choice among the finalists; `builder` builds
//! the program of one finalist under one mapping (buffers, homes, gathers, exchange phases, compute
//! sets, outputs, host streams), laying out each operator with the matmul planner (`matmul`), the
//! layer-norm planner (`layer_norm`), the vector planner (`vector`), the data-movement planner
//! (`assemble`) or the flash-attention planner (`attention`), and costs it (`estimate`); `verify` checks the chosen one.

mod assemble;
mod attention;
mod builder;
mod estimate;
mod layer_norm;
mod matmul;
mod vector;
mod verify;

pub use verify::verify;

use crate::ir::{
    Graph, Layers, Mapping, Mid, Selected, Step, fixed_output_order, producing_operators, reads,
    verify_mid,
};
use crate::target::Target;
use builder::{build, steps_of};
use estimate::overflow;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MappingChoice {
    /// Every mapping for the first finalist that fits, its cheapest for the others; the least
    /// modelled cycles kept.
    Auto,
    RowMajor,
    ColumnMajor,
    SharedPanels,
}

impl MappingChoice {
    pub const ALL: [MappingChoice; 4] = [
        MappingChoice::Auto,
        MappingChoice::RowMajor,
        MappingChoice::ColumnMajor,
        MappingChoice::SharedPanels,
    ];

    /// The name in flags and stage records: `row-major`.
    pub fn name(self) -> &'static str {
        match self {
            MappingChoice::Auto => "auto",
            MappingChoice::RowMajor => "row-major",
            MappingChoice::ColumnMajor => "column-major",
            MappingChoice::SharedPanels => "shared-panels",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SelectFinalistConfig {
    pub mapping: MappingChoice,
    /// Finalists under a mapping not to choose: the driver's record of those `place_storage` could
    /// not place. Empty, it is left out of the config's bytes, which are then those of the mapping
    /// alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passed_over: Vec<PassedOver>,
}

/// A finalist under one mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassedOver {
    pub finalist: u32,
    pub mapping: Mapping,
}

#[derive(Debug, thiserror::Error)]
pub enum SelectFinalistError {
    #[error("mid has no finalist")]
    NoFinalist,
    #[error("no finalist fits tile memory under any mapping; the first: {0}")]
    NoneFits(String),
    #[error(
        "every finalist under every mapping was passed over: place_storage could not place any"
    )]
    AllPassedOver,
    #[error("the mid does not fit its graph and target:\n{0}")]
    InvalidMid(String),
    #[error("select_finalist produced an invalid selection:\n{0}")]
    Invalid(String),
}

/// Builds finalists' programs under the configured mappings ([`cheapest`]) and returns the cheapest
/// by the more exact model, verified.
pub fn select_finalist(
    graph: &Graph,
    mid: &Mid,
    target: &Target,
    cfg: &SelectFinalistConfig,
) -> Result<Selected, SelectFinalistError> {
    let mappings: &[Mapping] = match cfg.mapping {
        MappingChoice::Auto => &[
            Mapping::RowMajor,
            Mapping::ColumnMajor,
            Mapping::SharedPanels,
        ],
        MappingChoice::RowMajor => &[Mapping::RowMajor],
        MappingChoice::ColumnMajor => &[Mapping::ColumnMajor],
        MappingChoice::SharedPanels => &[Mapping::SharedPanels],
    };
    let errors = verify_mid(mid, graph, target);
    if !errors.is_empty() {
        return Err(SelectFinalistError::InvalidMid(errors.join("\n")));
    }
    let selected = cheapest(graph, mid, mappings, &cfg.passed_over, target)?;
    tracing::info!(
        selected = selected.finalist,
        mapping = ?selected.mapping,
        estimated_cycles = selected.estimate.cycles,
        estimated_exchange_cycles = selected.estimate.exchange_cycles,
        "selected operator-plan finalist"
    );
    let errors = verify(&selected, target);
    if !errors.is_empty() {
        return Err(SelectFinalistError::Invalid(errors.join("\n")));
    }
    Ok(selected)
}

/// The choice among the finalists ([`choose`]): the first finalist that fits under some mapping is
/// modelled under every mapping, and the finalists after it under its cheapest only (a mapping
/// moves every operator's exchanges, so its order holds across finalists, which differ in a few
/// operators in each layer). Of those modelled and not passed over, the one with the least modelled
/// cycles is kept (the first among equals, in finalist then mapping order). The programs are built
/// in parallel, each let go once costed (a large model's program takes hundreds of MB), and the
/// chosen one built again, whole: should that overflow a tile where its model through the second
/// layer did not, it is set aside as not fitting and the choice made again. The choice is a total
/// order, so it does not depend on which finishes first.
fn cheapest(
    graph: &Graph,
    mid: &Mid,
    mappings: &[Mapping],
    passed_over: &[PassedOver],
    target: &Target,
) -> Result<Selected, SelectFinalistError> {
    let candidates: Vec<Candidate> = (0..mid.finalists.len())
        .flat_map(|f| mappings.iter().map(move |&m| (f, m)))
        .enumerate()
        .map(|(order, (f, mapping))| {
            let finalist = f as u32;
            Candidate {
                order,
                finalist,
                mapping,
                passed_over: passed_over.contains(&PassedOver { finalist, mapping }),
            }
        })
        .collect();
    if candidates.iter().all(|c| c.passed_over) && !passed_over.is_empty() {
        return Err(SelectFinalistError::AllPassedOver);
    }
    // Candidates whose whole program overflowed a tile though their model fitted, and every
    // candidate's model by its place in the order, kept from one choice to the next.
    let layers = model_layers(graph, mid);
    let mut unfit: Vec<(u32, Mapping, String)> = Vec::new();
    let known: Mutex<BTreeMap<usize, Modelled>> = Mutex::new(BTreeMap::new());
    let known = || {
        known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    loop {
        let modelled = |c: Candidate| -> Modelled {
            let (f, mapping) = (c.finalist, c.mapping);
            if let Some((.., why)) = (unfit.iter()).find(|u| (u.0, u.1) == (f, mapping)) {
                return Err((c.order, why.clone()));
            }
            if let Some(m) = known().get(&c.order) {
                return m.clone();
            }
            let plan = &mid.finalists[f as usize];
            let ((cycles, exchange_cycles), s) = model(graph, mid, layers, f, mapping, target);
            tracing::info!(
                finalist = f,
                mapping = ?mapping,
                analytical_cycles = plan.estimate.cycles,
                modelled_cycles = cycles,
                modelled_exchange_cycles = exchange_cycles,
                modelled_operators = s.operators.len(),
                "modelled operator-plan finalist"
            );
            let m = match too_full(&s, target) {
                None => Ok(((cycles, c.order), f, mapping)),
                Some(why) => {
                    tracing::info!("{why}: the next finalist is tried");
                    Err((c.order, why))
                }
            };
            known().insert(c.order, m.clone());
            m
        };
        let (_, f, mapping) = choose(&candidates, modelled)
            .ok_or(SelectFinalistError::NoFinalist)?
            .map_err(|(_, why)| SelectFinalistError::NoneFits(why))?;
        let (whole, _) = whole_program(graph, mid, f, mapping, target, layers);
        match too_full(&whole, target) {
            None => return Ok(whole),
            Some(why) => {
                tracing::info!("{why}: the next finalist is tried");
                unfit.push((f, mapping, why));
            }
        }
    }
}

/// The whole program of finalist `f` under `mapping`, its middle layers copied from the third when
/// `layers` (what [`model_layers`] gives) number five or more, else every operator built: the same
/// program either way; and whether they were copied.
pub fn whole_program(
    graph: &Graph,
    mid: &Mid,
    f: u32,
    mapping: Mapping,
    target: &Target,
    layers: Option<Layers>,
) -> (Selected, bool) {
    let partitions = &mid.finalists[f as usize].partitions;
    build(
        graph,
        &mid.operators,
        partitions,
        f,
        mapping,
        target,
        layers,
    )
}

/// Why `s` does not fit tile memory, if it does not: the first tile and step that overflow.
fn too_full(s: &Selected, target: &Target) -> Option<String> {
    let (tile, step, live, holds) = overflow(&s.buffers, s.steps.len(), target)?;
    Some(format!(
        "finalist {} ({}): {tile} has {live} bytes live at step{step}, {holds} fit",
        s.finalist,
        s.mapping.name()
    ))
}

/// A candidate's model, as the choice ranks it: its modelled cycles and exchange cycles, and the
/// program they come from: through the second of `layers` (what [`model_layers`] gives), else
/// whole.
pub fn model(
    graph: &Graph,
    mid: &Mid,
    layers: Option<Layers>,
    finalist: u32,
    mapping: Mapping,
    target: &Target,
) -> ((u64, u64), Selected) {
    match layers {
        Some(l) => through_second_layer(graph, mid, l, finalist, mapping, target),
        None => {
            let plan = &mid.finalists[finalist as usize];
            let s = build(
                graph,
                &mid.operators,
                &plan.partitions,
                finalist,
                mapping,
                target,
                None,
            )
            .0;
            ((s.estimate.cycles, s.estimate.exchange_cycles), s)
        }
    }
}

/// The mid's layers when a candidate is modelled through the second of them: three or more,
/// ending the program, repeating exactly ([`repeats_exactly`]).
pub fn model_layers(graph: &Graph, mid: &Mid) -> Option<Layers> {
    (mid.layers).filter(|l| {
        l.count >= 3 && l.end() == mid.operators.len() && repeats_exactly(graph, mid, *l)
    })
}

/// Whether every layer after the second builds the steps the second does when `layers` are
/// planned alike: each value an operator of the second or a later layer reads is produced by no
/// operator or by one of the layers (so each later layer reads from the layer before it what the
/// second reads from the first, laid out alike), and each value an operator of the layers produces
/// that anything outside its own layer reads (a later layer, the host) is written in an order of
/// its producer's own (`fixed_output_order`), which the readers a model through the second layer
/// leaves out cannot change. An encoder's layers, which hand on a layer norm's rows, qualify; an
/// MLP's blocks, whose matmuls write as the next block reads, do not.
fn repeats_exactly(graph: &Graph, mid: &Mid, layers: Layers) -> bool {
    let ops = &mid.operators;
    let (start, period) = (layers.start as usize, layers.period.max(1) as usize);
    let producer = producing_operators(graph, ops);
    let layer = |i: usize| (i >= start && i < layers.end()).then(|| (i - start) / period);
    let mut crossing = vec![false; ops.len()];
    for (i, op) in ops.iter().enumerate() {
        for (v, _) in reads(op, false) {
            let Some(j) = producer.get(v.index()).copied().flatten() else {
                continue;
            };
            if layer(i).is_some_and(|k| k >= 1) && j < start {
                return false;
            }
            if layer(j).is_some() && layer(j) != layer(i) {
                crossing[j] = true;
            }
        }
    }
    (ops.iter().enumerate()).all(|(j, op)| {
        let read_outside = crossing[j] || op.outs().any(|v| graph.host_reads(v));
        layer(j).is_none() || !read_outside || fixed_output_order(op).is_some()
    })
}

/// A finalist of a mid whose last `layers.count` layers (three or more) are planned alike and
/// repeat exactly ([`repeats_exactly`]), modelled on its operators through the second layer: its
/// modelled cycles and exchange cycles with each later layer costed as the second, and the program
/// of those operators. Its buffers are those of the whole program's first operators, each live no
/// longer, so a tile that overflows here overflows there too.
fn through_second_layer(
    graph: &Graph,
    mid: &Mid,
    layers: Layers,
    f: u32,
    mapping: Mapping,
    target: &Target,
) -> ((u64, u64), Selected) {
    let partitions = &mid.finalists[f as usize].partitions;
    let second = layers.start as usize + layers.period as usize;
    let upto = second + layers.period as usize;
    let s = build(
        graph,
        &mid.operators[..upto],
        &partitions[..upto],
        f,
        mapping,
        target,
        None,
    )
    .0;
    let first_step: usize = partitions[..second].iter().map(steps_of).sum::<u32>() as usize;
    let steps = || (s.steps.iter().zip(&s.estimate.steps)).skip(first_step);
    let layer = steps().map(|(_, c)| c).sum::<u64>()
        + target.sync_estimate((s.steps.len() - first_step) as u64);
    let exchange: u64 = (steps().filter(|(step, _)| matches!(step, Step::Exchange(_))))
        .map(|(_, c)| c)
        .sum();
    let later = u64::from(layers.count - 2);
    let modelled = (
        s.estimate.cycles + later * layer,
        s.estimate.exchange_cycles + later * exchange,
    );
    (modelled, s)
}

/// A finalist under a mapping, with its place in the order and whether the build passed it over.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    order: usize,
    finalist: u32,
    mapping: Mapping,
    passed_over: bool,
}

/// A candidate's modelled cost with its place in the order (the first among equals wins), its
/// finalist and mapping; or why it does not fit, with its place.
type Modelled = Result<((u64, usize), u32, Mapping), (usize, String)>;

/// The best of two modelled candidates: one that fits before one that does not, then the fewer
/// cycles, then the earlier; of two that do not fit, the earlier one's reason.
fn better(a: Modelled, b: Modelled) -> Modelled {
    match (a, b) {
        (Ok(a), Ok(b)) if b.0 < a.0 => Ok(b),
        (Ok(a), _) => Ok(a),
        (Err(_), Ok(b)) => Ok(b),
        (Err(a), Err(b)) => Err(a.min(b)),
    }
}

/// The best of `candidates` (in order) not passed over, modelling each finalist in turn under
/// every mapping until one fits under some, then the finalists after it under that finalist's
/// cheapest mapping only; should none of those be open and fit, the next finalist goes on as the
/// first did. A candidate passed over is modelled when its finalist fixes the mapping, so that a
/// retry fixes the same one, but never chosen. With one mapping, every candidate not passed over is
/// modelled at once.
fn choose(
    candidates: &[Candidate],
    modelled: impl Fn(Candidate) -> Modelled + Sync,
) -> Option<Modelled> {
    let model_all = |list: Vec<Candidate>| -> Vec<(Candidate, Modelled)> {
        list.into_par_iter().map(|c| (c, modelled(c))).collect()
    };
    let chosen = |results: &[(Candidate, Modelled)]| {
        (results.iter())
            .filter(|(c, _)| !c.passed_over)
            .map(|(_, m)| m.clone())
            .reduce(better)
    };
    let join =
        |a: Option<Modelled>, b: Option<Modelled>| [a, b].into_iter().flatten().reduce(better);
    let open = |list: &[Candidate]| list.iter().filter(|c| !c.passed_over).copied().collect();
    let one_mapping = candidates
        .iter()
        .all(|c| Some(c.mapping) == candidates.first().map(|f| f.mapping));
    if one_mapping {
        return chosen(&model_all(open(candidates)));
    }
    let mut best: Option<Modelled> = None;
    let mut rest = candidates;
    while let Some(first) = rest.first() {
        let (this, after) = rest.split_at(rest.partition_point(|c| c.finalist == first.finalist));
        rest = after;
        let results = model_all(this.to_vec());
        best = join(best, chosen(&results));
        // The finalist's cheapest mapping, passed over or not.
        let fixed = (results.into_iter()).map(|(_, m)| m).reduce(better);
        if let Some(Ok((_, _, mapping))) = fixed {
            let under: Vec<Candidate> = (rest.iter())
                .filter(|c| c.mapping == mapping)
                .copied()
                .collect();
            best = join(best, chosen(&model_all(open(&under))));
            if matches!(best, Some(Ok(_))) {
                return best;
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    const MAPPINGS: [Mapping; 3] = [
        Mapping::RowMajor,
        Mapping::ColumnMajor,
        Mapping::SharedPanels,
    ];

    /// Three finalists under `mappings`, in the order `cheapest` lists them, `passed` passed over.
    fn candidates(mappings: &[Mapping], passed: &[(u32, Mapping)]) -> Vec<Candidate> {
        (0..3u32)
            .flat_map(|f| mappings.iter().map(move |&m| (f, m)))
            .enumerate()
            .map(|(order, (finalist, mapping))| Candidate {
                order,
                finalist,
                mapping,
                passed_over: passed.contains(&(finalist, mapping)),
            })
            .collect()
    }

    /// `choose` over `list` with a model of `cost(finalist, mapping)` cycles (`None`: does not
    /// fit): what it chose and which candidates it modelled, sorted.
    fn chosen(
        list: &[Candidate],
        cost: impl Fn(u32, Mapping) -> Option<u64> + Sync,
    ) -> (Option<Modelled>, Vec<(u32, &'static str)>) {
        let seen = Mutex::new(Vec::new());
        let best = choose(list, |c| {
            seen.lock().unwrap().push((c.finalist, c.mapping.name()));
            let (f, m) = (c.finalist, c.mapping);
            cost(f, m).map_or(Err((c.order, format!("{f}"))), |cy| {
                Ok(((cy, c.order), f, m))
            })
        });
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        (best, seen)
    }

    /// Shared panels is cheapest for finalist 0; finalist 2 is cheapest of all under it, and
    /// cheaper still under row-major.
    fn cost(f: u32, m: Mapping) -> Option<u64> {
        Some(match (f, m) {
            (2, Mapping::RowMajor) => 10,
            (_, Mapping::SharedPanels) => 100 - u64::from(f),
            _ => 200,
        })
    }

    #[test]
    fn the_first_finalist_fixes_the_mapping_the_others_are_modelled_under() {
        let (best, seen) = chosen(&candidates(&MAPPINGS, &[]), cost);
        assert_eq!(best, Some(Ok(((98, 8), 2, Mapping::SharedPanels))));
        let want = [
            (0, "column-major"),
            (0, "row-major"),
            (0, "shared-panels"),
            (1, "shared-panels"),
            (2, "shared-panels"),
        ];
        assert_eq!(seen, want);
    }

    #[test]
    fn a_retry_keeps_the_mapping_its_passed_over_candidate_fixed() {
        // The chosen candidate and then finalist 0's under the same mapping passed over: the
        // mapping stays, the next under it is chosen.
        let list = candidates(
            &MAPPINGS,
            &[(2, Mapping::SharedPanels), (0, Mapping::SharedPanels)],
        );
        let (best, seen) = chosen(&list, cost);
        assert_eq!(best, Some(Ok(((99, 5), 1, Mapping::SharedPanels))));
        assert!(seen.contains(&(0, "shared-panels")));
        assert!(!seen.contains(&(2, "shared-panels")));
        assert_eq!(seen.len(), 4);
    }

    #[test]
    fn a_fixed_mapping_with_nothing_open_under_it_passes_the_choice_on() {
        // Finalist 0 fits only under shared panels, which every finalist is passed over under.
        let sp = Mapping::SharedPanels;
        let list = candidates(&MAPPINGS, &[(0, sp), (1, sp), (2, sp)]);
        let (best, seen) = chosen(&list, |f, m| match (f, m) {
            (0, Mapping::SharedPanels) => Some(100),
            (0, _) => None,
            (1, Mapping::RowMajor) | (2, _) => Some(60 + 10 * u64::from(2 - f)),
            _ => Some(90),
        });
        assert_eq!(best, Some(Ok(((60, 6), 2, Mapping::RowMajor))));
        assert_eq!(seen.len(), 3 + 3 + 1);
    }

    #[test]
    fn with_one_mapping_every_finalist_is_modelled() {
        let list = candidates(&[Mapping::ColumnMajor], &[(1, Mapping::ColumnMajor)]);
        let (best, seen) = chosen(&list, |f, _| Some(50 - u64::from(f)));
        assert_eq!(best, Some(Ok(((48, 2), 2, Mapping::ColumnMajor))));
        assert_eq!(seen, [(0, "column-major"), (2, "column-major")]);
    }

    #[test]
    fn a_finalist_that_fits_nowhere_leaves_the_mapping_to_the_next() {
        let list = candidates(&MAPPINGS, &[]);
        let (best, seen) = chosen(&list, |f, m| match (f, m) {
            (0, _) => None,
            (_, Mapping::ColumnMajor) => Some(50 + u64::from(f)),
            _ => Some(60),
        });
        assert_eq!(best, Some(Ok(((51, 4), 1, Mapping::ColumnMajor))));
        assert_eq!(seen.len(), 3 + 3 + 1);
        // Nothing fits: the first finalist's reason.
        let (best, seen) = chosen(&list, |_, _| None);
        assert_eq!(best, Some(Err((0, "0".to_string()))));
        assert_eq!(seen.len(), 9);
    }
}
