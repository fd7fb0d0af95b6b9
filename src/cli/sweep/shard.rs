//! Sweeps across machines: `sweep … --shard I/N --json` builds and runs one share of the grid and
//! writes it as a part; `sweep --merge PART.json…` puts the parts back together.
//!
//! Contract:
//! - Shard `I/N` (0 ≤ I < N) holds the grid points `p` with `p % N == I`, in grid order: round-robin,
//!   so neighbouring points, which often cost alike, spread over the shards.
//! - A part is `sweep --json`'s object with a `shard` field: its index and count, the grid's size, the
//!   values of every axis in order and whether the points were checked (`--check`).
//! - The merge takes parts of one sweep (the same workload, axes and values, shard count and
//!   `--check`), each shard exactly once, each holding exactly its points with the values of their
//!   place in the grid; anything else is an error naming the file. Its rows are the grid's rows in
//!   grid order, the rows the unsharded sweep gives: a row's figures are taken as the part shows
//!   them, which is as the table shows them ([`super::Row::cells`]).

use super::{Axis, Measured, Row, grid};
use anyhow::{Context, Result, anyhow, bail};
use ipu_codegen::files;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// One shard of a grid: `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Parses `I/N`: whole numbers with `I < N`.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let numbers = text.split_once('/').and_then(|(i, n)| {
            Some((
                i.trim().parse::<usize>().ok()?,
                n.trim().parse::<usize>().ok()?,
            ))
        });
        match numbers {
            None => Err(format!(
                "{text:?}: expected I/N, two whole numbers (for example 0/3: the first of three shards)"
            )),
            Some((_, 0)) => Err(format!("{text:?}: the shard count must be at least 1")),
            Some((index, count)) if index >= count => Err(format!(
                "{text:?}: the shard index must be below the count (0 to {})",
                count - 1
            )),
            Some((index, count)) => Ok(Shard { index, count }),
        }
    }

    /// Whether grid point `point` is this shard's.
    pub fn holds(self, point: usize) -> bool {
        point % self.count == self.index
    }

    /// The `shard` field of a part over `axes`, `points` in all.
    pub fn json(self, axes: &[Axis], check: bool) -> Value {
        json!({
            "index": self.index,
            "count": self.count,
            "points": grid(axes).len(),
            "values": axes.iter().map(|a| &a.values).collect::<Vec<_>>(),
            "check": check,
        })
    }
}

/// A sweep part, at most this large.
const PART: files::Kind = files::Kind {
    what: "sweep part",
    limit: 64 << 20,
    magic: b"",
    format: "a sweep part",
};

/// A part as read: what sweep it is of, and its rows.
struct Part {
    path: PathBuf,
    workload: String,
    axes: Vec<Axis>,
    shard: Shard,
    points: usize,
    check: bool,
    rows: Vec<Row>,
}

impl Part {
    /// The sweep it is part of, for comparing with another part's.
    fn sweep(&self) -> (&str, &[Axis], usize, usize, bool) {
        (
            &self.workload,
            &self.axes,
            self.shard.count,
            self.points,
            self.check,
        )
    }

    fn describe(&self) -> String {
        let axes: Vec<String> = (self.axes.iter())
            .map(|a| format!("{}={}", a.name, a.values.join(",")))
            .collect();
        format!(
            "{} over {}{} in {} shards",
            self.workload,
            axes.join(" "),
            if self.check { " with --check" } else { "" },
            self.shard.count,
        )
    }
}

