//! The run stage: running a [`crate::plan::Plan`] on this machine. Each worker gets a
//! git worktree with its HEAD detached at the base ([`worktree`]) and a confinement
//! ([`confine`]: a private directory, an object quarantine, the sandbox), prepared
//! before its agent starts ([`setup`]: ports, copied files, setup commands), an agent
//! run as a supervised process group ([`process`], stopped through [`signals`]), its
//! changes committed on its branch ([`harvest`]) and checked ([`checks`]); a
//! dependent worker is given its dependencies' findings ([`inputs`]); the
//! [`executor`] schedules all of that (one file per concern: the run's scheduling, one
//! worker's life, its agent, its end, its verdict, a dependent's merged base, the
//! run's spend) and reports typed [`event`]s as it goes, and
//! [`reaper`] stops what the agents left running before the run reports. Checkouts,
//! harvests and file copies run on the runtime's blocking threads, in fanout's process;
//! the runtime is dropped (waiting for them) before the run's last tamper check. What fanout created is recorded in the run's
//! [`journal`] (cleanup and resume trust nothing else), and each worker's final result
//! is recorded as soon as it is known ([`resume`]).
//!
//! An [`attempt`] is one go at a plan: a fresh run, or a run taken up again by
//! `fanout resume` (found and prepared by [`crate::store::resumable`]). The runs kept
//! in a repository, read after their attempt by `status`, `cleanup` and `resume`, are
//! the next stage's: [`crate::store`].
//!
//! It hands the attempt's results — one per worker, in id order — to fan-in; the
//! report of the run is a [`results::RunReport`].

pub mod attempt;
pub mod checks;
pub mod confine;
pub mod event;
pub mod excerpt;
pub mod executor;
pub mod gated;
pub mod groups;
pub mod harvest;
pub mod inputs;
pub mod journal;
pub mod links;
pub mod process;
pub mod reaper;
pub mod results;
pub mod resume;
pub mod setup;
pub mod signals;
pub mod supervisor;
pub mod tamper;
pub mod worktree;
