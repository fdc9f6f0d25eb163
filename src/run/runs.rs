//! The runs fanout keeps in a repository (`<git dir>/fanout/runs/<id>/`): listing
//! them, telling whether a fanout process is still running one (its pid file), and
//! reading what a run left (`plan.json`, `results.json`).

use std::path::{Path, PathBuf};

use super::results::RunReport;
use crate::plan::Plan;
use crate::util::read_capped_string;

/// Marker file holding the pid of the fanout process running a run.
pub const PID_FILE: &str = "fanout.pid";

/// Run ids present in `runs_dir`, oldest first.
pub fn list_runs(runs_dir: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(runs_dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| crate::plan::is_valid_run_id(n))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// The newest run in `runs_dir` that has a `results.json`.
pub fn newest_with_results(runs_dir: &Path) -> Option<String> {
    list_runs(runs_dir)
        .into_iter()
        .rev()
        .find(|id| runs_dir.join(id).join("results.json").is_file())
}

/// The pid file of the fanout process running a run: written when an attempt starts,
/// removed once its report is written. One left behind by a dead process means that
/// fanout died mid-run.
#[derive(Debug)]
pub struct PidFile(PathBuf);

impl PidFile {
    /// Write this process's pid into `run_dir`.
    pub fn create(run_dir: &Path) -> PidFile {
        let path = run_dir.join(PID_FILE);
        let _ = std::fs::write(&path, std::process::id().to_string());
        PidFile(path)
    }

    /// The run is done: remove the file.
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The pid of a live fanout process still running this run, if any.
pub fn live_pid(run_dir: &Path) -> Option<i32> {
    let text = read_capped_string(&run_dir.join(PID_FILE), 64).ok()?;
    let pid: i32 = text.trim().parse().ok()?;
    if pid <= 0 || pid == std::process::id() as i32 {
        return None;
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
        .is_ok()
        .then_some(pid)
}

/// A run's `results.json`, when it has a readable one that fanout signed.
pub fn read_report(run_dir: &Path) -> Option<RunReport> {
    let bytes = crate::util::sign::read_signed(&run_dir.join("results.json")).ok()?;
    RunReport::parse(&bytes).ok()
}

/// A run's `plan.json`, when it has a readable one that fanout signed.
pub fn read_plan(run_dir: &Path) -> Option<Plan> {
    let bytes = crate::util::sign::read_signed(&run_dir.join("plan.json")).ok()?;
    Plan::parse(&bytes).ok()
}
