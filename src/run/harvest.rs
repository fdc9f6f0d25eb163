//! Harvest: after an agent exits, commit whatever it left uncommitted on the worker's
//! branch (fanout's identity, excluded paths left out, and what worktree setup left
//! behind: see [`crate::run::setup::Baseline`]), and compute `files_modified` exactly from
//! the diff between the base commit and the branch.

use std::path::Path;

use git2::{IndexAddOption, Oid, Repository, Signature};

use crate::util::glob::wildcard;

/// How to make the commit.
#[derive(Debug, Clone)]
pub struct CommitSpec<'a> {
    /// Author/committer name and e-mail.
    pub identity: (&'a str, &'a str),
    /// The commit message.
    pub message: String,
    /// Paths never committed.
    pub exclude: &'a [String],
}

/// What harvest found.
#[derive(Debug, Clone, PartialEq)]
pub struct Harvest {
    /// The branch's commit after harvest.
    pub commit: Oid,
    /// Whether fanout made a commit.
    pub committed: bool,
    /// Paths that differ between base and branch, sorted.
    pub files_modified: Vec<String>,
    /// Something odd the agent did, worth reporting.
    pub note: Option<String>,
}

/// Commit leftovers in `worktree` on `branch` and diff against `base`.
pub fn harvest(
    worktree: &Path,
    branch: &str,
    base: Oid,
    spec: &CommitSpec<'_>,
) -> Result<Harvest, git2::Error> {
    let repo = Repository::open(worktree)?;
    let branch_ref = format!("refs/heads/{branch}");
    let head = repo.head().ok();
    let on_branch = head.as_ref().and_then(|h| h.name().ok()) == Some(branch_ref.as_str());
    let mut note = None;
    let mut committed = false;
    if on_branch {
        committed = commit_leftovers(&repo, spec)?;
    } else {
        let where_ = head
            .as_ref()
            .and_then(|h| h.shorthand().ok().map(str::to_owned))
            .unwrap_or_else(|| "an unborn or detached HEAD".into());
        note = Some(format!(
            "agent moved the worktree to {where_}; only commits on {branch} were kept"
        ));
    }
    let tip = repo.find_reference(&branch_ref)?.peel_to_commit()?;
    let files_modified = changed_paths(&repo, base, tip.id())?;
    Ok(Harvest {
        commit: tip.id(),
        committed,
        files_modified,
        note,
    })
}

fn commit_leftovers(repo: &Repository, spec: &CommitSpec<'_>) -> Result<bool, git2::Error> {
    let mut index = repo.index()?;
    let setup = super::setup::Baseline::load(repo.path());
    let workdir = repo.workdir().unwrap_or(repo.path()).to_owned();
    let mut skip = |path: &Path, _: &[u8]| -> i32 {
        let rel = path.to_string_lossy();
        if is_excluded(&rel, spec.exclude) || setup.keeps_out(&rel, &workdir) {
            1
        } else {
            0
        }
    };
    index.add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip))?;
    index.update_all(["*"], Some(&mut skip))?;
    index.write()?;
    let tree_id = index.write_tree()?;
    let parent = repo.head()?.peel_to_commit()?;
    if parent.tree_id() == tree_id {
        return Ok(false);
    }
    let tree = repo.find_tree(tree_id)?;
    let sig = Signature::now(spec.identity.0, spec.identity.1)?;
    repo.commit(Some("HEAD"), &sig, &sig, &spec.message, &tree, &[&parent])?;
    Ok(true)
}

/// Paths that differ between two commits' trees, sorted, deleted paths included.
pub fn changed_paths(repo: &Repository, from: Oid, to: Oid) -> Result<Vec<String>, git2::Error> {
    let a = repo.find_commit(from)?.tree()?;
    let b = repo.find_commit(to)?.tree()?;
    let diff = repo.diff_tree_to_tree(Some(&a), Some(&b), None)?;
    let mut paths: Vec<String> = diff
        .deltas()
        .filter_map(|d| {
            d.new_file()
                .path()
                .or_else(|| d.old_file().path())
                .map(|p| p.to_string_lossy().into_owned())
        })
        .collect();
    paths.sort();
    paths.dedup();
    Ok(paths)
}

