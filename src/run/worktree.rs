//! Worktrees: one git worktree per worker, outside the user's checkout, its HEAD
//! detached at the base commit. The worker's branch is not made here: harvest makes
//! it, at the commit the worker ended on ([`super::harvest`]), so that nothing a
//! worker runs ever needs to write a ref of the shared repository — with the sandbox,
//! none can. Each worktree has a private object directory in its administrative
//! directory (`.git/worktrees/<name>/objects`, the *quarantine*): the worker's git
//! writes its objects there (`GIT_OBJECT_DIRECTORY`, with the shared store as an
//! alternate), and harvest copies what its result needs into the shared store.
//! Creation is all-or-nothing, and removal only ever touches what the run journal says
//! fanout created.

use std::path::{Path, PathBuf};

use git2::{BranchType, Oid, Repository, WorktreePruneOptions};

use crate::run::journal::JournalEntry;

/// git's name for a worker's worktree (`.git/worktrees/<name>`).
pub fn worktree_name(run_id: &str, worker_id: u32) -> String {
    format!("fanout-{run_id}-w{worker_id}")
}

/// A worker's worktree directory under `root`.
pub fn worktree_path(root: &Path, run_id: &str, worker_id: u32) -> PathBuf {
    root.join(run_id).join(format!("w{worker_id}"))
}

/// Errors making a worktree.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// The branch already exists: fanout never takes over a branch.
    #[error("branch {0} already exists; fanout does not reuse branches")]
    BranchExists(String),
    /// The directory is already there.
    #[error("{0}: already exists")]
    PathExists(PathBuf),
    /// File-system failure.
    #[error("{path}: {source}")]
    Io {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// git failure.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// What was made, for the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// The branch was created.
    pub branch: bool,
    /// The worktree was created.
    pub worktree: bool,
}

/// Where a worktree's objects go until harvest (see the module docs).
pub fn quarantine(admin: &Path) -> PathBuf {
    admin.join("objects")
}

/// Create a worktree at `path` with its HEAD detached at `base`, in the repository at
/// `repo_dir`, for a worker whose branch `branch` harvest will make (it must not
/// exist yet). On failure nothing remains.
///
/// libgit2's `git_worktree_add` is not safe to run concurrently in one repository
/// (it races on `<git dir>/worktrees` and on its "already checked out" check), so the
/// worktree's administrative files are written here, in git's documented layout
/// (gitrepository-layout(5): `worktrees/<name>/{gitdir,commondir,HEAD}` and a `.git`
/// file in the worktree), guarded by a `locked` file while it is being made, exactly as
/// `git worktree add` does; the checkout itself is git2's. Workers can then make their
/// worktrees in parallel.
pub fn create(
    repo_dir: &Path,
    name: &str,
    path: &Path,
    branch: &str,
    base: Oid,
) -> Result<(), WorktreeError> {
    let repo = Repository::open(repo_dir)?;
    if repo.find_branch(branch, BranchType::Local).is_ok() {
        return Err(WorktreeError::BranchExists(branch.to_owned()));
    }
    if path.exists() {
        return Err(WorktreeError::PathExists(path.to_owned()));
    }
    let admin = repo.commondir().join("worktrees").join(name);
    if admin.exists() {
        return Err(WorktreeError::PathExists(admin));
    }
    let commit = repo.find_commit(base)?;
    let filters = filters_may_apply(&repo, &commit.tree()?);
    match add_worktree(&admin, path, base, filters) {
        Ok(()) => Ok(()),
        Err(e) => {
            // Undo: no half-made worktree.
            let _ = std::fs::remove_dir_all(&admin);
            let _ = std::fs::remove_dir_all(path);
            Err(e)
        }
    }
}

