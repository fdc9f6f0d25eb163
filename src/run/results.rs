//! `results.json`: the report of one run ([`RunReport`]) — the plan that was run and
//! every worker's result, in id order, with what fan-in found. The run stage makes
//! it; fan-in, the report and publishing read and amend it.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::model::fanin::{ConflictMap, Integration};
use crate::model::{Totals, WorkerResult};
use crate::plan::Plan;
use crate::util::rfc3339;

/// Version of `results.json`'s shape. 2: the `unchanged` status (`totals.unchanged`),
/// `findings`, and `totals.cost` `null` when no cost is known. 3: each result's
/// `cause` beside its `reason`. Older files are still read (the new fields default; a
/// reason without a cause is the worker's own).
pub const REPORT_SCHEMA_VERSION: u32 = 3;

/// The whole run: `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Version of this shape.
    pub schema_version: u32,
    /// The run id.
    pub run_id: String,
    /// RFC 3339 start time.
    pub started_at: String,
    /// RFC 3339 end time.
    pub finished_at: String,
    /// Wall-clock seconds.
    pub duration: f64,
    /// Whether a signal stopped the run.
    pub interrupted: bool,
    /// The plan that was run.
    pub plan: Plan,
    /// One per planned worker, in id order.
    pub results: Vec<WorkerResult>,
    /// Sums.
    pub totals: Totals,
    /// The process exit code this run maps to.
    pub exit_code: i32,
    /// Which successful workers touch the same files, and which truly conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<ConflictMap>,
    /// The integration branch (`--integrate`), when one was built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration: Option<Integration>,
    /// Why the run's workers ran without the sandbox (`sandbox: auto` where the kernel
    /// has no Landlock), or what a low Landlock ABI leaves open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_notice: Option<String>,
}

impl RunReport {
    /// The result of worker `id`, when the report has it.
    pub fn result(&self, id: u32) -> Option<&WorkerResult> {
        self.results.iter().find(|r| r.worker_id == id)
    }

    /// The report of `results` of `plan`, finished now: totals and exit code computed,
    /// no integration branch yet.
    pub fn new(
        plan: Plan,
        results: Vec<WorkerResult>,
        conflicts: Option<ConflictMap>,
        started_at: SystemTime,
        duration: f64,
        interrupted: bool,
    ) -> RunReport {
        let totals = Totals::of(&results);
        RunReport {
            schema_version: REPORT_SCHEMA_VERSION,
            run_id: plan.run_id.clone(),
            started_at: rfc3339(started_at),
            finished_at: rfc3339(SystemTime::now()),
            duration,
            interrupted,
            exit_code: crate::exit::for_run(&totals, interrupted, plan.fail_on),
            plan,
            results,
            totals,
            conflicts,
            integration: None,
            sandbox_notice: None,
        }
    }

    /// A report from `results.json`'s bytes.
    pub fn parse(bytes: &[u8]) -> Result<RunReport, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// Write it to `path` as `results.json` is: pretty JSON with a trailing newline,
    /// signed, streamed (the report grows with the number of workers: it is never held
    /// whole in memory).
    pub fn save_signed(&self, path: &std::path::Path) -> std::io::Result<()> {
        crate::util::sign::write_signed_with(path, |w| {
            serde_json::to_writer_pretty(&mut *w, self)?;
            w.write_all(b"\n")
        })
    }
}

/// A run's `results.json`, when it has a readable one that fanout signed.
pub fn read_report(run_dir: &std::path::Path) -> Option<RunReport> {
    let bytes = crate::util::sign::read_signed(&run_dir.join("results.json")).ok()?;
    RunReport::parse(&bytes).ok()
}
