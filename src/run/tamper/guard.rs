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
//! ([`CheckAt::Outside`]).
//!
//! The guard can be made before its snapshot is taken ([`Guard::pending`]): the
//! snapshot is taken on a thread of its own while the run's first worktrees are made,
//! and [`Guard::ready`] is the gate every worker passes before its setup, agent and
//! checks — nothing a worker runs starts before the snapshot is complete (see
//! [`super::Snapshot`] for why making worktrees meanwhile changes nothing it holds).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::{Change, CheckAt, Snapshot};
use crate::model::{Status, WorkerResult};

/// The snapshot once taken, or why it could not be; `None` while it is being taken.
type Taken = Option<Result<Arc<Snapshot>, String>>;

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
    /// What the run must leave as it was, once taken.
    taken: watch::Sender<Taken>,
    /// Every worker of the run is sandboxed (see the module docs).
    confined: bool,
    state: Mutex<State>,
}

/// `changes` as one reason (the first 10: a hostile agent may change thousands).
pub fn describe(changes: &[Change]) -> String {
    crate::util::some_of(changes, 10, "; ")
}

impl Guard {
    /// Guard `snapshot` for a run whose workers are all sandboxed (`confined`) or not
    /// (runs use [`Guard::pending`]: the snapshot is taken meanwhile).
    #[cfg(test)]
    pub fn new(snapshot: Snapshot, confined: bool) -> Guard {
        let guard = Guard::pending(confined);
        guard.taken(Ok(snapshot));
        guard
    }

    /// A guard whose snapshot is still being taken: [`Guard::taken`] hands it over.
    pub fn pending(confined: bool) -> Guard {
        Guard {
            taken: watch::channel(None).0,
            confined,
            state: Mutex::new(State::default()),
        }
    }

    /// The snapshot is taken, or could not be (`Err`: why); opens [`Guard::ready`].
    /// Only the first call counts.
    pub fn taken(&self, snapshot: Result<Snapshot, String>) {
        self.taken.send_if_modified(|t| {
            if t.is_some() {
                return false;
            }
            *t = Some(snapshot.map(Arc::new));
            true
        });
    }

    /// Wait until the snapshot is taken; `Err`: why it could not be (nothing of the
    /// worker may run then).
    pub async fn ready(&self) -> Result<(), String> {
        let mut rx = self.taken.subscribe();
        let taken = rx.wait_for(Option::is_some).await;
        match taken.as_deref() {
            Ok(Some(Ok(_))) => Ok(()),
            Ok(Some(Err(e))) => Err(e.clone()),
            // The sender lives as long as the guard: never reached.
            _ => Err("the tamper snapshot was never taken".to_owned()),
        }
    }

    /// The snapshot, once taken.
    pub fn snapshot(&self) -> Option<Arc<Snapshot>> {
        self.taken.borrow().as_ref()?.as_ref().ok().cloned()
    }

    /// Why the snapshot could not be taken, once that is known.
    pub fn failed(&self) -> Option<String> {
        self.taken.borrow().as_ref()?.as_ref().err().cloned()
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
    /// running alongside) changed what it must not. Before the snapshot is taken no
    /// worker has run anything: there is nothing to check.
    pub fn finished(&self, id: u32, result: &mut WorkerResult) {
        if self.confined {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.running.remove(&id);
        let found = match self.snapshot().map(|s| s.check(CheckAt::Worker)) {
            None => Vec::new(),
            Some(Ok(c)) => c.into_iter().filter(|c| !c.benign).collect(),
            Some(Err(e)) => vec![Change {
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
    /// returns the changes other than fanout's own (none without a snapshot).
    pub fn end(&self) -> Vec<Change> {
        let _st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mode = if self.confined {
            CheckAt::Outside
        } else {
            CheckAt::End
        };
        match self.snapshot().map(|s| s.check(mode)) {
            Some(Ok(c)) => c.into_iter().filter(|c| !c.benign).collect(),
            _ => Vec::new(),
        }
    }
}

/// `result` failed because of `reason` (kept after its own reason, if any).
pub fn blame(result: &mut WorkerResult, reason: String) {
    result.status = Status::Failed;
    result.reason = Some(match result.reason.take() {
        Some(own) if !own.is_empty() => format!("{reason}; also: {own}").into(),
        _ => reason.into(),
    });
}
