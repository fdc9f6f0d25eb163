//! Worktrees: one git worktree per worker, outside the user's checkout, its HEAD
//! detached at the base commit. The worker's branch is not made here: harvest makes
//! it, at the commit the worker ended on ([`super::harvest`]), so that nothing a
//! worker runs ever needs to write a ref of the shared repository — with the sandbox,
//! none can. Each worktree has a private object directory in its administrative
//! directory (`.git/worktrees/<name>/objects`, the *quarantine*): the worker's git
//! writes its objects there (`GIT_OBJECT_DIRECTORY`, with the shared store as an
//! alternate), and harvest copies what its result needs into the shared store.
//! Creation is all-or-nothing — and when fanout is killed midway, the run journal
//! (which names the worktree before it is made) says it is incomplete, and removal
//! takes what is left — and removal only ever touches what the run journal says
//! fanout created.

use std::path::{Path, PathBuf};

use git2::{BranchType, Oid, Repository, WorktreePruneOptions};

use crate::git::{Git, GitError, Listed, TrustedConfig};
use crate::run::journal::JournalEntry;

/// git's name for a worker's worktree (`.git/worktrees/<name>`).
pub fn worktree_name(run_id: &str, worker_id: u32) -> String {
    format!("{}{worker_id}", name_prefix(run_id))
}