/// Whether checkout filters (`.gitattributes`: text/eol conversion, `ident`, LFS and
/// other drivers; `core.autocrlf`) could change any file of `tree`. When none can,
/// the checkout skips loading them: libgit2 otherwise looks attributes up for every
/// file, resolving each directory with `realpath` — most of a checkout's system
/// calls. Conservative: any attributes source at all means filters stay on.
pub fn filters_may_apply(repo: &Repository, tree: &git2::Tree<'_>) -> bool {
    let mut in_tree = false;
    let _ = tree.walk(git2::TreeWalkMode::PreOrder, |_, entry| {
        if entry.name_bytes() == b".gitattributes" {
            in_tree = true;
            git2::TreeWalkResult::Abort
        } else {
            git2::TreeWalkResult::Ok
        }
    });
    if in_tree || repo.commondir().join("info/attributes").exists() {
        return true;
    }
    let Ok(cfg) = repo.config() else { return true };
    if cfg.get_entry("core.attributesFile").is_ok() || cfg.get_entry("core.eol").is_ok() {
        return true;
    }
    if let Ok(v) = cfg.get_string("core.autocrlf")
        && !matches!(
            v.to_ascii_lowercase().as_str(),
            "false" | "no" | "off" | "0" | ""
        )
    {
        return true;
    }
    global_attributes_exist()
}

/// Whether the default global or system attribute files exist.
fn global_attributes_exist() -> bool {
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
    if xdg.is_some_and(|d| d.join("git/attributes").exists()) {
        return true;
    }
    [
        "/etc/gitattributes",
        "/usr/local/etc/gitattributes",
        "/opt/homebrew/etc/gitattributes",
    ]
    .iter()
    .any(|p| Path::new(p).exists())
}

fn add_worktree(admin: &Path, path: &Path, base: Oid, filters: bool) -> Result<(), WorktreeError> {
    let io = |p: &Path| {
        let p = p.to_owned();
        move |source| WorktreeError::Io { path: p, source }
    };
    std::fs::create_dir_all(admin.parent().expect("admin dir has a parent")).map_err(io(admin))?;
    // `create_dir` (not `_all`) fails if another process claimed the name first.
    std::fs::create_dir(admin).map_err(io(admin))?;
    std::fs::write(admin.join("locked"), "initializing\n").map_err(io(admin))?;
    std::fs::create_dir_all(path).map_err(io(path))?;
    let path = std::fs::canonicalize(path).map_err(io(path))?;
    let admin_abs = std::fs::canonicalize(admin).map_err(io(admin))?;
    let dotgit = path.join(".git");
    std::fs::write(admin.join("commondir"), "../..\n").map_err(io(admin))?;
    std::fs::write(admin.join("gitdir"), format!("{}\n", dotgit.display())).map_err(io(admin))?;
    std::fs::write(admin.join("HEAD"), format!("{base}\n")).map_err(io(admin))?;
    std::fs::create_dir(quarantine(admin)).map_err(io(admin))?;
    std::fs::write(&dotgit, format!("gitdir: {}\n", admin_abs.display())).map_err(io(&dotgit))?;
    let wt = Repository::open(&path)?;
    let mut co = git2::build::CheckoutBuilder::new();
    co.force();
    co.disable_filters(!filters);
    wt.checkout_head(Some(&mut co))?;
    std::fs::remove_file(admin.join("locked")).map_err(io(admin))?;
    Ok(())
}

/// What [`remove`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed {
    /// The worktree directory and its git metadata were removed.
    pub worktree: bool,
    /// The branch was deleted.
    pub branch: bool,
    /// Things left alone, and why.
    pub kept: Vec<String>,
}

