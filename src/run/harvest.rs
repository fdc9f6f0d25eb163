//! Harvest: after an agent exits, take the commit its worktree ended on, copy the
//! objects it wrote into the shared store, commit whatever it left uncommitted
//! (fanout's identity, excluded paths left out, and what worktree setup left behind:
//! see [`crate::run::setup::Baseline`]), make the worker's branch there, and compute
//! `files_modified` exactly from the diff between the base commit and the branch.
//!
//! Nothing in the worktree is trusted to say where the repository is: the user's
//! repository is opened by its common git directory, the worktree's administrative
//! directory by name (`worktrees/<name>`), never through the worktree's `.git` file.
//! What the worker could have written there (its `HEAD`, its index, its object
//! quarantine) is read as data: `HEAD` and the index without following links or
//! blocking ([`crate::util::read_regular`], [`crate::util::copy_regular`]), each
//! object copied by re-hashing its content, and only the objects its commit reaches.
//! fanout writes the index and `HEAD` it leaves behind in its own run directory and
//! renames them into place.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use git2::{Index, IndexAddOption, ObjectType, Odb, Oid, Repository, Signature};

use crate::git::{Git, TrustedConfig};
use crate::util::glob::wildcard;
use crate::util::{copy_regular, read_regular};

/// How to make the commit.
#[derive(Debug, Clone)]
pub struct CommitSpec<'a> {
    /// Author/committer name and e-mail.
    pub identity: (&'a str, &'a str),
    /// The commit message.
    pub message: String,
    /// Paths never committed.
    pub exclude: &'a [String],
    /// The filter drivers the worktree was checked out with (read when the run
    /// started): when there are any, git stages the leftovers so that their clean
    /// side runs (libgit2 runs no external driver).
    pub filters: &'a TrustedConfig,
}

/// A worker's worktree, as harvest finds it: through the user's repository.
#[derive(Debug, Clone, Copy)]
pub struct WorkerTree<'a> {
    /// The user's repository's common git directory.
    pub common: &'a Path,
    /// git's name for the worktree (`worktrees/<name>`).
    pub name: &'a str,
    /// The worktree's directory.
    pub path: &'a Path,
    /// A directory of fanout's, beside `common` on its file system, that no agent
    /// writes: the index and `HEAD` are written here, then renamed into place.
    pub scratch: &'a Path,
}

impl WorkerTree<'_> {
    /// The worktree's administrative directory.
    pub fn admin(&self) -> PathBuf {
        self.common.join("worktrees").join(self.name)
    }
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

/// Largest index or `HEAD` file harvest reads.
pub const MAX_INDEX_BYTES: u64 = 1 << 30;

/// Harvest the worker in `wt` onto `branch` (made, or moved, to the result) and diff
/// against `base`.
pub fn harvest(
    wt: &WorkerTree<'_>,
    branch: &str,
    base: Oid,
    spec: &CommitSpec<'_>,
) -> Result<Harvest, git2::Error> {
    let admin = wt.admin();
    let quarantine = super::worktree::quarantine(&admin);
    plain_store(&quarantine)?;
    let shared = git2::Repository::open(wt.common)?;
    // git reads a `commondir` file in any git directory: one an agent planted in the
    // repository's own would have the branch made in another repository.
    if !super::worktree::same_path(shared.commondir(), wt.common) {
        return Err(git2::Error::from_str(&format!(
            "the repository's git directory names another as its common one ({}): nothing is committed there",
            shared.commondir().display()
        )));
    }
    let (head, note) = agent_head(&shared, &admin, base);
    let import = Import::new(&shared, &quarantine)?;
    import.reachable(head)?;
    // Committing reads the shared store and the quarantine (what the worker staged
    // without committing) and writes the shared store only (libgit2 never writes to
    // an alternate).
    let repo = git2::Repository::open(wt.common)?;
    if quarantine.is_dir() {
        repo.odb()?
            .add_disk_alternate(&quarantine.to_string_lossy())?;
    }
    repo.set_workdir(wt.path, false)?;
    let (tip, committed) = commit_leftovers(&repo, wt, head, spec)?;
    if committed {
        let tree = |c: Oid| repo.find_commit(c).map(|c| c.tree_id());
        import.changed_tree(&repo, tree(tip)?, Some(tree(head)?))?;
    }
    shared.reference(
        &format!("refs/heads/{branch}"),
        tip,
        true,
        "fanout: harvest",
    )?;
    let head_file = wt.scratch.join(format!("{}.HEAD", wt.name));
    write_new(&head_file, format!("{tip}\n").as_bytes()).map_err(io)?;
    std::fs::rename(&head_file, admin.join("HEAD")).map_err(io)?;
    let files_modified = changed_paths(&shared, base, tip)?;
    Ok(Harvest {
        commit: tip,
        committed,
        files_modified,
        note,
    })
}

