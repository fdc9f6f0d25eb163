//! Tamper checks: what an agent must not touch, taken before anything a worker runs
//! starts ([`Snapshot::take`]) and compared after each worker and before resume
//! ([`Snapshot::check`]): every ref outside this run's namespace, HEAD of the user's
//! checkout and of the user's own linked worktrees, the shared `config` (and
//! `config.worktree`), `commondir` and `objects/info/alternates` (which would steer
//! git to another repository or object store), the hooks directory (`core.hooksPath`
//! resolved) and `info/`,
//! the checkout's status (a hash of each dirty or untracked file, the index's
//! entries) and the run directory (no symlink or special file may appear in it).
//!
//! What changed is named, one [`Change`] each. Refs, config, hooks and `info/` are
//! restored from the snapshot where that loses nothing: a moved or added ref is named
//! with the commit it pointed to, and the bytes a restore replaces are kept in the run
//! directory (`tamper/`). The checkout and HEADs are reported, never reverted. Planted
//! symlinks and special files in the run directory are removed.
//!
//! The snapshot is taken while the run's first worktrees are made (on a thread of its
//! own; [`guard::Guard::ready`] holds every worker's setup, agent and checks until it
//! is complete). Making a worktree changes nothing [`Snapshot::take`] reads:
//!
//! - *refs*: it writes `.git/worktrees/<name>/` (`locked`, `commondir`, `gitdir`, a
//!   detached `HEAD`, the object quarantine) and the `.git` file in the new worktree;
//!   the checkout there (`git read-tree --reset -u` with that admin directory as
//!   `GIT_DIR`) writes that worktree's own index, in the same admin directory. No ref
//!   under the common `refs/` nor `packed-refs` is written, and the refs read from the
//!   user's repository are its own and the common ones — a linked
//!   worktree's per-worktree refs are not among them. The worker's branch is made by
//!   harvest (or at the base when it ends early), in the run's namespace, which the
//!   snapshot leaves out.
//! - *HEADs*: those of the user's own linked worktrees only — this run's are left out
//!   by name, and any under the worktree root by path.
//! - *config, hooks, `info/`*: fanout's git runs with options on its command line
//!   (no hooks, no fsmonitor, `gc.auto=0`, no maintenance: [`crate::git::harden`]) and
//!   writes no configuration; only the user's own filter drivers run
//!   ([`crate::git::TrustedConfig`]), and they write object stores, not these files.
//! - *the checkout's status and index*: the new worktree has its own index (in its
//!   admin directory) and lies outside the checkout, or under the worktree root, whose
//!   paths the status leaves out.
//! - *the run directory*: fanout writes its journal, logs and records there; no
//!   symlink or special file.
//!
//! Nor does making the worker's confinement, which happens during its checkout: a
//! private directory under `$TMPDIR`, the agent's `writable:` directories when missing
//! (an empty directory is no status change), and a Landlock ruleset, which lives in
//! the kernel until a process applies it.
//!
//! fanout's own writes are allowed for: `git submodule update --init` in a worker's
//! setup adds `submodule.<name>.url`/`.active` for the submodules of `.gitmodules`;
//! those entries are not blamed on anyone and go when the run ends
//! ([`Snapshot::check`] with [`CheckAt::End`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Largest file of the hooks dir or `info/` whose bytes the snapshot keeps (to
/// restore it); larger ones are compared by hash and reported only.
const KEEP_BYTES: u64 = 1 << 20;

/// The files that steer git to another repository or object store, guarded in the
/// common git directory ([`Snapshot::repo_pointers`]).
const POINTERS: [&str; 2] = ["commondir", "objects/info/alternates"];

/// A file fanout guards: its mode and hash, and its bytes when small enough.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileState {
    /// Unix mode bits.
    pub mode: u32,
    /// SHA-256 of the contents (a symlink: of its target).
    pub sha256: String,
    /// The contents, hex, when at most 1 MiB (to restore from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
    /// Whether it is a symlink.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub symlink: bool,
}

