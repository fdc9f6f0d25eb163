//! Work a worker's worktree holds that no commit has: found before `cleanup` removes
//! the worktree (kept and listed unless `--force`) and before `resume` clears a killed
//! worker's worktree; saved as a WIP commit so that nothing is lost (`cleanup --force`
//! on the worker's branch, `resume` on a branch of its own in the run's namespace).
//!
//! The worktree's files are read into a scratch index of the commit (never the
//! worktree's own, nor the user's; the worktree's serves only as a cache of file
//! states: [`cached_index`]), as harvest does: what git ignores, the run's `exclude`
//! patterns and what setup put there are left out.

use std::path::{Path, PathBuf};

use git2::{Index, IndexAddOption, Oid, Signature};

use crate::run::harvest::{MAX_INDEX_BYTES, is_excluded, tree_changes};
use crate::run::journal::JournalEntry;
use crate::run::worktree::WIP_SUBJECT;

/// A worktree's files that differ from the commit they would go on.
#[derive(Debug, Clone)]
pub struct Unsaved {
    /// The worktree.
    pub worktree: PathBuf,
    /// The commit the WIP commit goes on: the worker's branch, else its base.
    pub parent: Oid,
    /// The tree of the worktree's files.
    pub tree: Oid,
    /// Paths that differ from `parent`.
    pub paths: Vec<String>,
}

fn git(e: git2::Error) -> String {
    e.message().to_owned()
}

/// What `entry`'s worktree holds that `parent` (its branch, else its base) does not;
/// `None` when nothing (or no worktree, or only one fanout was stopped while making).
pub fn find(
    common: &Path,
    entry: &JournalEntry,
    exclude: &[String],
) -> Result<Option<Unsaved>, String> {
    // A worktree fanout was stopped while making holds nothing of an agent's (none ran
    // there): its files are part of a checkout.
    if entry.worktree_incomplete || !entry.worktree_path.join(".git").is_file() {
        return Ok(None);
    }
    let repo = git2::Repository::open(common).map_err(git)?;
    let parent = match repo.refname_to_id(&format!("refs/heads/{}", entry.branch)) {
        Ok(oid) if entry.branch_created => oid,
        _ => Oid::from_str(&entry.base_commit).map_err(git)?,
    };
    let parent_tree = repo.find_commit(parent).map_err(git)?.tree().map_err(git)?;
    repo.set_workdir(&entry.worktree_path, false).map_err(git)?;
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let admin = common.join("worktrees").join(&entry.worktree_name);
    let copy = scratch.path().join("index");
    let mut index = cached_index(&admin, &copy, &parent_tree).map_err(git)?;
    repo.set_index(&mut index).map_err(git)?;
    let setup = crate::run::setup::Baseline::load(&admin);
    let workdir = entry.worktree_path.clone();
    let mut skip = |path: &Path, _: &[u8]| -> i32 {
        let rel = path.to_string_lossy();
        i32::from(is_excluded(&rel, exclude) || setup.keeps_out(&rel, &workdir))
    };
    // One scan, as in harvest: `add_all` takes deleted files out of the index too.
    index
        .add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip))
        .map_err(git)?;
    let tree = index.write_tree().map_err(git)?;
    if tree == parent_tree.id() {
        return Ok(None);
    }
    let paths = tree_changes(&repo, parent_tree.id(), tree).map_err(git)?;
    Ok(Some(Unsaved {
        worktree: entry.worktree_path.clone(),
        parent,
        tree,
        paths,
    }))
}

/// A fresh index of `tree` at `copy` (in a directory of fanout's own), with the
/// worktree's index (in `admin`, which the worker could write) as a cache of file
/// states: an entry whose path, mode and id are `tree`'s keeps that index's size and
/// times, so that a file that still matches them is not read again. Nothing else of
/// that index is taken: no staged id `tree` does not have (its object may be only in
/// the worker's quarantine), no conflict, no mark that tells libgit2 not to look at a
/// file ([`settle`]). Without a readable index, every file is read.
fn cached_index(admin: &Path, copy: &Path, tree: &git2::Tree<'_>) -> Result<Index, git2::Error> {
    let io = |e: std::io::Error| git2::Error::from_str(&e.to_string());
    // Copied file to file, its modification time kept.
    let written = std::fs::File::create_new(copy)
        .and_then(|mut to| {
            crate::util::copy_regular(&admin.join("index"), &mut to, MAX_INDEX_BYTES)
        })
        .and_then(|_| std::fs::metadata(copy)?.modified())
        .ok();
    let cached = written.and_then(|w| Some((Index::open(copy).ok()?, w)));
    let (mut index, written) = match cached {
        Some((index, w)) => (index, Some(w)),
        None => {
            match std::fs::remove_file(copy) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
                _ => {}
            }
            (Index::open(copy)?, None)
        }
    };
    index.read_tree(tree)?;
    if let Some(written) = written {
        settle(&mut index, written)?;
    }
    Ok(index)
}

/// After [`Index::read_tree`] over the worktree's index: libgit2 kept the file state
/// of each matching entry, dropped the extended marks (skip-worktree, intent-to-add)
/// and the index's own time. Take off the assume-unchanged mark too, and forget the
/// file state of each entry as new as the index was `written`: its file may have
/// changed in the clock tick the index was written in, unseen in its size and times
/// (git's "racy" entries; libgit2 reads them again by the index's time, which
/// `read_tree` dropped).
fn settle(index: &mut Index, written: std::time::SystemTime) -> Result<(), git2::Error> {
    let valid = git2::IndexEntryFlag::VALID.bits();
    let at = written
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let at = (at.as_secs(), at.subsec_nanos());
    let racy = |e: &git2::IndexEntry| {
        let t = &e.mtime;
        t.seconds() != 0 && (u64::try_from(t.seconds()).unwrap_or(0), t.nanoseconds()) >= at
    };
    let unsettled: Vec<git2::IndexEntry> = index
        .iter()
        .filter(|e| e.flags & valid != 0 || racy(e))
        .collect();
    for mut e in unsettled {
        e.flags &= !valid;
        if racy(&e) {
            e.file_size = 0;
            e.mtime = git2::IndexTime::new(0, 0);
        }
        index.add(&e)?;
    }
    Ok(())
}

impl Unsaved {
    /// The paths, shortened for a message.
    pub fn listed(&self) -> String {
        crate::util::some_of(&self.paths, 5, ", ")
    }

    /// Commit the worktree's files on `parent` and point `refname` at the commit.
    pub fn commit(&self, common: &Path, refname: &str, why: &str) -> Result<Oid, String> {
        let repo = git2::Repository::open(common).map_err(git)?;
        let parent = repo.find_commit(self.parent).map_err(git)?;
        let tree = repo.find_tree(self.tree).map_err(git)?;
        let sig = repo
            .signature()
            .or_else(|_| Signature::now("fanout", "fanout@users.noreply.github.com"))
            .map_err(git)?;
        let message = format!("{WIP_SUBJECT}{} ({why})\n", self.worktree.display());
        let oid = repo
            .commit(None, &sig, &sig, &message, &tree, &[&parent])
            .map_err(git)?;
        repo.reference(refname, oid, true, &format!("fanout: {why}"))
            .map_err(git)?;
        Ok(oid)
    }
}
