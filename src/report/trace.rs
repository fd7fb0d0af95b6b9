//! Chrome trace-event JSON (Perfetto) of one profile, from serde types: one track per tile (or per
//! chip column), a slice per superstep for the busy part and one for the wait until the sync ends.
//! Times are microseconds at the profile's clock. Never panics on a crafted profile.

use crate::device::Execution;
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Trace {
    display_time_unit: &'static str,
    trace_events: Vec<Event>,
}

/// A track's name (`ph: "M"`) or a complete slice (`ph: "X"`).
#[derive(Serialize)]
struct Event {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<String>,
    ph: &'static str,
    pid: u32,
    tid: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<TrackName>,
}

#[derive(Serialize)]
struct TrackName {
    name: String,
}

/// The trace: one track per tile, or per column with `per_column` (its busiest tile).
pub fn trace(e: &Execution, per_column: bool) -> String {
    let us = |cycles: u64| cycles as f64 / e.clock_khz.max(1) as f64 * 1e3;
    let per_track = if per_column {
        e.tiles_per_column.max(1) as usize
    } else {
        1
    };
    let tracks = e.memory.len().div_ceil(per_track);
    let mut events: Vec<Event> = (0..tracks)
        .map(|t| Event {
            name: "thread_name".to_string(),
            cat: None,
            ph: "M",
            pid: 0,
            tid: t,
            ts: None,
            dur: None,
            args: Some(TrackName {
                name: if per_column {
                    format!("column {t}")
                } else {
                    format!("tile{t}")
                },
            }),
        })
        .collect();
    let slice = |name: String, cat: &str, tid: usize, start: u64, cycles: u64| Event {
        name,
        cat: Some(cat.to_string()),
        ph: "X",
        pid: 0,
        tid,
        ts: Some(us(start)),
        dur: Some(us(cycles)),
        args: None,
    };
    let mut start = 0u64;
    for (i, st) in e.steps.iter().enumerate() {
        let sync = st.sync_cycles;
        for t in 0..tracks {
            let first = (t * per_track).min(st.tile_busy.len());
            let end = (first + per_track).min(st.tile_busy.len());
            let busy = u64::from(st.tile_busy[first..end].iter().copied().max().unwrap_or(0));
            if busy > 0 {
                let name = format!("step{i} {}", st.kind);
                events.push(slice(name, &st.kind, t, start, busy));
            }
            let wait = st.cycles.saturating_sub(busy).saturating_add(sync);
            let name = format!("step{i} sync wait");
            events.push(slice(name, "sync", t, start.saturating_add(busy), wait));
        }
        start = start.saturating_add(st.cycles).saturating_add(sync);
    }
    let trace = Trace {
        display_time_unit: "ns",
        trace_events: events,
    };
    serde_json::to_string(&trace).unwrap_or_default() + "\n"
}
