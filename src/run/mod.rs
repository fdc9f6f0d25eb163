//! The run stage: running a [`crate::plan::Plan`] on this machine. Each worker gets a
//! git worktree on its own branch ([`worktree`]), prepared before its agent starts
//! ([`setup`]: ports, copied files, setup commands), an agent run as a supervised
//! process group ([`process`], stopped through [`signals`]), its changes committed
//! ([`harvest`]) and checked ([`checks`]); the [`executor`] schedules all of that and
//! reports typed [`event`]s as it goes. What fanout created is recorded in the run's
//! [`journal`] (cleanup and resume trust nothing else), and each worker's final result
//! is recorded as soon as it is known ([`resume`]).
//!
//! It hands a [`results::RunReport`] — the plan and one result per worker — to fan-in.

pub mod checks;
pub mod event;
pub mod executor;
pub mod harvest;
pub mod journal;
pub mod process;
pub mod results;
pub mod resume;
pub mod setup;
pub mod signals;
pub mod worktree;
