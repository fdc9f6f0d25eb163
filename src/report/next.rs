//! What to do after a run: the lines `fanout run` and `fanout demo` print under the
//! table — where the results and summary are, how to list the branches, see the
//! status, publish and clean up — and the log of each worker that did not succeed.

use std::fmt::Write;
use std::path::Path;

use crate::model::Status;
use crate::run::results::RunReport;

/// How to print the commands.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hints<'a> {
    /// The repository, when the commands must name it (`git -C DIR`, `fanout -C DIR`).
    pub dir: Option<&'a Path>,
    /// Whether to say how to publish (not after `--publish`, nor in the demo).
    pub publish: bool,
}

/// The lines to print after `report`'s table (its files are in `run_dir`).
pub fn next_steps(report: &RunReport, run_dir: &Path, hints: Hints<'_>) -> String {
    let at = |tool: &str| match hints.dir {
        Some(d) => format!("{tool} -C {}", d.display()),
        None => tool.to_owned(),
    };
    let id = &report.run_id;
    let mut out = String::new();
    let mut line = |label: &str, text: String| {
        let _ = writeln!(out, "{:<10} {text}", format!("{label}:"));
    };
    line(
        "results",
        run_dir.join("results.json").display().to_string(),
    );
    line("summary", run_dir.join("summary.md").display().to_string());
    if let Some(ns) = namespace(report) {
        line("branches", format!("{} branch --list '{ns}/*'", at("git")));
    }
    line("status", format!("{} status --run {id}", at("fanout")));
    if hints.publish && report.totals.success > 0 {
        line("publish", format!("{} publish --run {id}", at("fanout")));
    }
    line("clean up", format!("{} cleanup --run {id}", at("fanout")));
    for r in &report.results {
        if r.status == Status::Success {
            continue;
        }
        if let Some(log) = &r.log_path {
            let label = format!("worker {} {}", r.worker_id, r.status.as_str());
            line("log", format!("{} ({label})", log.display()));
        }
    }
    out
}

/// The run's branch namespace (`fanout/<run-id>`), from its plan.
fn namespace(report: &RunReport) -> Option<&str> {
    let first = report.plan.workers.first()?;
    first.branch.rsplit_once('/').map(|(ns, _)| ns)
}