/// What an agent must not touch, as it was before anything a worker runs started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The run.
    pub run_id: String,
    /// Branches under this prefix (`<prefix>/<run-id>/`) are the run's own.
    pub namespace: String,
    /// The repository's common git dir.
    pub common_dir: PathBuf,
    /// The user's checkout.
    pub workdir: PathBuf,
    /// Where fanout's worktrees live (left out of the checkout's status).
    pub worktree_root: PathBuf,
    /// The run directory.
    pub run_dir: PathBuf,
    /// Every ref outside the namespace: name → commit (or `-> target` for a symbolic ref).
    pub refs: BTreeMap<String, String>,
    /// HEAD of the checkout and of the user's linked worktrees: path → HEAD file.
    pub heads: BTreeMap<String, String>,
    /// The hooks directory.
    pub hooks_dir: PathBuf,
    /// Guarded files: `config`, `config.worktree`, `hooks/…`, `info/…` → state.
    pub files: BTreeMap<String, FileState>,
    /// Dirty and untracked files of the checkout → hash (`deleted` when deleted).
    pub checkout: BTreeMap<String, String>,
    /// Hash of the index's entries (path, mode, object, stage).
    pub index: String,
    /// Whether `files` guards `commondir` and `objects/info/alternates` too (which
    /// steer git to another repository or object store): snapshots of a fanout from
    /// before 2026-11-29 do not, and a resume of their run compares without them.
    #[serde(default)]
    pub repo_pointers: bool,
}

/// One thing that differs from the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// What, as the user knows it: `refs/heads/main`, `.git/config (core.fsmonitor)`,
    /// `.git/hooks/pre-commit`, `README.md in the checkout`.
    pub what: String,
    /// How, and what fanout did about it.
    pub how: String,
    /// fanout's own doing (submodule entries): not blamed on a worker.
    pub benign: bool,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.what, self.how)
    }
}

/// When a check runs: during the run (restores what an agent changed), at its end
/// (restores fanout's own submodule entries too), at the end of a sandboxed run
/// (fanout's own entries only), or just to report (nothing restored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckAt {
    /// After a worker.
    Worker,
    /// After the last worker.
    End,
    /// After the last worker of a run whose workers were all sandboxed: none of them
    /// could write what the snapshot holds, so a change is someone else's — the
    /// user's own commit, branch or edit made while the run went on — and is only
    /// reported; fanout's own submodule entries are still undone.
    Outside,
    /// Before `fanout resume` runs anything: the earlier attempt was cut short, so no
    /// check ran after its last workers; since then the user may have committed,
    /// made branches or switched their checkout, and fanout cannot tell their changes
    /// from an agent's. Refs are reported, never moved; config, hooks and `info/` are
    /// restored (what they held is kept in the run directory).
    Resume,
    /// Report only.
    Report,
}

fn sha256(bytes: &[u8]) -> String {
    crate::util::sha256_hex(bytes)
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    hex::decode(s).ok()
}

fn git_err(e: git2::Error) -> String {
    e.message().to_owned()
}

/// The state of `path` (None when absent).
fn file_state(path: &Path) -> Option<FileState> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).ok()?;
        let bytes = target.as_os_str().as_encoded_bytes().to_vec();
        return Some(FileState {
            mode: meta.mode(),
            sha256: sha256(&bytes),
            hex: Some(hex::encode(&bytes)),
            symlink: true,
        });
    }
    if !meta.is_file() {
        return Some(FileState {
            mode: meta.mode(),
            sha256: String::new(),
            hex: None,
            symlink: false,
        });
    }
    let (sha256, hex) = if meta.len() <= KEEP_BYTES {
        let bytes = std::fs::read(path).ok()?;
        (sha256(&bytes), Some(hex::encode(&bytes)))
    } else {
        (sha256_of_file(path).ok()?, None)
    };
    Some(FileState {
        mode: meta.mode(),
        sha256,
        hex,
        symlink: false,
    })
}

/// SHA-256 of a file's contents, read in pieces (a large file in the checkout is
/// never held in memory whole).
fn sha256_of_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hex::encode(h.finalize()))
}

/// Files under `dir` (two levels deep), keyed `label/rel`.
fn dir_files(dir: &Path, label: &str, out: &mut BTreeMap<String, FileState>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let key = format!("{label}/{name}");
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && label.matches('/').count() < 1 {
            dir_files(&e.path(), &key, out);
        } else if let Some(s) = file_state(&e.path()) {
            out.insert(key, s);
        }
    }
}

