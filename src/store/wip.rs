//! Work a worker's worktree holds that no commit has: found before `cleanup` removes
//! the worktree (kept and listed unless `--force`) and before `resume` clears a killed
//! worker's worktree; saved as a WIP commit so that nothing is lost (`cleanup --force`
//! on the worker's branch, `resume` on a branch of its own in the run's namespace).
//!
//! The worktree's files are read into a scratch index (a copy of the worktree's own
//! serves as a cache of file states; never the user's), as harvest does: what git
//! ignores, the run's `exclude` patterns and what setup put there are left out.

use std::path::{Path, PathBuf};

use git2::{IndexAddOption, Oid, Signature};

use crate::run::harvest::{cached_index, is_excluded, tree_changes};
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
