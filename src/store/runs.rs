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

/// The pid of a live fanout process still running this run, if any: the pid file's
/// process, when it is alive and — where the file says — started when it says, in this
/// boot (a pid reused after a crash or a reboot is not the run's).
pub fn live_pid(run_dir: &Path) -> Option<i32> {
    let text = read_capped_string(&run_dir.join(PID_FILE), 128).ok()?;
    let (pid, who) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
    let pid: i32 = pid.parse().ok()?;
    if pid <= 0 || pid == std::process::id() as i32 {
        return None;
    }
    if !who.is_empty() && crate::util::procfs::identity(pid).as_deref() != Some(who) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_file_names_a_live_run_only_with_the_start_and_boot_it_says() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let start = crate::util::procfs::stat(pid).unwrap().start;
        let boot = crate::util::procfs::boot_id().unwrap();
        let says = |text: String| {
            std::fs::write(dir.path().join(PID_FILE), text).unwrap();
            live_pid(dir.path())
        };
        assert_eq!(says(format!("{pid} {start} {boot}")), Some(pid));
        // Another process that got the pid after a crash, or one of another boot.
        assert_eq!(says(format!("{pid} {} {boot}", start + 1)), None);
        assert_eq!(says(format!("{pid} {start} another-boot")), None);
        // A pid file of an older fanout names the pid only.
        assert_eq!(says(pid.to_string()), Some(pid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(says(format!("{pid} {start} {boot}")), None);
    }
}
