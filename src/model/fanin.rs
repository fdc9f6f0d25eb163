//! What fan-in finds across workers, as data: the conflict map (which successful
//! workers touch the same files, and which truly conflict) and the integration branch
//! (which workers merged cleanly into one branch, which were left out and why).
//! Computed by [`crate::fanin::conflicts`]; reported and published by later stages.

use serde::{Deserialize, Serialize};

use super::PublishOutcome;

/// Two workers whose changes share files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overlap {
    /// The lower worker id.
    pub a: u32,
    /// The higher worker id.
    pub b: u32,
    /// Files both changed, sorted.
    pub files: Vec<String>,
    /// Files whose changes conflict when merged (a subset of `files`, or other paths
    /// a rename or directory/file clash drags in), sorted. Empty: they merge cleanly.
    pub conflicts: Vec<String>,
}

impl Overlap {
    /// Whether the two truly conflict.
    pub fn conflicting(&self) -> bool {
        !self.conflicts.is_empty()
    }
}

/// Which successful workers overlap and which conflict.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictMap {
    /// The workers compared (the successful ones with a commit), in id order.
    pub workers: Vec<u32>,
    /// Pairs that share at least one file, by (a, b).
    pub overlaps: Vec<Overlap>,
}

impl ConflictMap {
    /// Pairs that truly conflict.
    #[cfg(test)]
    pub fn conflicts(&self) -> impl Iterator<Item = &Overlap> {
        self.overlaps.iter().filter(|o| o.conflicting())
    }
}

/// A worker left out of the integration branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// Worker id.
    pub worker_id: u32,
    /// Its branch.
    pub branch: String,
    /// Why, in a sentence.
    pub reason: String,
    /// Paths that conflicted.
    pub conflicts: Vec<String>,
}

/// The integration branch: every candidate that merged cleanly, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Integration {
    /// The branch fanout made (or moved).
    pub branch: String,
    /// Its commit.
    pub commit: String,
    /// The order candidates were tried in, in words.
    pub order: String,
    /// Workers merged, in order.
    pub included: Vec<u32>,
    /// Workers left out, and why.
    pub left_out: Vec<LeftOut>,
    /// What publishing did with the integration branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<PublishOutcome>,
}