impl Snapshot {
    /// Take the snapshot of the repository at `workdir` for run `run_id`, whose own
    /// branches are under `namespace` (`<prefix>/<run-id>/`).
    pub fn take(
        workdir: &Path,
        run_id: &str,
        namespace: &str,
        worktree_root: &Path,
        run_dir: &Path,
    ) -> Result<Snapshot, String> {
        let repo = git2::Repository::open(workdir).map_err(git_err)?;
        let common_dir = repo.commondir().to_owned();
        let s = Snapshot {
            run_id: run_id.to_owned(),
            namespace: namespace.to_owned(),
            common_dir,
            workdir: workdir.to_owned(),
            worktree_root: worktree_root.to_owned(),
            run_dir: run_dir.to_owned(),
            refs: BTreeMap::new(),
            heads: BTreeMap::new(),
            hooks_dir: PathBuf::new(),
            files: BTreeMap::new(),
            checkout: BTreeMap::new(),
            index: String::new(),
            repo_pointers: true,
        };
        s.observe(&repo)
    }

    /// The same things as they are now.
    fn observe(&self, repo: &git2::Repository) -> Result<Snapshot, String> {
        // The hooks dir of the snapshot (a planted core.hooksPath is a config change).
        let hooks_dir = if self.hooks_dir.as_os_str().is_empty() {
            hooks_dir(repo, &self.common_dir, &self.workdir)
        } else {
            self.hooks_dir.clone()
        };
        let mut files = BTreeMap::new();
        let pointers: &[&str] = if self.repo_pointers { &POINTERS } else { &[] };
        for name in ["config", "config.worktree"].iter().chain(pointers) {
            if let Some(st) = file_state(&self.common_dir.join(name)) {
                files.insert((*name).to_owned(), st);
            }
        }
        dir_files(&hooks_dir, "hooks", &mut files);
        dir_files(&self.common_dir.join("info"), "info", &mut files);
        let (checkout, index) = self.checkout_state(repo)?;
        Ok(Snapshot {
            refs: self.refs_now(repo)?,
            heads: self.heads_now(repo),
            hooks_dir,
            files,
            checkout,
            index,
            ..self.clone()
        })
    }

    /// Whether `name` is one of this run's own refs.
    fn owned(&self, name: &str) -> bool {
        let short = name.strip_prefix("refs/heads/").or_else(|| {
            name.strip_prefix("refs/remotes/")
                .and_then(|r| r.split_once('/').map(|(_, b)| b))
        });
        short.is_some_and(|b| b.starts_with(&self.namespace))
    }

    fn refs_now(&self, repo: &git2::Repository) -> Result<BTreeMap<String, String>, String> {
        let mut refs = BTreeMap::new();
        for r in repo.references().map_err(git_err)?.flatten() {
            let Ok(name) = r.name().map(str::to_owned) else {
                continue;
            };
            if self.owned(&name) {
                continue;
            }
            let target = match (r.target(), r.symbolic_target().ok().flatten()) {
                (Some(oid), _) => oid.to_string(),
                (None, Some(t)) => format!("-> {t}"),
                _ => continue,
            };
            refs.insert(name, target);
        }
        Ok(refs)
    }

    /// HEAD of the checkout and of each linked worktree that is not fanout's: none
    /// under the worktree root (as given or with its links resolved: git records a
    /// worktree's real path) and none of this run's (by name: one being made while the
    /// snapshot is taken may not have its path recorded yet).
    fn heads_now(&self, repo: &git2::Repository) -> BTreeMap<String, String> {
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        let mut heads = BTreeMap::new();
        heads.insert(
            self.workdir.display().to_string(),
            read(self.common_dir.join("HEAD")),
        );
        let real_root = std::fs::canonicalize(&self.worktree_root).ok();
        let this_run = super::worktree::name_prefix(&self.run_id);
        for name in repo
            .worktrees()
            .iter()
            .flat_map(|a| a.iter().flatten().flatten())
        {
            if name.starts_with(&this_run) {
                continue;
            }
            let Ok(wt) = repo.find_worktree(name) else {
                continue;
            };
            if wt.path().starts_with(&self.worktree_root)
                || real_root.as_ref().is_some_and(|r| wt.path().starts_with(r))
            {
                continue;
            }
            let head = read(self.common_dir.join("worktrees").join(name).join("HEAD"));
            heads.insert(wt.path().display().to_string(), head);
        }
        heads
    }

