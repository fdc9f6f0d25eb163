//! What ties a worker's worktree to the user's repository, checked against what
//! fanout made before fanout runs git there (or lets the user's git run there) again:
//! the worktree's `.git` file (`gitdir: <admin dir>`) and its administrative
//! directory `.git/worktrees/<name>` — `commondir` (`../..`), `gitdir` (the worktree's
//! `.git`), and no `config`, `config.worktree` or `hooks` of its own.
//!
//! An agent may write all of these (the sandbox leaves the admin directory writable:
//! git keeps the worktree's HEAD and index there), and so may a process it left behind
//! after its harvest put them back: a `.git` or `commondir` pointing at a repository
//! the agent built (with `core.fsmonitor`, hooks, filters) would steer the next git
//! command there — fanout's, or the user's plain `git status` in a worktree `fanout
//! status` lists. So harvest ([`check_admin`]), and after it `status`, `cleanup` and
//! `resume` ([`secure`]), rewrite them from what fanout knows (the repository's own git
//! directory, the worktree's name and path in the signed journal, bounded to the shape
//! fanout gives them) before anything reads them. (`publish` runs git only in the
//! user's checkout, never in a worktree: it leaves them as they are.)
//! fanout's git commands run hardened besides ([`crate::git`]: no hooks, no fsmonitor,
//! no repository pointer from the environment), so a value planted between the check
//! and the command still runs nothing.

use std::path::Path;

use super::journal::JournalEntry;
use super::worktree::{admin_files, worktree_name};

/// The files that tie the worktree at `path` to the repository whose git directory is
/// `common` (admin directory `worktrees/<name>`), as [`super::worktree::create`] wrote
/// them ([`admin_files`]), put back if they differ (when `fix`; else only compared). Returns what was
/// found changed — each restored, a planted `config`, `config.worktree` or `hooks`
/// removed — or an error when a file could not be put back.
pub fn check_admin(
    common: &Path,
    name: &str,
    path: &Path,
    fix: bool,
) -> std::io::Result<Vec<String>> {
    let admin = common.join("worktrees").join(name);
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    let (admin_abs, path) = (real(&admin), real(path));
    let mut changed = Vec::new();
    for (file, want) in admin_files(&admin, &admin_abs, &path) {
        let same = std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file())
            && crate::util::read_regular(&file, 8192).is_ok_and(|b| b == want.as_bytes());
        if same {
            continue;
        }
        if fix {
            if std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_dir()) {
                std::fs::remove_dir_all(&file)?;
            }
            crate::util::write_atomic(&file, want.as_bytes())?;
        }
        let done = if fix { " (restored)" } else { " changed" };
        changed.push(format!("{}{done}", shown(&file, common, &path)));
    }
    for planted in ["config.worktree", "config", "hooks"].map(|n| admin.join(n)) {
        let Ok(meta) = std::fs::symlink_metadata(&planted) else {
            continue;
        };
        if fix {
            if meta.is_dir() {
                std::fs::remove_dir_all(&planted)?;
            } else {
                std::fs::remove_file(&planted)?;
            }
        }
        let done = if fix { " (removed)" } else { "" };
        changed.push(format!("{} planted{done}", shown(&planted, common, &path)));
    }
    Ok(changed)
}

/// `file` named as the user knows it: `.git/worktrees/<name>/…` or `<worktree>/.git`.
fn shown(file: &Path, common: &Path, worktree: &Path) -> String {
    if let Ok(rest) = file.strip_prefix(common) {
        return format!(".git/{}", rest.display());
    }
    file.strip_prefix(worktree).map_or_else(
        |_| file.display().to_string(),
        |r| format!("the worktree's {}", r.display()),
    )
}

/// Whether journal `entry` of run `run_id` names a worktree as fanout makes them: git
/// name `fanout-<run>-w<N>`, directory `…/<run>/w<N>` (a forged journal must not have
/// fanout write a `.git` file into another directory).
pub fn shaped_as_fanouts(run_id: &str, entry: &JournalEntry) -> bool {
    let folder = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    entry.worktree_name == worktree_name(run_id, entry.worker_id)
        && folder(&entry.worktree_path) == Some(format!("w{}", entry.worker_id))
        && entry.worktree_path.parent().and_then(folder).as_deref() == Some(run_id)
}

/// What [`secure`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Links {
    /// As fanout made them (or no worktree to tie).
    Intact,
    /// Changed since: each file, restored when asked.
    Changed(Vec<String>),
    /// Not checked, so not to be read: why.
    Unchecked(String),
    /// fanout was stopped while making it (the journal says so): nothing to tie yet and
    /// nothing to read; `resume` and `cleanup` remove it.
    Incomplete,
    /// Its administrative directory is gone — a removal cut short (git removes that
    /// first) — and the directory is left, its `.git` naming that administrative
    /// directory: fanout's, to look through for unsaved work and remove like any other.
    Orphaned,
}

/// Check (and with `fix`, restore) the git files of journal `entry`'s worktree, in the
/// repository whose git directory is `common` — only for a worktree fanout made (not
/// one it was stopped while making: [`Links::Incomplete`]), shaped as fanout names
/// them, whose directory and admin directory are real directories (not links).
pub fn secure(common: &Path, run_id: &str, entry: &JournalEntry, fix: bool) -> Links {
    let admin = common.join("worktrees").join(&entry.worktree_name);
    let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    if !entry.worktree_created || (!exists(&entry.worktree_path) && !exists(&admin)) {
        return Links::Intact;
    }
    if !shaped_as_fanouts(run_id, entry) {
        return Links::Unchecked("not named as fanout names its worktrees".into());
    }
    if entry.worktree_incomplete {
        return Links::Incomplete;
    }
    if !exists(&admin)
        && is_dir(&entry.worktree_path)
        && super::worktree::links_to(&entry.worktree_path, &admin)
    {
        return Links::Orphaned;
    }
    if !is_dir(&entry.worktree_path) || !is_dir(&admin) {
        return Links::Unchecked(format!(
            "{} or .git/worktrees/{} is not the directory fanout made",
            entry.worktree_path.display(),
            entry.worktree_name
        ));
    }
    match check_admin(common, &entry.worktree_name, &entry.worktree_path, fix) {
        Ok(c) if c.is_empty() => Links::Intact,
        Ok(c) => Links::Changed(c),
        Err(e) => Links::Unchecked(format!("its git files could not be restored: {e}")),
    }
}

/// What to tell the user about worker `entry`'s worktree, when anything.
pub fn said(run_id: &str, entry: &JournalEntry, links: &Links) -> Option<String> {
    let path = entry.worktree_path.display();
    match links {
        Links::Intact => None,
        Links::Changed(c) => Some(format!(
            "run {run_id}: worker {}'s worktree {path}: git files not as fanout made them: {}",
            entry.worker_id,
            c.join(", ")
        )),
        Links::Incomplete => Some(format!(
            "run {run_id}: worker {}'s worktree {path}: fanout was stopped while making it; `fanout resume` or `fanout cleanup` removes it",
            entry.worker_id
        )),
        Links::Orphaned => Some(format!(
            "run {run_id}: worker {}'s worktree {path}: its .git/worktrees/{} is gone (a removal cut short); `fanout cleanup` removes the rest",
            entry.worker_id, entry.worktree_name
        )),
        Links::Unchecked(why) => Some(format!(
            "run {run_id}: worker {}'s worktree {path}: {why}; fanout runs no git there",
            entry.worker_id
        )),
    }
}
