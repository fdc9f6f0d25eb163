//! The tamper check during a run: after each worker, compare with the snapshot and
//! blame the change on every worker that ran since the last clean check (with
//! unsandboxed workers running in parallel, fanout cannot tell which one did it, and
//! the reason says so).
//!
//! In a sandboxed run no worker can write anything the snapshot holds (refs, the
//! shared config, hooks, the user's checkout, the run directory), so there is no check
//! after each worker — nothing to blame a worker for, and a change found then is
//! someone else's, often the user's own commit or edit while the run went on. The
//! check after the last worker reports such changes without undoing them
//! ([`Mode::Outside`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use super::{Change, Mode, Snapshot};
use crate::model::{Status, WorkerResult};

#[derive(Debug, Default)]
struct State {
    running: BTreeSet<u32>,
    /// Workers that ran since the last clean check.
    suspects: BTreeSet<u32>,
    /// Reasons waiting for workers still running when a change was found.
    blame: BTreeMap<u32, String>,
}

/// The snapshot of a run, checked as its workers finish.
#[derive(Debug)]
pub struct Guard {
    /// What the run must leave as it was.
    pub snapshot: Snapshot,
    /// Every worker of the run is sandboxed (see the module docs).
    confined: bool,
    state: Mutex<State>,
}

/// `changes` as one reason.
pub fn describe(changes: &[Change]) -> String {
    changes
        .iter()
        .map(Change::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl Guard {
    /// Guard `snapshot` for a run whose workers are all sandboxed (`confined`) or not.
    pub fn new(snapshot: Snapshot, confined: bool) -> Guard {
        Guard {
            snapshot,
            confined,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether the run's workers are all sandboxed.
    pub fn confined(&self) -> bool {
        self.confined
    }

    /// Worker `id` starts (its setup, agent and checks may change things).
    pub fn started(&self, id: u32) {
        if self.confined {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.running.insert(id);
        st.suspects.insert(id);
    }

    /// Worker `id` is done: check, restore, and fail `result` when it (or a worker
    /// running alongside) changed what it must not.
    pub fn finished(&self, id: u32, result: &mut WorkerResult) {
        if self.confined {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.running.remove(&id);
        let found = match self.snapshot.check(Mode::Worker) {
            Ok(c) => c.into_iter().filter(|c| !c.benign).collect(),
            Err(e) => vec![Change {
                what: "the repository".into(),
                how: format!("could not be checked: {e}"),
                benign: false,
            }],
        };
        if !found.is_empty() {
            let suspects: Vec<u32> = st.suspects.iter().copied().collect();
            let mut reason = format!("changed what an agent must not: {}", describe(&found));
            if suspects.len() > 1 {
                let ids: Vec<String> = suspects.iter().map(|i| format!("#{i}")).collect();
                reason.push_str(&format!(
                    " (found after worker #{id} finished; workers {} ran unsandboxed since the last clean check, any of them may have done it)",
                    ids.join(", ")
                ));
            }
            for s in suspects {
                st.blame.insert(s, reason.clone());
            }
        }
        st.suspects = st.running.clone();
        if let Some(reason) = st.blame.remove(&id) {
            blame(result, reason);
        }
    }

    /// After the last worker: restore what is left (fanout's own submodule entries,
    /// and, unsandboxed, anything a process left behind by a worker changed since);
    /// returns the changes other than fanout's own.
    pub fn end(&self) -> Vec<Change> {
        let _st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mode = if self.confined {
            Mode::Outside
        } else {
            Mode::End
        };
        match self.snapshot.check(mode) {
            Ok(c) => c.into_iter().filter(|c| !c.benign).collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// `result` failed because of `reason` (kept after its own reason, if any).
pub fn blame(result: &mut WorkerResult, reason: String) {
    result.status = Status::Failed;
    result.reason = Some(match result.reason.take() {
        Some(own) if !own.is_empty() => format!("{reason}; also: {own}"),
        _ => reason,
    });
}