    /// The checkout's dirty and untracked files (hashed) and the index's entries.
    fn checkout_state(
        &self,
        repo: &git2::Repository,
    ) -> Result<(BTreeMap<String, String>, String), String> {
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .exclude_submodules(true)
            .include_ignored(false);
        let statuses = repo.statuses(Some(&mut opts)).map_err(git_err)?;
        let inner = self
            .worktree_root
            .strip_prefix(&self.workdir)
            .ok()
            .map(Path::to_owned);
        let mut checkout = BTreeMap::new();
        for e in statuses.iter() {
            let Ok(path) = e.path() else { continue };
            if inner
                .as_ref()
                .is_some_and(|i| Path::new(path).starts_with(i))
            {
                continue;
            }
            let full = self.workdir.join(path);
            let state = match file_state(&full) {
                Some(st) => st.sha256,
                None => "deleted".to_owned(),
            };
            checkout.insert(path.to_owned(), state);
        }
        let mut h = Sha256::new();
        if let Ok(index) = repo.index() {
            for e in index.iter() {
                h.update(&e.path);
                h.update(format!("\0{:o} {} {}\n", e.mode, e.id, (e.flags >> 12) & 3));
            }
        }
        let index = hex::encode(h.finalize());
        Ok((checkout, index))
    }

    /// Compare with now, restoring what `mode` says; one [`Change`] per difference.
    pub fn check(&self, mode: CheckAt) -> Result<Vec<Change>, String> {
        let mut changes = Vec::new();
        // First what steers git elsewhere: opening the repository follows it.
        self.pointers_changed(mode, &mut changes);
        let repo = git2::Repository::open(&self.workdir).map_err(git_err)?;
        let now = self.observe(&repo)?;
        let restore_refs = matches!(mode, CheckAt::Worker | CheckAt::End);
        self.refs_changed(&repo, &now, restore_refs, &mut changes);
        self.heads_changed(&now, &mut changes);
        self.files_changed(&now, mode, &mut changes);
        self.checkout_changed(&now, &mut changes);
        // The run directory is fanout's own: what was planted there goes.
        self.run_dir_changed(mode != CheckAt::Report, &mut changes);
        Ok(changes)
    }

    fn refs_changed(
        &self,
        repo: &git2::Repository,
        now: &Snapshot,
        restore: bool,
        out: &mut Vec<Change>,
    ) {
        let names: BTreeSet<&String> = self.refs.keys().chain(now.refs.keys()).collect();
        for name in names {
            let (was, is) = (self.refs.get(name), now.refs.get(name));
            if was == is {
                continue;
            }
            // What the ref points at now stays reachable (it may be the user's own
            // work: without the sandbox fanout cannot tell) under the run's namespace.
            let kept = restore
                .then(|| self.keep_ref_aside(repo, name, is))
                .flatten();
            // Never restored when what it points at (an object of the repository) could
            // not be kept: that commit would be reachable from nothing.
            let names_object = is
                .and_then(|i| git2::Oid::from_str(i).ok())
                .is_some_and(|o| repo.find_object(o, None).is_ok());
            let keepable = !names_object || kept.is_some();
            let fixed = restore && keepable && restore_ref(repo, name, was).is_ok();
            let aside = kept.map_or(String::new(), |k| format!("; kept as {k}"));
            let how = match (was, is, fixed) {
                (Some(w), Some(i), true) => format!("moved to {i} (restored to {w}{aside})"),
                (Some(w), None, true) => format!("deleted (was {w}; restored)"),
                (None, Some(i), true) => format!("created at {i} (removed{aside})"),
                (Some(_), Some(i), false) => format!("moved to {i} (not restored)"),
                (Some(w), None, false) => format!("deleted (was {w}; not restored)"),
                (None, Some(i), false) => format!("created at {i} (not removed)"),
                (None, None, _) => continue,
            };
            out.push(Change {
                what: name.clone(),
                how,
                benign: false,
            });
        }
    }