/// Remove what `entry` says fanout created. A worktree is only removed when git's
/// record of it points at the journal's path; a branch only when it was created by
/// fanout and is not checked out anywhere.
pub fn remove(repo: &Repository, entry: &JournalEntry, keep_branch: bool) -> Removed {
    let mut out = Removed::default();
    if entry.worktree_created {
        match repo.find_worktree(&entry.worktree_name) {
            Ok(wt) => {
                let ours = same_path(wt.path(), &entry.worktree_path);
                if !ours {
                    out.kept.push(format!(
                        "worktree {} points at {}, not {}: left alone",
                        entry.worktree_name,
                        wt.path().display(),
                        entry.worktree_path.display()
                    ));
                } else {
                    let mut opts = WorktreePruneOptions::new();
                    opts.valid(true).locked(false).working_tree(true);
                    match wt.prune(Some(&mut opts)) {
                        Ok(()) => out.worktree = true,
                        Err(e) => out.kept.push(format!(
                            "worktree {}: {}",
                            entry.worktree_path.display(),
                            e.message()
                        )),
                    }
                }
            }
            Err(_) => {
                // git no longer knows it; remove a leftover directory only if it is
                // exactly the one we made and looks like a worktree (has a .git file).
                let dotgit = entry.worktree_path.join(".git");
                if dotgit.is_file() {
                    if std::fs::remove_dir_all(&entry.worktree_path).is_ok() {
                        out.worktree = true;
                    }
                } else if entry.worktree_path.exists() {
                    out.kept.push(format!(
                        "{}: not a worktree git knows: left alone",
                        entry.worktree_path.display()
                    ));
                }
            }
        }
        // Remove the now-empty run folder, never anything with content.
        if let Some(parent) = entry.worktree_path.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
    if entry.branch_created
        && !keep_branch
        && let Ok(mut b) = repo.find_branch(&entry.branch, BranchType::Local)
    {
        if b.is_head() {
            out.kept
                .push(format!("branch {}: checked out: kept", entry.branch));
        } else {
            match b.delete() {
                Ok(()) => out.branch = true,
                Err(e) => out
                    .kept
                    .push(format!("branch {}: {}", entry.branch, e.message())),
            }
        }
    }
    out
}

fn same_path(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    let trim = |p: PathBuf| PathBuf::from(p.to_string_lossy().trim_end_matches('/').to_owned());
    trim(canon(a)) == trim(canon(b))
}

/// Disk use of a directory tree in bytes (symlinks not followed).
pub fn disk_usage(path: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_owned()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else {
            total += meta.len();
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with(files: &[(&str, &[u8])]) -> (tempfile::TempDir, Repository, Oid) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let mut index = repo.index().unwrap();
        for (path, body) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, body).unwrap();
            index.add_path(Path::new(path)).unwrap();
        }
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        let oid = repo
            .commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
            .unwrap();
        drop(tree);
        (dir, repo, oid)
    }

    fn tree_of(repo: &Repository, oid: Oid) -> git2::Tree<'_> {
        repo.find_commit(oid).unwrap().tree().unwrap()
    }

    #[test]
    fn filters_are_skipped_only_when_no_attributes_can_apply() {
        // (A machine-wide attributes file keeps filters on everywhere.)
        let none = global_attributes_exist();
        let (_d, repo, oid) = repo_with(&[("a.txt", b"a\n"), ("src/b.txt", b"b\n")]);
        assert_eq!(filters_may_apply(&repo, &tree_of(&repo, oid)), none);

        let (_d, repo, oid) =
            repo_with(&[("a.txt", b"a\n"), ("deep/er/.gitattributes", b"* text\n")]);
        assert!(filters_may_apply(&repo, &tree_of(&repo, oid)));

        let (_d, repo, oid) = repo_with(&[("a.txt", b"a\n")]);
        repo.config()
            .unwrap()
            .set_str("core.autocrlf", "true")
            .unwrap();
        assert!(filters_may_apply(&repo, &tree_of(&repo, oid)));
        repo.config()
            .unwrap()
            .set_str("core.autocrlf", "false")
            .unwrap();
        assert!(!filters_may_apply(&repo, &tree_of(&repo, oid)));

        std::fs::create_dir_all(repo.commondir().join("info")).unwrap();
        std::fs::write(repo.commondir().join("info/attributes"), "*.txt ident\n").unwrap();
        assert!(filters_may_apply(&repo, &tree_of(&repo, oid)));
    }

    #[test]
    fn a_worktree_checkout_still_applies_the_repositorys_filters() {
        let (d, _repo, oid) = repo_with(&[
            (".gitattributes", b"*.txt text eol=crlf\n"),
            ("a.txt", b"one\ntwo\n"),
            ("b.bin", b"one\ntwo\n"),
        ]);
        let path = d.path().join("wt");
        create(d.path(), "w1", &path, "fanout/t/w1", oid).unwrap();
        assert_eq!(
            std::fs::read(path.join("a.txt")).unwrap(),
            b"one\r\ntwo\r\n"
        );
        assert_eq!(std::fs::read(path.join("b.bin")).unwrap(), b"one\ntwo\n");

        let (d, _repo, oid) = repo_with(&[("a.txt", b"one\ntwo\n")]);
        let path = d.path().join("wt");
        create(d.path(), "w1", &path, "fanout/t/w1", oid).unwrap();
        assert_eq!(std::fs::read(path.join("a.txt")).unwrap(), b"one\ntwo\n");
        // The new worktree is clean: the index matches what was written.
        let wt = Repository::open(&path).unwrap();
        assert!(wt.statuses(None).unwrap().is_empty());
    }
}
