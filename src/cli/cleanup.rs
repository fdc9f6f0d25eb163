//! `fanout cleanup`: remove the worktrees and branches fanout created, as its run
//! journals record them, and nothing else ([`crate::store::cleanup`]).

use std::time::SystemTime;

use clap::Args;

use super::common::{CliError, Context};
use crate::store::cleanup::{Cleaned, How, clean, sweep};
use crate::store::runs::list_runs;
use crate::util::out::outln;

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # Remove one run's worktrees and branches
  fanout cleanup --run 20260101-120000-3fa2c1
  # Runs older than a week, keeping the five newest
  fanout cleanup --older-than 7d --keep 5
  # Also worktrees with uncommitted work (committed on their branch first)
  fanout cleanup --run 20260101-120000-3fa2c1 --force";

/// `fanout cleanup`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
#[command(group(
    clap::ArgGroup::new("which")
        .required(true)
        .multiple(true)
        .args(["runs", "all", "older_than", "keep"])
))]
pub struct CleanupArgs {
    /// The run to clean up (repeatable).
    #[arg(long = "run", value_name = "ID")]
    pub runs: Vec<String>,

    /// Every run fanout has made in this repository.
    #[arg(long, conflicts_with_all = ["runs", "older_than", "keep"])]
    pub all: bool,

    /// Only runs started longer ago than this (`90s`, `30m`, `6h`, `2d`, `1h30m`;
    /// the unit is required).
    #[arg(long, value_name = "AGE", value_parser = parse_age, conflicts_with = "runs")]
    pub older_than: Option<std::time::Duration>,

    /// Keep the N most recent runs; sweep the older ones (with --older-than: only
    /// those also older than AGE).
    #[arg(long, value_name = "N", conflicts_with = "runs")]
    pub keep: Option<usize>,

    /// Keep the branches (and the run's records); remove only worktrees.
    #[arg(long)]
    pub keep_branches: bool,

    /// Remove worktrees holding uncommitted work too, after committing that work on
    /// the worker's branch (a WIP commit; the branch is kept). Without it, such a
    /// worktree is kept and listed (exit 1).
    #[arg(long)]
    pub force: bool,

    /// Delete this branch although it holds a WIP commit fanout saved (by `--force`);
    /// without it such a branch is kept and listed. Repeatable.
    #[arg(long, value_name = "BRANCH")]
    pub delete_kept: Vec<String>,

    /// Of a run whose fanout was killed, also stop the processes still running beneath
    /// its own that fanout cannot prove it started (without it they are listed and
    /// nothing of that run is stopped or removed).
    #[arg(long)]
    pub yes: bool,
}

/// An age: a duration with its unit (`90s`, `30m`, `6h`, `2d`, `1h30m`); a bare
/// number is refused (`--older-than 10` once meant ten seconds and swept every run).
pub fn parse_age(s: &str) -> Result<std::time::Duration, String> {
    crate::util::duration::parse(s, crate::util::duration::Bare::Refused)
}

/// Entry point of `fanout cleanup`.
pub fn cleanup(ctx: &Context, args: &CleanupArgs) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let runs_dir = repo.runs_dir();
    let runs = if args.all {
        list_runs(&runs_dir)
    } else if args.older_than.is_some() || args.keep.is_some() {
        let picked = sweep(&runs_dir, args.older_than, args.keep, SystemTime::now());
        if picked.is_empty() {
            outln!("no run matches; nothing to clean up");
            return Ok(0);
        }
        picked
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
        outln!("nothing to clean up");
        return Ok(0);
    }
    let git = repo
        .open()
        .map_err(|e| CliError::Fatal(format!("git: {}", e.message())))?;
    let how = How {
        keep_branches: args.keep_branches,
        force: args.force,
        delete_kept: args.delete_kept.clone(),
        stop_unproven: args.yes,
    };
    let mut problems = 0;
    for id in runs {
        match clean(&git, &runs_dir, &id, &how) {
            Cleaned::Running(pid) => {
                outln!("run {id}: still running (pid {pid}); skipped");
                problems += 1;
            }
            Cleaned::NoJournal(e) => {
                outln!("run {id}: no readable journal ({e}); skipped");
                problems += 1;
            }
            Cleaned::Done {
                trees,
                branches,
                kept,
            } => {
                outln!(
                    "run {id}: removed {trees} worktree{}, {branches} branch{}",
                    if trees == 1 { "" } else { "s" },
                    if branches == 1 { "" } else { "es" }
                );
                for k in &kept {
                    outln!("  kept: {k}");
                }
                problems += kept.len();
            }
        }
    }
    if args.all {
        remove_empty_roots(&repo);
    }
    Ok(if problems == 0 { 0 } else { 1 })
}

/// After `--all`: the repository's worktree folder (`<repo>-<hash>` under fanout's
/// data directory) when nothing is left in it.
fn remove_empty_roots(repo: &crate::repo::UserRepo) {
    let root = repo.default_worktree_root();
    let _ = std::fs::remove_dir(&root);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn ages_need_a_unit() {
        assert_eq!(parse_age("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_age("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_age("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_age("2d").unwrap(), Duration::from_secs(172800));
        assert!(parse_age("45").unwrap_err().contains("has no unit"));
        assert!(parse_age("h").is_err());
    }
}
