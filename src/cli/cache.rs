//! `ipu-codegen cache`: list, count, verify, repair and collect the store.
//!
//! Contract: `verify` reads only and exits non-zero on any damage or unreadable file; `--repair` and
//! `gc` open the store alone (waiting for running builds) and remove files. Every figure goes to
//! stdout as `key=value`, every damaged or unreadable file on a line of its own.

use anyhow::{Result, bail};
use clap::Subcommand;
use ipu_codegen::driver::{latest_lookups, verify_records};
use ipu_codegen::store::{Counts, Damage, LocalStore};
use serde_json::{Value, json};
use std::path::Path;

#[derive(Subcommand, Debug)]
pub enum CacheAction {
    /// List objects with their kind and size.
    Ls {
        /// Print one JSON object (kind `cacheLs`) instead of the lines.
        #[arg(long)]
        json: bool,
    },
    /// Count objects, bytes, action entries and temp files, and give the hits and misses per level
    /// of the store of the most recent build under --stages (`-` for a level it did not read).
    Stats {
        /// Print one JSON object (kind `cacheStats`) instead of the line.
        #[arg(long)]
        json: bool,
    },
    /// Re-hash every object and check every action entry (one naming a missing or damaged object is
    /// damaged) and every stage record and package under --stages (one of another build is damaged);
    /// exits non-zero on any damage or unreadable file.
    Verify {
        /// Remove what is damaged (waits for running builds); the next build recomputes it.
        #[arg(long)]
        repair: bool,
        /// Print one JSON object (kind `cacheVerify`) instead of the lines.
        #[arg(long)]
        json: bool,
    },
    /// Remove the temp files of writes that never finished, then objects and action entries by age
    /// and total size (waits for running builds). Without an option it removes temp files only.
    Gc {
        /// Remove what no build has used for this many days.
        #[arg(long, value_name = "DAYS")]
        max_age_days: Option<u64>,
        /// Then remove the least recently used until the store holds at most this many bytes: a
        /// count of bytes, or one with a binary suffix (`500M`, `1G`, `2GiB`: K, M, G and T are
        /// powers of 1024).
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        max_bytes: Option<u64>,
        /// Print one JSON object (kind `cacheGc`) instead of the lines.
        #[arg(long)]
        json: bool,
    },
}

fn print_all(label: &str, list: &[Damage]) {
    for d in list {
        println!("{label} {}: {}", d.path.display(), d.what);
    }
}

/// Damaged or unreadable files as JSON: `[{"path", "what"}]`.
fn damage_json(list: &[Damage]) -> Value {
    list.iter()
        .map(|d| json!({"path": d.path.display().to_string(), "what": d.what}))
        .collect()
}

/// Fails when some files could not be read (after they were printed).
fn refuse_unreadable(unreadable: &[Damage]) -> Result<()> {
    if !unreadable.is_empty() {
        bail!(
            "{} files or folders of the store could not be read",
            unreadable.len()
        );
    }
    Ok(())
}