/// The worker's object directory `store` (its quarantine, which the worker can write)
/// holds only objects: directories and regular files, no link, no `info/alternates`
/// or `info/http-alternates`. libgit2 follows both — a link to a loose object or a
/// pack, or an alternate named in the store, to anywhere fanout (unsandboxed) can
/// read — so a worker could have harvest import objects from a place it may not read
/// itself (a `hidden:` repository). Absent is fine: nothing to import from.
fn plain_store(store: &Path) -> Result<(), git2::Error> {
    let planted = |what: &Path, why: &str| {
        git2::Error::from_str(&format!(
            "the worker's object directory holds {why} ({}): nothing is imported from it",
            what.display()
        ))
    };
    let Ok(meta) = std::fs::symlink_metadata(store) else {
        return Ok(());
    };
    if !meta.is_dir() {
        return Err(planted(store, "something else than a directory"));
    }
    for name in ["alternates", "http-alternates"] {
        let p = store.join("info").join(name);
        if std::fs::symlink_metadata(&p).is_ok() {
            return Err(planted(&p, "a list of other object stores"));
        }
    }
    let mut todo = vec![store.to_owned()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let kind = entry.file_type().map_err(io)?;
            if kind.is_dir() {
                todo.push(entry.path());
            } else if !kind.is_file() {
                return Err(planted(&entry.path(), "a link or a special file"));
            }
        }
    }
    Ok(())
}

/// Write a fresh file at `path` (whatever was there removed first; never through a
/// link left in its place).
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    create_new(path)?.write_all(bytes)
}

/// A fresh, empty file at `path`, as [`write_new`] makes it.
fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

fn io(e: std::io::Error) -> git2::Error {
    git2::Error::from_str(&e.to_string())
}

/// The commit the worktree's `HEAD` names (detached, as fanout leaves it; or a branch
/// the agent checked out), and a note when it is not plainly a commit: an unreadable
/// `HEAD` is the base (the worktree's files are still committed on it).
fn agent_head(repo: &Repository, admin: &Path, base: Oid) -> (Oid, Option<String>) {
    let text = read_regular(&admin.join("HEAD"), 4096)
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    if text.len() >= 40
        && let Ok(oid) = Oid::from_str(&text)
    {
        return (oid, None);
    }
    if let Some(name) = text.strip_prefix("ref:").map(str::trim) {
        return match repo.find_reference(name).and_then(|r| r.peel_to_commit()) {
            Ok(c) => (
                c.id(),
                Some(format!(
                    "the agent checked out {name}; its work was taken from there"
                )),
            ),
            Err(_) => (
                base,
                Some(format!(
                    "the worktree's HEAD named {name}, which does not exist; its files were committed on the base"
                )),
            ),
        };
    }
    (
        base,
        Some("the worktree's HEAD was unreadable; its files were committed on the base".into()),
    )
}

/// Objects copied from a worktree's quarantine into the shared store, each
/// re-hashed: an object whose content does not hash to its name, or that is in
/// neither store, fails harvest.
pub struct Import<'r> {
    shared: &'r Repository,
    main: Odb<'r>,
    private: Odb<'static>,
}

impl<'r> Import<'r> {
    /// Copying from `quarantine` into `shared`'s store.
    pub fn new(shared: &'r Repository, quarantine: &Path) -> Result<Self, git2::Error> {
        let private = Odb::new()?;
        if quarantine.is_dir() {
            private.add_disk_alternate(&quarantine.to_string_lossy())?;
        }
        Ok(Import {
            shared,
            main: shared.odb()?,
            private,
        })
    }

    /// Make `oid` present in the shared store; whether it had to be copied.
    fn ensure(&self, oid: Oid) -> Result<Option<ObjectType>, git2::Error> {
        if self.main.exists(oid) {
            return Ok(None);
        }
        let obj = self.private.read(oid).map_err(|_| {
            git2::Error::from_str(&format!(
                "the worker's commit needs object {oid}, which is missing"
            ))
        })?;
        if self.main.write(obj.kind(), obj.data())? != oid {
            return Err(git2::Error::from_str(&format!(
                "object {oid} in the worker's object directory does not hash to its name"
            )));
        }
        Ok(Some(obj.kind()))
    }

