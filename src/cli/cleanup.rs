//! `fanout cleanup`: remove the worktrees and branches fanout created, as its run
//! journals record them, and nothing else.

use std::path::Path;
use std::time::{Duration, SystemTime};

use clap::Args;

use super::common::{CliError, Context, list_runs};
use crate::run::journal::Journal;
use crate::run::worktree;

/// `fanout cleanup`.
#[derive(Debug, Args, Clone)]
pub struct CleanupArgs {
    /// The run to clean up (repeatable).
    #[arg(
        long = "run",
        value_name = "ID",
        required_unless_present_any = ["all", "older_than", "keep"]
    )]
    pub runs: Vec<String>,

    /// Every run fanout has made in this repository.
    #[arg(long, conflicts_with_all = ["runs", "older_than", "keep"])]
    pub all: bool,

    /// Only runs started longer ago than this (`90s`, `30m`, `6h`, `2d`).
    #[arg(long, value_name = "AGE", value_parser = parse_age, conflicts_with = "runs")]
    pub older_than: Option<std::time::Duration>,

    /// Keep the N most recent runs; sweep the older ones (with --older-than: only
    /// those also older than AGE).
    #[arg(long, value_name = "N", conflicts_with = "runs")]
    pub keep: Option<usize>,

    /// Keep the branches (and the run's records); remove only worktrees.
    #[arg(long)]
    pub keep_branches: bool,
}

/// An age like `90s`, `30m`, `6h`, `2d` (a bare number is seconds).
pub fn parse_age(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected an age like 90s, 30m, 6h or 2d"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        "w" => n * 7.0 * 86400.0,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (use s, m, h, d or w)"
            ));
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{s:?}: expected a positive age"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
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
            println!("no run matches; nothing to clean up");
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
        // The integration branch, when fanout made one (only inside the run's namespace).
        if !args.keep_branches {
            for b in &journal.extra_branches {
                if !b.contains(&format!("/{id}/")) {
                    kept.push(format!("branch {b}: not in this run's namespace"));
                    continue;
                }
                match git.find_branch(b, git2::BranchType::Local) {
                    Ok(br) if br.is_head() => kept.push(format!("branch {b}: checked out")),
                    Ok(mut br) => {
                        if br.delete().is_ok() {
                            branches += 1;
                        } else {
                            kept.push(format!("branch {b}: could not delete"));
                        }
                    }
                    Err(_) => {}
                }
            }
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

/// When a run started: its journal's `created_at`, else its folder's modification time.
fn started(run_dir: &Path) -> Option<SystemTime> {
    Journal::load(run_dir)
        .ok()
        .and_then(|j| {
            time::OffsetDateTime::parse(
                &j.created_at,
                &time::format_description::well_known::Rfc3339,
            )
            .ok()
        })
        .map(SystemTime::from)
        .or_else(|| std::fs::metadata(run_dir).and_then(|m| m.modified()).ok())
}

/// The runs `--older-than` / `--keep` select, oldest first: not among the `keep` most
/// recent, and started more than `older_than` before `now`.
fn sweep(
    runs_dir: &Path,
    older_than: Option<Duration>,
    keep: Option<usize>,
    now: SystemTime,
) -> Vec<String> {
    let mut runs: Vec<(SystemTime, String)> = list_runs(runs_dir)
        .into_iter()
        .map(|id| {
            (
                started(&runs_dir.join(&id)).unwrap_or(SystemTime::UNIX_EPOCH),
                id,
            )
        })
        .collect();
    // Newest first, ties by id, so `keep` keeps the most recent.
    runs.sort_by(|a, b| b.cmp(a));
    let mut picked: Vec<(SystemTime, String)> = runs
        .into_iter()
        .skip(keep.unwrap_or(0))
        .filter(|(t, _)| older_than.is_none_or(|age| now.duration_since(*t).is_ok_and(|d| d > age)))
        .collect();
    picked.reverse();
    picked.into_iter().map(|(_, id)| id).collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::journal::Journal;

    fn run(dir: &Path, id: &str, created_at: &str) {
        let j = Journal {
            schema_version: 1,
            extra_branches: Vec::new(),
            run_id: id.into(),
            created_at: created_at.into(),
            repo_workdir: dir.into(),
            worktree_root: dir.into(),
            entries: Vec::new(),
        };
        let d = dir.join(id);
        std::fs::create_dir_all(&d).unwrap();
        j.save(&d).unwrap();
    }

    #[test]
    fn sweep_selects_by_age_and_keeps_the_newest() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        run(d, "20261120-100000-aaaaaa", "2026-11-20T10:00:00Z");
        run(d, "20261122-100000-bbbbbb", "2026-11-22T10:00:00Z");
        run(d, "custom-id", "2026-11-23T09:00:00Z");
        run(d, "20261123-100000-cccccc", "2026-11-23T10:00:00Z");
        let now = SystemTime::from(time::macros::datetime!(2026-11-23 12:00 UTC));
        let h = |n: u64| Some(Duration::from_secs(n * 3600));
        assert_eq!(
            sweep(d, h(6), None, now),
            ["20261120-100000-aaaaaa", "20261122-100000-bbbbbb"]
        );
        // Ordered by start time, not by id: the custom id is the second newest.
        assert_eq!(
            sweep(d, None, Some(2), now),
            ["20261120-100000-aaaaaa", "20261122-100000-bbbbbb"]
        );
        assert_eq!(sweep(d, None, Some(1), now).len(), 3);
        assert_eq!(sweep(d, h(48), Some(1), now), ["20261120-100000-aaaaaa"]);
        assert!(sweep(d, h(100), None, now).is_empty());
        assert!(sweep(d, None, Some(10), now).is_empty());
    }

    #[test]
    fn ages_parse_with_units() {
        assert_eq!(parse_age("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_age("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_age("6h").unwrap(), Duration::from_secs(21600));
        assert_eq!(parse_age("2d").unwrap(), Duration::from_secs(172800));
        assert_eq!(parse_age("45").unwrap(), Duration::from_secs(45));
        assert!(parse_age("6 hours").unwrap_err().contains("unknown unit"));
        assert!(parse_age("h").is_err());
    }
}