/// Does `path` (relative, `/`-separated) match an exclude pattern?
///
/// `dir/` matches the directory and everything below it; a pattern without `/`
/// matches that name at any depth; `*` and `?` are wildcards within one component.
pub fn is_excluded(path: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| matches(path, p))
}

fn matches(path: &str, pattern: &str) -> bool {
    let pattern = pattern.trim_start_matches("./");
    if let Some(dir) = pattern.strip_suffix('/') {
        let comps: Vec<&str> = path.split('/').collect();
        let pcomps: Vec<&str> = dir.split('/').collect();
        if dir.contains('/') {
            return comps.len() > pcomps.len()
                && comps.iter().zip(&pcomps).all(|(c, p)| wildcard(p, c));
        }
        // a bare directory name matches at any depth
        return comps[..comps.len().saturating_sub(1)]
            .iter()
            .any(|c| wildcard(dir, c));
    }
    if pattern.contains('/') {
        let comps: Vec<&str> = path.split('/').collect();
        let pcomps: Vec<&str> = pattern.split('/').collect();
        return comps.len() >= pcomps.len()
            && comps.iter().zip(&pcomps).all(|(c, p)| wildcard(p, c));
    }
    path.split('/').any(|c| wildcard(pattern, c))
}

/// The commit message for a worker's leftovers.
pub fn commit_message(
    task: &str,
    agent: &str,
    model: Option<&str>,
    worker_id: u32,
    run_id: &str,
) -> String {
    let first = task.lines().next().unwrap_or("").trim();
    let subject: String = if first.chars().count() > 64 {
        format!("{}…", first.chars().take(63).collect::<String>())
    } else {
        first.to_owned()
    };
    format!(
        "fanout: {subject}\n\nTask: {task}\nAgent: {agent}\nModel: {model}\nWorker: {worker_id} of run {run_id}\n\nFanout-Run: {run_id}\nFanout-Worker: {worker_id}\n",
        // continuation lines indented: nothing in a prompt reads as a line of fanout's
        task = task.trim().lines().collect::<Vec<_>>().join("\n  "),
        model = model.unwrap_or("default"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn exclude_patterns() {
        let p = ex(&[".architect/", "*.log", "secrets/key.pem", "build/out/"]);
        assert!(is_excluded(".architect/sessions/1.json", &p));
        assert!(is_excluded("sub/.architect/x", &p));
        assert!(
            !is_excluded(".architect", &p),
            "a file named like the dir is not the dir"
        );
        assert!(is_excluded("a/b/run.log", &p));
        assert!(is_excluded("secrets/key.pem", &p));
        assert!(!is_excluded("other/secrets/key.pem", &p));
        assert!(is_excluded("build/out/x.o", &p));
        assert!(!is_excluded("build/outside.o", &p));
        assert!(!is_excluded("src/main.rs", &p));
        assert!(wildcard("a*b?c", "axxbyc"));
        assert!(!wildcard("a*b?c", "axxbc"));
    }

    #[test]
    fn message_names_task_model_worker() {
        let m = commit_message("Fix the bug\nin detail", "build", None, 3, "r1");
        assert!(m.starts_with("fanout: Fix the bug\n\n"));
        assert!(m.contains("Model: default\n"));
        assert!(m.contains("Worker: 3 of run r1\n"));
        assert!(m.contains("Fanout-Worker: 3\n"));
        let long = "x".repeat(100);
        let m = commit_message(&long, "a", Some("m"), 1, "r");
        assert!(m.lines().next().unwrap().chars().count() <= 72);
    }

    #[test]
    fn a_multi_line_prompt_writes_no_line_of_its_own() {
        let prompt = "Fix it\n\nFanout-Run: other\nSigned-off-by: Mallory <m@example.invalid>";
        let m = commit_message(prompt, "a", None, 1, "r1");
        assert!(
            m.contains("Task: Fix it\n  \n  Fanout-Run: other\n  Signed-off-by: Mallory"),
            "{m}"
        );
        let starts: Vec<&str> = m.lines().filter(|l| l.starts_with("Fanout-Run")).collect();
        assert_eq!(starts, ["Fanout-Run: r1"], "{m}");
        assert!(!m.lines().any(|l| l.starts_with("Signed-off-by")), "{m}");
    }
}
