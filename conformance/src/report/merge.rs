//! `concord report merge`: joins the conformance.json of several runs — shards of one run,
//! runs on several machines, several devices — into one set of records, from which every
//! report is written as for a single run (columns executor × target × device).
//!
//! Invariants: a merge loses nothing a report holds and invents nothing: the same trial on
//! the same device twice is an error (two copies of one run, not a fleet), records are put
//! in one canonical order so that N shards merged equal the whole run merged, and the
//! floors a shard could not check alone are checked here over every shard's records.

use super::{Floor, RunInfo, JSON_FORMAT};
use crate::outcome::Record;
use crate::shard::Shard;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The file a run writes and a merge reads.
pub const JSON_FILE: &str = "conformance.json";

/// One conformance.json read back.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Where it was read from.
    pub path: PathBuf,
    pub run: RunInfo,
    pub run_failures: Vec<String>,
    pub records: Vec<Record>,
}

/// Several runs joined: write it with [`super::write_report`].
#[derive(Clone, Debug, Default)]
pub struct Merged {
    pub records: Vec<Record>,
    pub run_failures: Vec<String>,
    pub run: RunInfo,
}

/// conformance.json as read: the summary is recomputed from the records, except for the
/// run-level failures, which only the run knew.
#[derive(Deserialize)]
struct JsonFile {
    #[serde(default)]
    run: RunInfo,
    summary: JsonSummary,
    records: Vec<Record>,
}

#[derive(Deserialize)]
struct JsonSummary {
    run_failures: Vec<String>,
}

impl RunReport {
    /// Reads `path`, a conformance.json or a directory holding one. A file of another
    /// format version is refused, naming both versions.
    pub fn read(path: &Path) -> Result<RunReport, String> {
        let file = if path.is_dir() {
            path.join(JSON_FILE)
        } else {
            path.to_path_buf()
        };
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("reading {}: {e}", file.display()))?;
        // The format tag first, so that a report of another version says so rather than
        // failing on whichever field changed.
        let format = serde_json::from_str::<serde_json::Value>(&text)
            .map_err(|e| format!("{}: not JSON: {e}", file.display()))?
            .get("format")
            .and_then(|f| f.as_str().map(str::to_string));
        match format.as_deref() {
            Some(JSON_FORMAT) => {}
            Some(other) => {
                return Err(format!(
                    "{}: a report of format `{other}`; this concord reads `{JSON_FORMAT}` (merge reports written by the same release)",
                    file.display()
                ))
            }
            None => {
                return Err(format!(
                    "{}: not a conformance report (no `format` field)",
                    file.display()
                ))
            }
        }
        let json: JsonFile = serde_json::from_str(&text)
            .map_err(|e| format!("{}: malformed report: {e}", file.display()))?;
        Ok(RunReport {
            path: file,
            run: json.run,
            run_failures: json.summary.run_failures,
            records: json.records,
        })
    }
}

/// Joins `reports`. Fails only when they cannot be one report: the same trial on the same
/// device in two of them. Missing shards and floors the merged trials fall below are
/// run-level failures of the merged report.
pub fn merge(reports: &[RunReport]) -> Result<Merged, String> {
    let mut seen: BTreeMap<(&str, &str), &Path> = BTreeMap::new();
    let mut records = Vec::new();
    let mut run_failures: Vec<String> = Vec::new();
    let mut devices = BTreeSet::new();
    let mut floors: Vec<&Floor> = Vec::new();
    // Shards are told apart by their count and by the executors and devices their run
    // probed: a fleet may run shards 1/2 and 2/2 on each of several devices.
    let mut shards: BTreeMap<(usize, String), BTreeSet<usize>> = BTreeMap::new();
    for report in reports {
        for r in &report.records {
            if let Some(first) = seen.insert((r.name.as_str(), r.device.as_str()), &report.path) {
                return Err(format!(
                    "trial {} on device `{}` is in both {} and {}: merge shards of one run, or runs on different devices, not two copies of one run",
                    r.name,
                    r.device,
                    first.display(),
                    report.path.display()
                ));
            }
            records.push(r.clone());
        }
        for f in &report.run_failures {
            push_once(&mut run_failures, f.clone());
        }
        devices.extend(report.run.devices.iter().cloned());
        for floor in &report.run.deferred_floors {
            if !floors.contains(&floor) {
                floors.push(floor);
            }
        }
        if let Some(shard @ Shard { index, count }) = report.run.shard {
            let run = devices_of(&report.run);
            if !shards
                .entry((count, run.clone()))
                .or_default()
                .insert(index)
            {
                return Err(format!(
                    "shard {shard} of the run on {run} is given twice (the second time in {}): merge each shard once",
                    report.path.display()
                ));
            }
        }
    }
    for ((count, run), present) in &shards {
        let missing: Vec<String> = (1..=*count)
            .filter(|k| !present.contains(k))
            .map(|k| format!("{k}/{count}"))
            .collect();
        if !missing.is_empty() {
            push_once(
                &mut run_failures,
                format!(
                    "shard(s) {} of the run on {run} missing from the merge: the merged report covers only part of the run",
                    missing.join(", ")
                ),
            );
        }
    }
    // One canonical order, whatever order the runs and their threads produced: by trial
    // name (which starts with executor/target), then device.
    records.sort_by(|a, b| (&a.name, &a.device).cmp(&(&b.name, &b.device)));
    for floor in floors {
        for failure in floor.check(&records) {
            push_once(&mut run_failures, failure);
        }
    }
    Ok(Merged {
        records,
        run_failures,
        run: RunInfo {
            shard: None,
            devices: devices.into_iter().collect(),
            deferred_floors: Vec::new(),
            merged_from: reports
                .iter()
                .map(|r| r.path.display().to_string())
                .collect(),
        },
    })
}

/// "cpu on host, opencl on pthread-cpu": the executors and devices a run probed.
fn devices_of(run: &RunInfo) -> String {
    let mut names: Vec<String> = run
        .devices
        .iter()
        .map(|d| {
            if d.device.is_empty() {
                format!("{} (no device)", d.executor)
            } else {
                format!("{} on {}", d.executor, d.device)
            }
        })
        .collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        "no recorded device".to_string()
    } else {
        names.join(", ")
    }
}

/// Appends `item` unless it is there already: every shard of a run reports the same
/// run-level failure (a stale expectation, a bad `CONCORD_REQUIRE`) once.
fn push_once(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}
