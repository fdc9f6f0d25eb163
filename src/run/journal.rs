//! The run journal: a record, kept in the run directory, of every branch and worktree
//! fanout created. Cleanup removes exactly what the journal names and nothing else, so
//! a user's branch or worktree with a similar name is never touched.
//!
//! The journal is written before anything is created (intent) and updated after each
//! creation, atomically (write to a temporary file, then rename), and signed
//! ([`crate::util::sign`]): a journal fanout did not write is refused.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::util::sign::{RecordError, read_signed, write_signed_with};

/// Version of the journal's shape.
pub const JOURNAL_SCHEMA_VERSION: u32 = 1;

/// What one run created.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Journal {
    /// Version of this shape.
    pub schema_version: u32,
    /// The run.
    pub run_id: String,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// The checkout the run started in.
    pub repo_workdir: PathBuf,
    /// Where this run's worktrees live.
    pub worktree_root: PathBuf,
    /// One entry per worker.
    pub entries: Vec<JournalEntry>,
    /// Other branches fanout made for the run (the integration branch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_branches: Vec<String>,
    /// The repository's remotes when the run started: where publishing pushes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<crate::repo::PushRecord>,
}

/// What fanout created for one worker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JournalEntry {
    /// Worker id.
    pub worker_id: u32,
    /// Branch name.
    pub branch: String,
    /// The commit the branch was created at.
    pub base_commit: String,
    /// git's name of the worktree (`.git/worktrees/<name>`).
    pub worktree_name: String,
    /// The worktree's directory.
    pub worktree_path: PathBuf,
    /// Whether fanout created the branch.
    pub branch_created: bool,
    /// Whether fanout created the worktree — or began to: set (with
    /// `worktree_incomplete`) before it is made, so that a kill while it is being made
    /// leaves nothing the journal does not name.
    pub worktree_created: bool,
    /// fanout began making the worktree and did not finish: a kill may have left it
    /// half-made (its admin dir locked, files missing). No agent ever ran in it:
    /// `resume` and `cleanup` remove it without looking for work to save.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub worktree_incomplete: bool,
}

impl Journal {
    /// Path of the journal in a run directory.
    pub fn path_in(run_dir: &Path) -> PathBuf {
        run_dir.join("journal.json")
    }

    /// Read a run's journal, refusing one fanout did not sign (at most
    /// [`crate::util::RECORD_LIMIT`] bytes).
    pub fn load(run_dir: &Path) -> std::io::Result<Journal> {
        let path = Self::path_in(run_dir);
        let bytes = read_signed(&path).map_err(|e| match e {
            RecordError::Io(_, e) if e.kind() == std::io::ErrorKind::NotFound => e,
            e => std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
        })?;
        Journal::parse(&bytes)
    }

    /// A journal from `journal.json`'s bytes.
    pub fn parse(bytes: &[u8]) -> std::io::Result<Journal> {
        serde_json::from_slice(bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    /// Write atomically, signed.
    pub fn save(&self, run_dir: &Path) -> std::io::Result<()> {
        // Streamed: saved after every worker's steps, it must not cost its size.
        write_signed_with(&Self::path_in(run_dir), |w| {
            serde_json::to_writer_pretty(w, self).map_err(std::io::Error::from)
        })
    }
}

/// A journal shared by concurrent workers; each update is saved before returning.
#[derive(Debug)]
pub struct JournalHandle {
    run_dir: PathBuf,
    journal: Mutex<Journal>,
}

impl JournalHandle {
    /// Save `journal` in `run_dir` and share it.
    pub fn create(run_dir: &Path, journal: Journal) -> std::io::Result<JournalHandle> {
        journal.save(run_dir)?;
        Ok(JournalHandle {
            run_dir: run_dir.to_owned(),
            journal: Mutex::new(journal),
        })
    }

    /// Update worker `id`'s entry and save.
    pub fn update(&self, id: u32, f: impl FnOnce(&mut JournalEntry)) -> std::io::Result<()> {
        let mut j = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = j.entries.iter_mut().find(|e| e.worker_id == id) {
            f(e);
        }
        j.save(&self.run_dir)
    }

    /// A copy of the current journal.
    #[cfg(test)]
    pub fn snapshot(&self) -> Journal {
        self.journal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_updates() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal {
            schema_version: JOURNAL_SCHEMA_VERSION,
            extra_branches: Vec::new(),
            push: None,
            run_id: "r".into(),
            created_at: "now".into(),
            repo_workdir: "/repo".into(),
            worktree_root: "/wt".into(),
            entries: vec![JournalEntry {
                worker_id: 1,
                branch: "fanout/r/w1".into(),
                base_commit: "abc".into(),
                worktree_name: "fanout-r-w1".into(),
                worktree_path: "/wt/r/w1".into(),
                branch_created: false,
                worktree_created: false,
                worktree_incomplete: false,
            }],
        };
        let h = JournalHandle::create(dir.path(), j).unwrap();
        h.update(1, |e| e.branch_created = true).unwrap();
        let back = Journal::load(dir.path()).unwrap();
        assert!(back.entries[0].branch_created);
        assert!(!back.entries[0].worktree_created);
        assert_eq!(back, h.snapshot());
    }
}
