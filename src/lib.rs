//! fanout: fan AI coding-agent tasks out to isolated git worktrees and fan the
//! results back in.
//!
//! Data flows one way, one folder per stage, each importing only the stages before it
//! and the shared leaves:
//! [`config`] (the file) → [`agent`] (adapters) → [`plan`] (settings, assignment) →
//! [`run`] (worktrees, setup, supervised agents, harvest, checks) → [`fanin`]
//! (selection, conflicts, integration, bundles) → [`report`] (summary, table,
//! progress) → [`publish`] (GitHub) and [`actions`] (GitHub Actions outputs).
//! The command-line edge is [`cli`] (raw flags and one file per subcommand).
//! Leaves shared by every stage: [`exit`] (exit codes), [`model`] (the results
//! model), [`repo`] (the user's repository), [`util`] (small helpers).

#![warn(missing_docs)]

// Leaves: import no stage.
pub mod exit;
pub mod model;
pub mod repo;
pub mod util;

// Stages, in the order data flows (one per line so rustfmt keeps the order); each
// imports only earlier stages and the leaves.
pub mod config;

pub mod agent;

pub mod plan;

pub mod run;

pub mod fanin;

pub mod report;

pub mod publish;

pub mod actions;

pub mod ops;

pub mod cli;