/// The workload, axes and rows of the sweep `paths` are the parts of, the rows in grid order.
pub fn merge(paths: &[PathBuf]) -> Result<(String, Vec<Axis>, Vec<Row>)> {
    let mut parts: Vec<Part> = Vec::new();
    for path in paths {
        let part = read(path)?;
        if let Some(first) = parts.first()
            && first.sweep() != part.sweep()
        {
            bail!(
                "{} is a part of the sweep of {}, where {} is a part of the sweep of {}",
                path.display(),
                part.describe(),
                first.path.display(),
                first.describe()
            );
        }
        if let Some(same) = parts.iter().find(|p| p.shard == part.shard) {
            bail!(
                "{} and {} are both shard {}/{}: give each shard once",
                same.path.display(),
                path.display(),
                part.shard.index,
                part.shard.count
            );
        }
        parts.push(part);
    }
    let Some(first) = parts.first() else {
        bail!("--merge needs the parts of a sweep");
    };
    let count = first.shard.count;
    let missing: Vec<String> = (0..count)
        .filter(|&i| parts.iter().all(|p| p.shard.index != i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        bail!(
            "the parts given ({}) lack shard {} of the sweep",
            (parts.iter().map(|p| p.path.display().to_string()))
                .collect::<Vec<_>>()
                .join(", "),
            missing.join(", ")
        );
    }
    let (workload, axes, points) = (first.workload.clone(), first.axes.clone(), first.points);
    parts.sort_by_key(|p| p.shard.index);
    let mut rows = Vec::with_capacity(points);
    for point in 0..points {
        rows.push(parts[point % count].rows[point / count].clone());
    }
    Ok((workload, axes, rows))
}

/// Reads and checks one part: a sweep's JSON with its shard, holding exactly the shard's points.
fn read(path: &Path) -> Result<Part> {
    let bytes = files::read(path, &PART)?;
    let value: Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not JSON", path.display()))?;
    part(&value)
        .map_err(|why| {
            anyhow!(
                "{} is not a sweep part (`sweep … --shard I/N --json`): {why}",
                path.display()
            )
        })
        .map(|mut p| {
            p.path = path.to_path_buf();
            p
        })
}

/// A part from its JSON; why not, when it is not one.
fn part(value: &Value) -> Result<Part, String> {
    if value["kind"] != "sweep" {
        return Err("its kind is not sweep".to_string());
    }
    let text = |v: &Value, what: &str| {
        v.as_str()
            .map(str::to_string)
            .ok_or(format!("{what} is not a string"))
    };
    let count = |v: &Value, what: &str| {
        (v.as_u64())
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(format!("{what} is not a whole number"))
    };
    let workload = text(&value["workload"], "workload")?;
    let shard = &value["shard"];
    if !shard.is_object() {
        return Err("it has no shard field: it is a whole sweep".to_string());
    }
    let (index, shards) = (
        count(&shard["index"], "shard.index")?,
        count(&shard["count"], "shard.count")?,
    );
    let shard_of = Shard::parse(&format!("{index}/{shards}")).map_err(|e| format!("shard {e}"))?;
    let names = (value["axes"].as_array())
        .ok_or("axes is not a list")?
        .iter()
        .map(|n| text(n, "an axis name"))
        .collect::<Result<Vec<_>, _>>()?;
    let values = (shard["values"].as_array())
        .filter(|v| v.len() == names.len())
        .ok_or("shard.values does not list the values of every axis")?;
    let mut axes = Vec::new();
    for (name, list) in names.iter().zip(values) {
        let list = (list.as_array())
            .filter(|l| !l.is_empty())
            .ok_or(format!("shard.values of {name} is not a list of values"))?;
        let list = list
            .iter()
            .map(|v| text(v, "an axis value"))
            .collect::<Result<Vec<_>, _>>()?;
        axes.push(Axis::named(name, list));
    }
    let points = count(&shard["points"], "shard.points")?;
    let grid = grid(&axes);
    if grid.len() != points {
        return Err(format!(
            "shard.points is {points}, where its axes make {} points",
            grid.len()
        ));
    }
    let check = shard["check"]
        .as_bool()
        .ok_or("shard.check is not true or false")?;
    let given = value["rows"].as_array().ok_or("rows is not a list")?;
    let mine: Vec<&Vec<usize>> = (grid.iter().enumerate())
        .filter(|&(p, _)| shard_of.holds(p))
        .map(|(_, point)| point)
        .collect();
    if given.len() != mine.len() {
        return Err(format!(
            "it holds {} rows, where shard {index}/{shards} of {points} points has {}",
            given.len(),
            mine.len()
        ));
    }
    let rows = (given.iter().zip(mine).enumerate())
        .map(|(k, (row, point))| {
            let expected: Vec<String> = (axes.iter().zip(point))
                .map(|(a, &i)| a.values[i].clone())
                .collect();
            self::row(row, &axes, expected).map_err(|why| format!("row {k}: {why}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Part {
        path: PathBuf::new(),
        workload,
        axes,
        shard: shard_of,
        points,
        check,
        rows,
    })
}

/// A row from its JSON (as [`super::json`] writes it), whose axis values must be `expected`.
fn row(value: &Value, axes: &[Axis], expected: Vec<String>) -> Result<Row, String> {
    let found: Vec<String> = (axes.iter())
        .map(|a| match &value[&a.name] {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        })
        .collect();
    if found != expected {
        let point = |values: &[String]| {
            (axes.iter().zip(values))
                .map(|(a, v)| format!("{}={v}", a.name))
                .collect::<Vec<_>>()
                .join(" ")
        };
        return Err(format!(
            "it is point ({}), where the shard's row here is point ({})",
            point(&found),
            point(&expected)
        ));
    }
    let optional_text = |key: &str| match &value[key] {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(format!("{key} is not a string or null")),
    };
    let test = |key: &str| match optional_text(key)?.as_deref() {
        None => Ok(None),
        Some("PASS") => Ok(Some(true)),
        Some("FAIL") => Ok(Some(false)),
        Some(other) => Err(format!("{key} is {other:?}, not PASS, FAIL or null")),
    };
    let measured = match (
        &value["cycles"],
        &value["efficiencyPercent"],
        &value["estimatedCycles"],
    ) {
        (Value::Null, Value::Null, Value::Null) => None,
        (cycles, efficiency, estimated) => Some(Measured {
            cycles: cycles.as_u64().ok_or("cycles is not a whole number")?,
            efficiency_percent: efficiency
                .as_f64()
                .ok_or("efficiencyPercent is not a number")?,
            estimated_cycles: estimated
                .as_u64()
                .ok_or("estimatedCycles is not a whole number")?,
        }),
    };
    Ok(Row {
        values: found,
        build: optional_text("build")?,
        measured,
        hardware_pass: test("hardwareTest")?,
        numerical_pass: test("numericalTest")?,
        error: optional_text("error")?,
    })
}

#[cfg(test)]
mod tests {
    use super::Shard;

    #[test]
    fn a_shard_is_an_index_below_a_count() {
        assert_eq!(Shard::parse("0/3"), Ok(Shard { index: 0, count: 3 }));
        assert_eq!(Shard::parse("2/3"), Ok(Shard { index: 2, count: 3 }));
        for (bad, says) in [
            ("3/3", "below the count (0 to 2)"),
            ("0/0", "at least 1"),
            ("x/2", "expected I/N"),
            ("1", "expected I/N"),
            ("-1/2", "expected I/N"),
        ] {
            let e = Shard::parse(bad).unwrap_err();
            assert!(e.contains(says) && e.contains(bad), "{bad}: {e}");
        }
        let s = Shard { index: 1, count: 3 };
        assert_eq!((0..7).filter(|&p| s.holds(p)).collect::<Vec<_>>(), [1, 4]);
    }
}