    /// Branch `<namespace>kept/<name without refs/>-<commit>` at the commit `is` names
    /// (none for a symbolic ref or a deleted one): the branch's short name; `None` when
    /// it cannot be made.
    fn keep_ref_aside(
        &self,
        repo: &git2::Repository,
        name: &str,
        is: Option<&String>,
    ) -> Option<String> {
        let oid = git2::Oid::from_str(is?).ok()?;
        let base = format!(
            "{}kept/{}",
            self.namespace,
            name.strip_prefix("refs/").unwrap_or(name)
        );
        let msg = "fanout: kept what a restored ref pointed at";
        // Named by the commit (an earlier keep is never overwritten), else, should an
        // agent have taken those names in advance, by the time too.
        let hex = oid.to_string();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let timed = format!("{hex}-{stamp}");
        [crate::util::head(&hex, 12), hex.as_str(), timed.as_str()]
            .into_iter()
            .find_map(|id| {
                let short = format!("{base}-{id}");
                let full = format!("refs/heads/{short}");
                match repo.refname_to_id(&full) {
                    Ok(there) if there == oid => Some(short),
                    Ok(_) => None,
                    Err(_) => repo.reference(&full, oid, false, msg).ok().map(|_| short),
                }
            })
    }

    fn heads_changed(&self, now: &Snapshot, out: &mut Vec<Change>) {
        for (path, was) in &self.heads {
            let is = now.heads.get(path).map(String::as_str).unwrap_or("");
            if is != was {
                out.push(Change {
                    what: format!("HEAD of {path}"),
                    how: format!(
                        "changed from {:?} to {:?} (not reverted)",
                        was.trim(),
                        is.trim()
                    ),
                    benign: false,
                });
            }
        }
    }
}

/// Set ref `name` back to `was` (a commit or `-> target`), or delete it when it did
/// not exist.
fn restore_ref(repo: &git2::Repository, name: &str, was: Option<&String>) -> Result<(), String> {
    let msg = "fanout: restored after a worker changed it";
    match was {
        None => repo
            .find_reference(name)
            .and_then(|mut r| r.delete())
            .map_err(git_err),
        Some(w) => match w.strip_prefix("-> ") {
            Some(target) => repo
                .reference_symbolic(name, target, true, msg)
                .map(drop)
                .map_err(git_err),
            None => {
                let oid = git2::Oid::from_str(w).map_err(git_err)?;
                repo.reference(name, oid, true, msg)
                    .map(drop)
                    .map_err(git_err)
            }
        },
    }
}

/// The hooks directory git uses: `core.hooksPath` (relative to the checkout), else
/// `<common dir>/hooks`.
fn hooks_dir(repo: &git2::Repository, common: &Path, workdir: &Path) -> PathBuf {
    let configured = repo
        .config()
        .and_then(|c| c.get_path("core.hooksPath"))
        .ok();
    match configured {
        Some(p) if p.is_absolute() => p,
        Some(p) => workdir.join(p),
        None => common.join("hooks"),
    }
}

mod files;
pub mod guard;

#[cfg(test)]
mod tests;

/// Name of the snapshot in a run directory.
pub const SNAPSHOT_FILE: &str = "snapshot.json";

/// The run's namespace (`<prefix>/<run-id>/`), from its first worker's branch.
pub fn namespace(plan: &crate::plan::Plan) -> Option<String> {
    let first = plan.workers.first()?;
    let (ns, _) = first.branch.rsplit_once('/')?;
    Some(format!("{ns}/"))
}

impl Snapshot {
    /// The run's snapshot: the one in `run_dir` (an earlier attempt took it), else
    /// taken now and saved there.
    pub fn for_run(
        workdir: &Path,
        plan: &crate::plan::Plan,
        worktree_root: &Path,
        run_dir: &Path,
    ) -> Result<Snapshot, String> {
        let path = run_dir.join(SNAPSHOT_FILE);
        if path.exists() {
            return Snapshot::load(run_dir);
        }
        let ns = namespace(plan).ok_or("the plan has no worker")?;
        let s = Snapshot::take(workdir, &plan.run_id, &ns, worktree_root, run_dir)?;
        s.save(run_dir)?;
        Ok(s)
    }

    /// Read the snapshot of `run_dir` (refused unless fanout signed it).
    pub fn load(run_dir: &Path) -> Result<Snapshot, String> {
        let path = run_dir.join(SNAPSHOT_FILE);
        let bytes = crate::util::sign::read_signed(&path).map_err(|e| e.to_string())?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Save in `run_dir`, signed.
    pub fn save(&self, run_dir: &Path) -> Result<(), String> {
        let path = run_dir.join(SNAPSHOT_FILE);
        let bytes = serde_json::to_vec(self).expect("snapshot serializes");
        crate::util::sign::write_signed(&path, &bytes)
            .map_err(|e| format!("{}: {e}", path.display()))
    }
}