pub fn cache(root: &Path, stages: &Path, action: CacheAction) -> Result<()> {
    match action {
        CacheAction::Ls { json } => {
            let store = LocalStore::open(root)?;
            let (objects, unreadable) = store.list();
            if json {
                let objects: Vec<Value> = (objects.iter())
                    .map(|(hash, bytes, kind)| {
                        json!({"hash": hash.to_string(), "bytes": bytes, "kind": kind})
                    })
                    .collect();
                let body = json!({"objects": objects, "unreadable": damage_json(&unreadable)});
                super::json::print("cacheLs", body);
            } else {
                for (hash, bytes, kind) in objects {
                    println!("{hash} {bytes:>10} {kind}");
                }
                print_all("unreadable", &unreadable);
            }
            refuse_unreadable(&unreadable)
        }
        CacheAction::Stats { json } => {
            let s = LocalStore::open(root)?.stats();
            let last = latest_lookups(stages)?;
            if json {
                let body = json!({
                    "objects": s.objects,
                    "bytes": s.object_bytes,
                    "actions": s.actions,
                    "tempFiles": s.temp_files,
                    "tempBytes": s.temp_bytes,
                    "unreadable": damage_json(&s.unreadable),
                    "lastBuild": last,
                });
                super::json::print("cacheStats", body);
            } else {
                let counts = |c: Option<Counts>| {
                    c.map_or(("-".to_string(), "-".to_string()), |c| {
                        (c.hits.to_string(), c.misses.to_string())
                    })
                };
                let (local_hits, local_misses) = counts(last.as_ref().map(|l| l.tally.local));
                let (remote_hits, remote_misses) =
                    counts(last.as_ref().and_then(|l| l.tally.remote));
                println!(
                    "objects={} bytes={} actions={} tempFiles={} tempBytes={} unreadable={} \
                     lastBuild={} localHits={local_hits} localMisses={local_misses} \
                     remoteHits={remote_hits} remoteMisses={remote_misses}",
                    s.objects,
                    s.object_bytes,
                    s.actions,
                    s.temp_files,
                    s.temp_bytes,
                    s.unreadable.len(),
                    last.as_ref().map_or("-", |l| l.build.as_str()),
                );
                print_all("unreadable", &s.unreadable);
            }
            refuse_unreadable(&s.unreadable)
        }
        CacheAction::Verify { repair, json } => {
            let store = if repair {
                LocalStore::open_exclusive(root)?
            } else {
                LocalStore::open(root)?
            };
            let s = store.verify();
            let (records, damaged_records, unreadable_records) = verify_records(stages);
            let mut damaged = s.damaged;
            damaged.extend(damaged_records);
            let mut unreadable = s.unreadable;
            unreadable.extend(unreadable_records);
            let removed = if repair {
                Some(store.repair(&damaged)?)
            } else {
                None
            };
            if json {
                let body = json!({
                    "objects": s.objects,
                    "actions": s.actions,
                    "records": records,
                    "damaged": damage_json(&damaged),
                    "unreadable": damage_json(&unreadable),
                    "removed": removed,
                });
                super::json::print("cacheVerify", body);
            } else {
                println!(
                    "objects={} actions={} records={records} damaged={} unreadable={}",
                    s.objects,
                    s.actions,
                    damaged.len(),
                    unreadable.len()
                );
                print_all("damaged", &damaged);
                if let Some(removed) = removed {
                    println!("removed={removed}");
                }
                print_all("unreadable", &unreadable);
            }
            refuse_unreadable(&unreadable)?;
            if !repair && !damaged.is_empty() {
                bail!(
                    "{} damaged files; `ipu-codegen cache verify --repair` removes them and the next \
                     build recomputes them",
                    damaged.len()
                );
            }
            Ok(())
        }
        CacheAction::Gc {
            max_age_days,
            max_bytes,
            json,
        } => {
            let store = LocalStore::open_exclusive(root)?;
            let age =
                max_age_days.map(|d| std::time::Duration::from_secs(d.saturating_mul(86_400)));
            let gc = store.gc(age, max_bytes);
            let temp_only = age.is_none() && max_bytes.is_none();
            if json {
                let body = json!({
                    "removedFiles": gc.files,
                    "removedBytes": gc.bytes,
                    "tempFilesOnly": temp_only,
                    "unreadable": damage_json(&gc.unreadable),
                });
                super::json::print("cacheGc", body);
            } else {
                println!("removed {} files, {} bytes", gc.files, gc.bytes);
                if temp_only {
                    println!(
                        "(temp files only: --max-age-days and --max-bytes choose objects and actions to remove)"
                    );
                }
                print_all("unreadable", &gc.unreadable);
            }
            refuse_unreadable(&gc.unreadable)
        }
    }
}

/// A size: bytes, or a number with a binary suffix (`K`, `M`, `G`, `T`, each optionally followed by
/// `iB` or `B`, any case): `1G` is 2^30 bytes, `1.5K` 1,536.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let unit = unit.trim().to_ascii_lowercase();
    let scale: u64 = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => {
            return Err(format!(
                "{text:?} is not a size: a count of bytes or one with K, M, G or T (powers of 1024), e.g. 500M or 1G"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size: no number before its unit"))?;
    let bytes = (value * scale as f64).round();
    if !bytes.is_finite() || bytes < 0.0 || bytes >= u64::MAX as f64 {
        return Err(format!("{text:?} is more bytes than a store can count"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_read_with_binary_suffixes_and_refuse_what_is_not_one() {
        for (text, bytes) in [
            ("0", 0),
            ("1536", 1536),
            ("1K", 1024),
            ("1.5k", 1536),
            ("500M", 500 << 20),
            ("1G", 1 << 30),
            ("2GiB", 2 << 30),
            ("3gb", 3 << 30),
            ("1T", 1 << 40),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        for text in ["", "G", "1X", "1.2.3M", "-1G", "1e30T"] {
            assert!(parse_size(text).is_err(), "{text}");
        }
    }
}
