//! What the run stage tells the rest of fanout while it runs: typed [`Event`]s for a
//! [`Reporter`] (live progress, nextest style: the executor never prints), and the
//! [`StopLevel`] the signal dispatcher sets.

use std::path::PathBuf;

use crate::model::WorkerResult;

/// How hard fanout is being asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StopLevel {
    /// Keep going.
    Run,
    /// Stop agents gracefully (SIGTERM, grace, SIGKILL); start no new ones.
    Graceful,
    /// Kill agents now.
    Kill,
}

/// What the executor reports as it goes.
#[derive(Debug, Clone)]
pub enum Event {
    /// A worker's agent is starting.
    WorkerStarted {
        /// Worker id.
        id: u32,
        /// Its worktree.
        worktree: PathBuf,
    },
    /// The latest line a worker's agent printed.
    WorkerOutput {
        /// Worker id.
        id: u32,
        /// The line.
        line: String,
    },
    /// A worker hit its timeout and is being stopped.
    WorkerTimedOut {
        /// Worker id.
        id: u32,
    },
    /// Something a worker's user should know that does not stop it (a `copy:`
    /// pattern that matched no file); workers often share it, so reporters show each
    /// message once.
    Warning {
        /// What.
        message: String,
    },
    /// A worker is done (any status).
    WorkerFinished(Box<WorkerResult>),
    /// fanout was asked to stop.
    Stopping(StopLevel),
}

/// Something that shows progress: fed every [`Event`] of a run, in order.
pub trait Reporter: Send {
    /// One event.
    fn event(&mut self, ev: &Event);
    /// The run is over.
    fn finish(&mut self) {}
}
