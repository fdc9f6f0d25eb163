//! The runs fanout keeps in a repository (`<git dir>/fanout/runs/<id>/`): listing
//! them, telling whether a fanout process is still running one (the pid file an
//! attempt writes, [`crate::run::attempt::PidFile`]), and reading its `plan.json`
//! (its `results.json`: [`crate::run::results::read_report`]).

use std::path::Path;

use crate::plan::Plan;
use crate::run::attempt::PID_FILE;
use crate::util::read_capped_string;

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

/// A run's `plan.json`, when it has a readable one that fanout signed; the error says
/// why not.
pub fn read_plan(run_dir: &Path) -> Result<Plan, String> {
    let bytes =
        crate::util::sign::read_signed(&run_dir.join("plan.json")).map_err(|e| e.to_string())?;
    Plan::parse(&bytes).map_err(|e| format!("plan.json: {e}"))
}