/// How the names of run `run_id`'s worktrees begin.
pub fn name_prefix(run_id: &str) -> String {
    format!("fanout-{run_id}-w")
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
    #[error("git: {}", .0.message())]
    Git(#[from] git2::Error),
    /// The checkout failed.
    #[error("checkout: {0}")]
    Checkout(GitError),
}

/// Where a worktree's objects go until harvest (see the module docs).
pub fn quarantine(admin: &Path) -> PathBuf {
    admin.join("objects")
}

/// The configuration a worktree checkout runs git with.
#[derive(Debug, Clone, Copy)]
pub struct CheckoutConfig<'a> {
    /// The filter drivers it runs (read when the run started).
    pub trusted: &'a TrustedConfig,
    /// The repository's configuration as listed when the run started, while nothing
    /// of the run has run since (else git lists it again; see [`Listed`]).
    pub listed: Option<&'a Listed>,
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
/// `git worktree add` does. Workers can then make their worktrees in parallel.
///
/// The checkout is git's own (`git read-tree --reset -u HEAD` in the new worktree:
/// what `git worktree add` does with `git reset --hard`, less the `ORIG_HEAD` and the
/// second pass over the index a reset makes, about half a millisecond of a small
/// repository's checkout), through the hardened [`Git`] helper: no hooks, no fsmonitor,
/// none of the repository's filter drivers but those in `config.trusted` (read when
/// the run started, so the user's Git LFS runs and a filter an agent configured since
/// does not). git checks out faster than libgit2 and in less memory, and runs the user's
/// filters, which libgit2 cannot.
pub fn create(
    repo_dir: &Path,
    name: &str,
    path: &Path,
    branch: &str,
    base: Oid,
    config: CheckoutConfig<'_>,
) -> Result<(), WorktreeError> {
    let admin = claimable(repo_dir, name, path, branch, base)?;
    add_worktree(&admin, path, base, config).inspect_err(|_| {
        // Undo: no half-made worktree.
        let _ = std::fs::remove_dir_all(&admin);
        let _ = std::fs::remove_dir_all(path);
    })
}

/// The administrative directory a worktree `name` at `path` would get, when neither
/// exists yet, the branch does not, and `base` is a commit.
fn claimable(
    repo_dir: &Path,
    name: &str,
    path: &Path,
    branch: &str,
    base: Oid,
) -> Result<PathBuf, WorktreeError> {
    let repo = git2::Repository::open(repo_dir)?;
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
    repo.find_commit(base)?;
    Ok(admin)
}

fn add_worktree(
    admin: &Path,
    path: &Path,
    base: Oid,
    config: CheckoutConfig<'_>,
) -> Result<(), WorktreeError> {
    let admin_abs = write_admin(admin, path, base)?;
    checkout(&admin_abs.0, &admin_abs.1, config)?;
    std::fs::remove_file(admin.join("locked")).map_err(|source| WorktreeError::Io {
        path: admin.to_owned(),
        source,
    })
}

/// Write the administrative files of a worktree at `path` (HEAD detached at `base`),
/// locked while it is being made: the real paths of the administrative directory and
/// the worktree.
fn write_admin(admin: &Path, path: &Path, base: Oid) -> Result<(PathBuf, PathBuf), WorktreeError> {
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
    std::fs::write(admin.join("HEAD"), format!("{base}\n")).map_err(io(admin))?;
    std::fs::create_dir(quarantine(admin)).map_err(io(admin))?;
    for (file, content) in admin_files(admin, &admin_abs, &path) {
        std::fs::write(&file, content).map_err(io(&file))?;
    }
    Ok((admin_abs, path))
}

/// The files that tie the worktree at `path` (its real path) to its administrative
/// directory `admin` (whose real path is `admin_real`), with what each holds:
/// `commondir` (`../..`), `gitdir` (the worktree's `.git`), and the worktree's `.git`
/// file (`gitdir: <admin_real>`). Written when the worktree is made, and put back from
/// this ([`super::links`]) when they are found changed.
pub fn admin_files(admin: &Path, admin_real: &Path, path: &Path) -> [(PathBuf, String); 3] {
    let dotgit = path.join(".git");
    [
        (admin.join("commondir"), "../..\n".to_owned()),
        (admin.join("gitdir"), format!("{}\n", dotgit.display())),
        (dotgit, format!("gitdir: {}\n", admin_real.display())),
    ]
}

/// Check out the worktree at `path` (administrative directory `admin`): its files and
/// index as HEAD has them, by git (see [`create`]). Submodules are left to worktree
/// setup.
fn checkout(admin: &Path, path: &Path, config: CheckoutConfig<'_>) -> Result<(), WorktreeError> {
    Git::new(path)
        .git_dir(admin)
        .work_tree(path)
        .trusting(config.trusted)
        .listed(config.listed)
        .args([
            "read-tree",
            "--reset",
            "-u",
            "--no-recurse-submodules",
            "HEAD",
        ])
        .output()
        .map_err(WorktreeError::Checkout)?;
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

/// Whether the worktree at `path` has a `.git` file naming `admin` as its git dir.
pub fn links_to(path: &Path, admin: &Path) -> bool {
    let Ok(text) = crate::util::read_regular(&path.join(".git"), 4096) else {
        return false;
    };
    String::from_utf8_lossy(&text)
        .trim()
        .strip_prefix("gitdir:")
        .is_some_and(|g| same_path(Path::new(g.trim()), admin))
}

/// What [`remove`] does with a worker's branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchFate {
    /// Leave it.
    Keep,
    /// Delete it, unless it holds a WIP commit fanout saved (then it is kept and said).
    Delete,
    /// Delete it, WIP commit and all: the user named it (`cleanup --delete-kept`).
    DeleteEvenWip,
}

/// Remove what `entry` says fanout created. A worktree is only removed when git's
/// record of it points at the journal's path; a branch only when it was created by
/// fanout and is not checked out anywhere.
pub fn remove(repo: &Repository, entry: &JournalEntry, branch: BranchFate) -> Removed {
    let mut out = Removed::default();
    if entry.worktree_created && entry.worktree_incomplete {
        remove_incomplete(repo, entry, &mut out);
    } else if entry.worktree_created {
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
                // exactly the one we made: its `.git` file names fanout's
                // administrative directory for it (a worktree of the user's names
                // its own).
                let admin = repo
                    .commondir()
                    .join("worktrees")
                    .join(&entry.worktree_name);
                if links_to(&entry.worktree_path, &admin) {
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
        // Its administrative directory goes too once the worktree is gone, whatever its
        // files now say (an agent may have re-pointed them; git would then leave it
        // behind). With the worktree kept (locked, say), it stays: without it, neither
        // git nor a later cleanup would know the directory as a worktree again.
        if out.worktree || !entry.worktree_path.exists() {
            let _ = remove_admin(repo, &entry.worktree_name);
        }
        // Remove the now-empty run folder, never anything with content.
        if let Some(parent) = entry.worktree_path.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
    // A worktree left in place keeps its branch: what it holds is found against it.
    let worktree_kept =
        entry.worktree_created && !out.worktree && entry.worktree_path.join(".git").exists();
    remove_branch(repo, entry, branch, worktree_kept, &mut out);
    out
}

/// [`remove`]'s part for `entry`'s branch (`worktree_kept`: its worktree stays).
fn remove_branch(
    repo: &Repository,
    entry: &JournalEntry,
    branch: BranchFate,
    worktree_kept: bool,
    out: &mut Removed,
) {
    if entry.branch_created
        && branch != BranchFate::Keep
        && let Ok(mut b) = repo.find_branch(&entry.branch, BranchType::Local)
    {
        let wip = tip_is_wip(&b);
        if worktree_kept {
            out.kept
                .push(format!("branch {}: kept with its worktree", entry.branch));
        } else if b.is_head() {
            out.kept
                .push(format!("branch {}: checked out: kept", entry.branch));
        } else if let Some(oid) = wip.filter(|_| branch != BranchFate::DeleteEvenWip) {
            out.kept.push(format!(
                "branch {}: holds WIP commit {} that fanout saved (uncommitted work); kept — delete it with `fanout cleanup --delete-kept {}`",
                entry.branch,
                crate::util::short(&oid.to_string()),
                entry.branch
            ));
        } else {
            match b.delete() {
                Ok(()) => out.branch = true,
                Err(e) => out
                    .kept
                    .push(format!("branch {}: {}", entry.branch, e.message())),
            }
        }
    }
}

/// Remove what a kill while fanout made `entry`'s worktree left ([`create`], step by
/// step: its admin dir, maybe locked and missing files; the worktree directory, maybe
/// empty, without `.git`, or part checked out). No agent ran there. The directory goes
/// only when it is the journal's path as fanout names it (`<run>/w<N>`, worktree name
/// `fanout-<run>-w<N>`), a directory in a directory (no link on the way), whose
/// `.git`, if written yet, names the admin dir; it is removed without following a link
/// out of it.
fn remove_incomplete(repo: &Repository, entry: &JournalEntry, out: &mut Removed) {
    let admin = repo
        .commondir()
        .join("worktrees")
        .join(&entry.worktree_name);
    let path = &entry.worktree_path;
    let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let run = path.parent().and_then(Path::file_name);
    let named = run.is_some_and(|r| {
        entry.worktree_name == worktree_name(&r.to_string_lossy(), entry.worker_id)
            && path.file_name() == Some(format!("w{}", entry.worker_id).as_ref())
    });
    let dotgit = path.join(".git");
    let ours = named
        && path.parent().is_some_and(is_dir)
        && is_dir(path)
        && (std::fs::symlink_metadata(&dotgit).is_err() || links_to(path, &admin));
    if ours {
        // `remove_dir_all` removes a link, never what it points at.
        match std::fs::remove_dir_all(path) {
            Ok(()) => out.worktree = true,
            Err(e) => out.kept.push(format!("{}: {e}", path.display())),
        }
    } else if std::fs::symlink_metadata(path).is_ok() {
        out.kept.push(format!(
            "{}: not the worktree fanout was making: left alone",
            path.display()
        ));
    }
    out.worktree |= remove_admin(repo, &entry.worktree_name);
    if let Some(parent) = path.parent() {
        let _ = std::fs::remove_dir(parent);
    }
}

/// Remove `.git/worktrees/<name>` when it is a directory there (not a symlink) and
/// `name` one of fanout's worktree names; whether it was removed.
fn remove_admin(repo: &Repository, name: &str) -> bool {
    let plain = Path::new(name).components().count() == 1
        && matches!(
            Path::new(name).components().next(),
            Some(std::path::Component::Normal(_))
        );
    if !plain || !name.starts_with("fanout-") {
        return false;
    }
    let admin = repo.commondir().join("worktrees").join(name);
    std::fs::symlink_metadata(&admin).is_ok_and(|m| m.is_dir())
        && std::fs::remove_dir_all(&admin).is_ok()
}

/// Whether `a` and `b` name one place (their real paths, trailing slashes aside).
pub fn same_path(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    let trim = |p: PathBuf| PathBuf::from(p.to_string_lossy().trim_end_matches('/').to_owned());
    trim(canon(a)) == trim(canon(b))
}

/// How the message of every WIP commit fanout makes begins (see `store::wip`).
pub const WIP_SUBJECT: &str = "WIP: work left uncommitted in ";

/// The tip of `branch` when it is a WIP commit fanout made (work it saved so that
/// nothing is lost: only the user may discard it).
pub fn tip_is_wip(branch: &git2::Branch<'_>) -> Option<Oid> {
    let commit = branch.get().peel_to_commit().ok()?;
    commit
        .message_bytes()
        .starts_with(WIP_SUBJECT.as_bytes())
        .then(|| commit.id())
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

    /// A repository holding `files`, and the worktree [`create`] made of it.
    fn made(files: &[(&str, &[u8])]) -> (tempfile::TempDir, PathBuf) {
        let (d, _repo, oid) = repo_with(files);
        let path = d.path().join("wt");
        let trusted = TrustedConfig::new();
        let config = CheckoutConfig {
            trusted: &trusted,
            listed: None,
        };
        create(d.path(), "w1", &path, "fanout/t/w1", oid, config).unwrap();
        (d, path)
    }

    #[test]
    fn a_worktree_checkout_still_applies_the_repositorys_filters() {
        let (_d, path) = made(&[
            (".gitattributes", b"*.txt text eol=crlf\n"),
            ("a.txt", b"one\ntwo\n"),
            ("b.bin", b"one\ntwo\n"),
        ]);
        assert_eq!(
            std::fs::read(path.join("a.txt")).unwrap(),
            b"one\r\ntwo\r\n"
        );
        assert_eq!(std::fs::read(path.join("b.bin")).unwrap(), b"one\ntwo\n");

        let (_d, path) = made(&[("a.txt", b"one\ntwo\n")]);
        assert_eq!(std::fs::read(path.join("a.txt")).unwrap(), b"one\ntwo\n");
        // The new worktree is clean: the index matches what was written.
        let wt = Repository::open(&path).unwrap();
        assert!(wt.statuses(None).unwrap().is_empty());
    }

    /// A journal entry for worker 1 of run `r`, its worktree under `root`, that fanout
    /// was stopped while making.
    fn incomplete(root: &Path) -> JournalEntry {
        JournalEntry {
            worker_id: 1,
            branch: "fanout/r/w1".into(),
            base_commit: String::new(),
            worktree_name: worktree_name("r", 1),
            worktree_path: worktree_path(root, "r", 1),
            branch_created: false,
            worktree_created: true,
            worktree_incomplete: true,
        }
    }

    #[test]
    fn removing_a_half_made_worktree_takes_its_dirs_and_follows_no_link_out() {
        let (d, repo, _) = repo_with(&[("a.txt", b"a")]);
        let (root, users) = (d.path().join("wts"), d.path().join("users"));
        std::fs::create_dir_all(&users).unwrap();
        std::fs::write(users.join("keep.txt"), "the user's").unwrap();
        let entry = incomplete(&root);
        let admin = repo
            .commondir()
            .join("worktrees")
            .join(&entry.worktree_name);
        // Killed in the checkout: locked, `.git` written, a link in the files.
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::write(admin.join("locked"), "initializing\n").unwrap();
        std::fs::create_dir_all(&entry.worktree_path).unwrap();
        let admin_real = std::fs::canonicalize(&admin).unwrap();
        for (file, body) in admin_files(&admin, &admin_real, &entry.worktree_path) {
            std::fs::write(file, body).unwrap();
        }
        std::os::unix::fs::symlink(&users, entry.worktree_path.join("out")).unwrap();
        let removed = remove(&repo, &entry, BranchFate::Delete);
        assert!(removed.worktree && removed.kept.is_empty(), "{removed:?}");
        assert!(!admin.exists() && !entry.worktree_path.exists());
        assert_eq!(
            std::fs::read(users.join("keep.txt")).unwrap(),
            b"the user's"
        );

        // A link at the worktree's path, or at its run folder: left alone.
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::create_dir_all(root.join("r")).unwrap();
        std::os::unix::fs::symlink(&users, &entry.worktree_path).unwrap();
        let removed = remove(&repo, &entry, BranchFate::Delete);
        assert_eq!(removed.kept.len(), 1, "{removed:?}");
        std::fs::remove_file(&entry.worktree_path).unwrap();
        std::fs::remove_dir(root.join("r")).unwrap();
        std::fs::create_dir_all(users.join("w1")).unwrap();
        std::os::unix::fs::symlink(&users, root.join("r")).unwrap();
        let removed = remove(&repo, &entry, BranchFate::Delete);
        assert_eq!(removed.kept.len(), 1, "{removed:?}");
        assert!(users.join("w1").is_dir());
        std::fs::remove_file(root.join("r")).unwrap();

        // A directory whose `.git` names another worktree's admin dir: left alone.
        std::fs::create_dir_all(&entry.worktree_path).unwrap();
        std::fs::write(entry.worktree_path.join(".git"), "gitdir: /elsewhere\n").unwrap();
        let removed = remove(&repo, &entry, BranchFate::Delete);
        assert_eq!(removed.kept.len(), 1, "{removed:?}");
        assert!(entry.worktree_path.join(".git").is_file());
        assert_eq!(
            std::fs::read(users.join("keep.txt")).unwrap(),
            b"the user's"
        );
    }
}
