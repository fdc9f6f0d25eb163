//! `fanout status`: runs, their workers, worktree paths, git status and disk use
//! ([`crate::store::status`]).

use clap::Args;

use super::common::{CliError, Context};
use crate::store::runs::list_runs;
use crate::util::human_bytes;
use crate::util::out::outln;

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # Every run: workers, worktrees, git state, disk use
  fanout status
  # One run, as JSON
  fanout status --run 20260101-120000-3fa2c1 --json";

/// `fanout status`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
pub struct StatusArgs {
    /// Only this run.
    #[arg(long = "run", value_name = "ID")]
    pub run: Option<String>,

    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Entry point of `fanout status`.
pub fn status(ctx: &Context, args: &StatusArgs) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let runs_dir = repo.runs_dir();
    let mut ids = list_runs(&runs_dir);
    if let Some(only) = &args.run {
        if !ids.contains(only) {
            return Err(CliError::Usage(format!("--run {only}: no such run")));
        }
        ids = vec![only.clone()];
    }
    let git = repo
        .open()
        .map_err(|e| CliError::Fatal(format!("git: {}", e.message())))?;
    let runs = crate::store::status::runs(&git, &runs_dir, ids);
    if args.json {
        crate::util::out::stdout_json(&runs);
        return Ok(0);
    }
    if runs.is_empty() {
        outln!("no fanout runs in {}", repo.workdir.display());
        return Ok(0);
    }
    for r in &runs {
        let resumable = if r.unfinished > 0 {
            format!(
                "  ({} unfinished: fanout resume {})",
                r.unfinished, r.run_id
            )
        } else {
            String::new()
        };
        outln!(
            "run {}  {}  {}  {} workers  {}{resumable}",
            r.run_id,
            r.created_at,
            r.state,
            r.workers.len(),
            human_bytes(r.disk_bytes)
        );
        outln!(
            "  {:<4} {:<8} {:<12} {:>10}  BRANCH\n        WORKTREE",
            "#",
            "STATUS",
            "GIT",
            "DISK"
        );
        for w in &r.workers {
            let queued = w.status.as_deref() == Some("queued");
            let git_state = match (w.worktree_exists, w.uncommitted) {
                (false, _) if queued => "not started".to_owned(),
                _ if w.status.as_deref() == Some("checkout") => "checking out".to_owned(),
                (false, _) => "no worktree".to_owned(),
                (true, Some(0)) => "clean".to_owned(),
                (true, Some(n)) => format!("{n} uncommitted"),
                (true, None) => "unreadable".to_owned(),
            };
            outln!(
                "  #{:<3} {:<8} {:<12} {:>10}  {}{}\n        {}",
                w.worker_id,
                w.status.as_deref().unwrap_or("-"),
                git_state,
                human_bytes(w.disk_bytes),
                w.branch,
                if w.branch_exists || queued {
                    ""
                } else {
                    " (deleted)"
                },
                w.worktree_path
            );
        }
    }
    Ok(0)
}
