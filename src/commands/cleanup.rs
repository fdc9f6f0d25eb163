//! `fanout cleanup`: remove the worktrees and branches fanout created, as its run
//! journals record them, and nothing else.

use std::path::Path;

use crate::cli::CleanupArgs;
use crate::journal::Journal;
use crate::worktree;

use super::{CliError, Context, list_runs};

/// Entry point of `fanout cleanup`.
pub fn cleanup(ctx: &Context, args: &CleanupArgs) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let runs_dir = repo.runs_dir();
    let runs = if args.all {
        list_runs(&runs_dir)
    } else {
        for id in &args.runs {
            if !crate::plan::is_valid_run_id(id) || !runs_dir.join(id).is_dir() {
                return Err(CliError::Usage(format!(
                    "--run {id}: no such run in this repository (see `fanout status`)"
                )));
            }
        }
        args.runs.clone()
    };
    if runs.is_empty() {
        println!("nothing to clean up");
        return Ok(0);
    }
    let git = repo
        .open()
        .map_err(|e| CliError::Fatal(format!("git: {}", e.message())))?;
    let mut problems = 0;
    for id in runs {
        let run_dir = runs_dir.join(&id);
        if let Some(pid) = live_pid(&run_dir) {
            println!("run {id}: still running (pid {pid}); skipped");
            problems += 1;
            continue;
        }
        let journal = match Journal::load(&run_dir) {
            Ok(j) => j,
            Err(e) => {
                println!("run {id}: no readable journal ({e}); skipped");
                problems += 1;
                continue;
            }
        };
        let (mut trees, mut branches) = (0, 0);
        let mut kept = Vec::new();
        for entry in &journal.entries {
            let removed = worktree::remove(&git, entry, args.keep_branches);
            trees += usize::from(removed.worktree);
            branches += usize::from(removed.branch);
            kept.extend(removed.kept);
        }
        // The run's folder under the worktree root, if empty now.
        let _ = std::fs::remove_dir(journal.worktree_root.join(&id));
        if !args.keep_branches && kept.is_empty() {
            let _ = std::fs::remove_dir_all(&run_dir);
        }
        println!(
            "run {id}: removed {trees} worktree{}, {branches} branch{}",
            if trees == 1 { "" } else { "s" },
            if branches == 1 { "" } else { "es" }
        );
        for k in &kept {
            println!("  kept: {k}");
        }
        problems += kept.len();
    }
    Ok(if problems == 0 { 0 } else { 1 })
}

/// The pid of a live fanout process still running this run, if any.
pub fn live_pid(run_dir: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(run_dir.join(super::run::PID_FILE)).ok()?;
    let pid: i32 = text.trim().parse().ok()?;
    if pid <= 0 || pid == std::process::id() as i32 {
        return None;
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
        .is_ok()
        .then_some(pid)
}
