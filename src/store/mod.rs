//! The run store: the runs fanout keeps in a repository (`<git dir>/fanout/runs/<id>/`),
//! read after their attempt by the commands that look back at them. The runs are
//! listed, and a live fanout still running one is found by its pid file ([`runs`]);
//! `fanout status` shows them ([`status`]), `fanout cleanup` removes them ([`cleanup`])
//! and `fanout resume` finds one that did not finish and prepares its next attempt
//! ([`resumable`]). What still runs of a run whose fanout died is found and stopped
//! ([`strays`]), and work a worktree holds that no commit has is saved before its
//! worktree goes ([`wip`]).
//!
//! The run stage writes what is read here: the journal, the per-worker records, the
//! pid file, `plan.json` and `results.json` ([`crate::run`]); nothing here trusts
//! anything else, and each worktree's git files are put back as fanout made them
//! before anything reads them ([`crate::run::links`]).

pub mod cleanup;
pub mod resumable;
pub mod runs;
pub mod status;
pub mod strays;
pub mod wip;