    /// Everything `tip` reaches that the shared store lacks (which holds whatever its
    /// own objects reach: nothing but harvest writes there for a worker). Returns how
    /// many objects were copied.
    pub fn reachable(&self, tip: Oid) -> Result<usize, git2::Error> {
        let mut todo = vec![tip];
        let mut seen = HashSet::new();
        let mut copied = 0;
        while let Some(oid) = todo.pop() {
            if !seen.insert(oid) {
                continue;
            }
            if let Some(kind) = self.ensure(oid)? {
                copied += 1;
                todo.extend(referents(self.shared, oid, kind)?);
            }
        }
        Ok(copied)
    }

    /// What `tree` (fanout's commit of the leftovers, read through `repo`, which sees
    /// the quarantine) holds beyond `old` (its parent's tree, already imported): the
    /// trees and blobs the worker staged without committing.
    pub fn changed_tree(
        &self,
        repo: &Repository,
        tree: Oid,
        old: Option<Oid>,
    ) -> Result<(), git2::Error> {
        if Some(tree) == old {
            return Ok(());
        }
        self.ensure(tree)?;
        let new = repo.find_tree(tree)?;
        let old = old.map(|o| repo.find_tree(o)).transpose()?;
        for e in new.iter() {
            let before = old
                .as_ref()
                .and_then(|t| t.get_name_bytes(e.name_bytes()).map(|p| p.id()));
            match e.kind() {
                Some(ObjectType::Tree) => self.changed_tree(repo, e.id(), before)?,
                Some(ObjectType::Blob) if before != Some(e.id()) => {
                    self.ensure(e.id())?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The objects `oid` (of `kind`, now in the shared store) names.
fn referents(repo: &Repository, oid: Oid, kind: ObjectType) -> Result<Vec<Oid>, git2::Error> {
    Ok(match kind {
        ObjectType::Commit => {
            let c = repo.find_commit(oid)?;
            std::iter::once(c.tree_id()).chain(c.parent_ids()).collect()
        }
        ObjectType::Tree => repo
            .find_tree(oid)?
            .iter()
            // a submodule's commit lives in the submodule's repository
            .filter(|e| e.kind() != Some(ObjectType::Commit))
            .map(|e| e.id())
            .collect(),
        ObjectType::Tag => vec![repo.find_tag(oid)?.target_id()],
        _ => Vec::new(),
    })
}

/// Commit what the worktree holds beyond `head` (on top of it); the result and
/// whether fanout made a commit. The worktree's index, copied into fanout's scratch
/// directory, serves as a cache of file states; the one fanout leaves is renamed in.
fn commit_leftovers(
    repo: &Repository,
    wt: &WorkerTree<'_>,
    head: Oid,
    spec: &CommitSpec<'_>,
) -> Result<(Oid, bool), git2::Error> {
    let admin = wt.admin();
    let parent = repo.find_commit(head)?;
    let copy = wt.scratch.join(format!("{}.index", wt.name));
    // Copied file to file: the index is never held in fanout's memory. The copy keeps
    // the index's modification time: libgit2 reads again a file whose entry is as new
    // as the index (changed in the clock tick the index was written in).
    let cached = create_new(&copy)
        .and_then(|mut to| copy_regular(&admin.join("index"), &mut to, MAX_INDEX_BYTES))
        .ok()
        .map(drop);
    let mut index = match cached.map(|()| Index::open(&copy)) {
        Some(Ok(i)) => i,
        _ => {
            write_new(&copy, b"").map_err(io)?;
            std::fs::remove_file(&copy).map_err(io)?;
            let mut i = Index::open(&copy)?;
            i.read_tree(&parent.tree()?)?;
            i
        }
    };
    repo.set_index(&mut index)?;
    let setup = super::setup::Baseline::load(&admin);
    let workdir = wt.path.to_owned();
    let mut skip = |path: &Path, _: &[u8]| -> i32 {
        let rel = path.to_string_lossy();
        i32::from(is_excluded(&rel, spec.exclude) || setup.keeps_out(&rel, &workdir))
    };
    // One scan of the worktree: libgit2's `add_all` goes through every difference
    // between the index and the worktree — new, changed and deleted files alike (a
    // path gone from the worktree leaves the index) — so `update_all`, a second
    // scan, would find nothing more.
    if spec.filters.entries().is_empty() {
        index.add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip))?;
    } else {
        // libgit2 finds what changed, git stages it into the same index file (running
        // the clean side of the user's filters), and libgit2 reads it back.
        let mut paths: Vec<u8> = Vec::new();
        let mut collect = |path: &Path, m: &[u8]| -> i32 {
            if skip(path, m) == 0 {
                paths.extend_from_slice(b":(literal)");
                paths.extend_from_slice(path.as_os_str().as_encoded_bytes());
                paths.push(0);
            }
            1
        };
        index.add_all(["*"], IndexAddOption::DEFAULT, Some(&mut collect))?;
        index.write()?;
        let to = Staging {
            common: wt.common,
            workdir: &workdir,
            index: &copy,
        };
        stage_with_git(&to, &paths, spec.filters)?;
        index.read(true)?;
    }
    let tree_id = index.write_tree()?;
    index.write()?;
    std::fs::rename(&copy, admin.join("index")).map_err(io)?;
    if parent.tree_id() == tree_id {
        return Ok((head, false));
    }
    let tree = repo.find_tree(tree_id)?;
    let sig = Signature::now(spec.identity.0, spec.identity.1)?;
    let tip = repo.commit(None, &sig, &sig, &spec.message, &tree, &[&parent])?;
    Ok((tip, true))
}

/// Where [`stage_with_git`] stages.
struct Staging<'a> {
    /// The user's repository's common git directory (never the worktree's `.git`).
    common: &'a Path,
    /// The worktree.
    workdir: &'a Path,
    /// The index file fanout harvests with (its own copy).
    index: &'a Path,
}

/// `git add -A` the NUL-separated `paths` (`:(literal)` pathspecs) of the worktree
/// into `to.index`, through the hardened helper with the user's filter drivers from
/// the run's start and no other. git writes the blobs into the shared store, named
/// from their (cleaned) content. git (and the filters it runs) gets none of the
/// variables kept from agents ([`crate::secret::is_scrubbed`]: no credential, not the
/// user's ssh agent), and runs in a process group of its own: a Ctrl-C at the
/// terminal does not cut a harvest short (the run decides when to stop).
fn stage_with_git(
    to: &Staging<'_>,
    paths: &[u8],
    filters: &TrustedConfig,
) -> Result<(), git2::Error> {
    if paths.is_empty() {
        return Ok(());
    }
    let env =
        std::env::vars_os().filter(|(k, _)| !crate::secret::is_scrubbed(&k.to_string_lossy()));
    Git::new(to.workdir)
        .parent_env(env)
        .own_process_group()
        .git_dir(to.common)
        .work_tree(to.workdir)
        .index_file(to.index)
        .trusting(filters)
        .args(["add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"])
        .output_with_input(Some(paths))
        .map(drop)
        .map_err(|e| git2::Error::from_str(&e.to_string()))
}

/// Paths that differ between two commits' trees, sorted, deleted paths included: what
/// a tree-to-tree diff lists, found by reading only the subtrees that differ (a
/// subtree with the same id on both sides is skipped, never read).
pub fn changed_paths(repo: &Repository, from: Oid, to: Oid) -> Result<Vec<String>, git2::Error> {
    let a = repo.find_commit(from)?.tree_id();
    let b = repo.find_commit(to)?.tree_id();
    tree_changes(repo, a, b)
}

/// [`changed_paths`] between two trees (by their ids).
pub fn tree_changes(repo: &Repository, a: Oid, b: Oid) -> Result<Vec<String>, git2::Error> {
    let mut paths = Vec::new();
    diff_trees(repo, Some(a), Some(b), b"", &mut paths)?;
    // The walk goes in entry-name order (`dir/y` before `dir.x/y`); paths sort the
    // other way. Two names that are not UTF-8 may read the same once converted.
    paths.sort();
    paths.dedup();
    Ok(paths)
}

/// One side of a tree entry: its id, its mode, whether it is a tree.
type Side = Option<(Oid, i32, bool)>;

/// Push to `out` the paths under `prefix` that differ between trees `a` and `b`
/// (`None`: no tree on that side): a file added, deleted, or changed in content or
/// mode; a path that is a tree on one side and not on the other counts as both.
fn diff_trees(
    repo: &Repository,
    a: Option<Oid>,
    b: Option<Oid>,
    prefix: &[u8],
    out: &mut Vec<String>,
) -> Result<(), git2::Error> {
    if a == b {
        return Ok(());
    }
    let mut names: std::collections::BTreeMap<Vec<u8>, (Side, Side)> = Default::default();
    for (id, left) in [(a, true), (b, false)] {
        let Some(id) = id else { continue };
        for e in repo.find_tree(id)?.iter() {
            let side = Some((e.id(), e.filemode(), e.kind() == Some(ObjectType::Tree)));
            let slot = names.entry(e.name_bytes().to_vec()).or_default();
            *(if left { &mut slot.0 } else { &mut slot.1 }) = side;
        }
    }
    for (name, (x, y)) in names {
        if x == y {
            continue;
        }
        let mut path = prefix.to_vec();
        path.extend_from_slice(&name);
        let tree = |s: Side| s.filter(|e| e.2).map(|e| e.0);
        let (ta, tb) = (tree(x), tree(y));
        let leaf = |s: Side| s.filter(|e| !e.2);
        let file_changed = leaf(x) != leaf(y);
        if ta.is_some() || tb.is_some() {
            let mut dir = path.clone();
            dir.push(b'/');
            diff_trees(repo, ta, tb, &dir, out)?;
        }
        if file_changed {
            out.push(String::from_utf8_lossy(&path).into_owned());
        }
    }
    Ok(())
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

    /// A commit of `files` (path, content, mode) in `repo`, built through the index.
    fn commit_of(repo: &Repository, files: &[(&str, &str, u32)]) -> Oid {
        let mut index = Index::new().unwrap();
        for (path, content, mode) in files {
            let blob = repo.blob(content.as_bytes()).unwrap();
            let mut e = git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: *mode,
                uid: 0,
                gid: 0,
                file_size: 0,
                id: blob,
                flags: 0,
                flags_extended: 0,
                path: path.as_bytes().to_vec(),
            };
            if *mode == 0o160000 {
                e.id = Oid::from_str("0123456789012345678901234567890123456789").unwrap();
            }
            index.add(&e).unwrap();
        }
        let tree = repo.find_tree(index.write_tree_to(repo).unwrap()).unwrap();
        let sig = Signature::now("t", "t@example.invalid").unwrap();
        repo.commit(None, &sig, &sig, "t", &tree, &[]).unwrap()
    }

    /// What libgit2's tree-to-tree diff lists.
    fn diffed(repo: &Repository, a: Oid, b: Oid) -> Vec<String> {
        let t = |c: Oid| repo.find_commit(c).unwrap().tree().unwrap();
        let diff = repo
            .diff_tree_to_tree(Some(&t(a)), Some(&t(b)), None)
            .unwrap();
        let mut paths: Vec<String> = diff
            .deltas()
            .filter_map(|d| d.new_file().path().or_else(|| d.old_file().path()))
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        paths.sort();
        paths.dedup();
        paths
    }

    #[test]
    fn changed_paths_lists_what_a_tree_diff_lists() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let (f, x, link, sub) = (0o100644, 0o100755, 0o120000, 0o160000);
        let base = commit_of(
            &repo,
            &[
                ("a.txt", "a", f),
                ("same/deep/x.txt", "x", f),
                ("dir/one.txt", "1", f),
                ("dir/two.txt", "2", f),
                ("gone/g.txt", "g", f),
                ("run.sh", "echo", f),
                ("becomes-dir", "file", f),
                ("link", "a.txt", link),
                ("module", "", sub),
                ("dir.x/y", "y", f),
            ],
        );
        let after = commit_of(
            &repo,
            &[
                ("a.txt", "A", f),
                ("same/deep/x.txt", "x", f),
                ("dir/one.txt", "1", f),
                ("dir/three.txt", "3", f),
                ("run.sh", "echo", x),
                ("becomes-dir/inner.txt", "i", f),
                ("link", "dir", link),
                ("dir.x/y", "y", f),
                ("new/nested/n.txt", "n", f),
            ],
        );
        let expected = [
            "a.txt",
            "becomes-dir",
            "becomes-dir/inner.txt",
            "dir/three.txt",
            "dir/two.txt",
            "gone/g.txt",
            "link",
            "module",
            "new/nested/n.txt",
            "run.sh",
        ];
        assert_eq!(changed_paths(&repo, base, after).unwrap(), expected);
        assert_eq!(diffed(&repo, base, after), expected, "libgit2 agrees");
        assert_eq!(
            changed_paths(&repo, after, base).unwrap(),
            diffed(&repo, after, base)
        );
        assert!(changed_paths(&repo, base, base).unwrap().is_empty());
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
