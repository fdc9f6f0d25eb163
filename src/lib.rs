//! fanout: fan AI coding-agent tasks out to isolated git worktrees and fan the
//! results back in.
//!
//! Data flows one way, one module per stage:
//! [`config`] + [`settings`] → [`plan`] → [`execute`] (with [`worktree`], [`setup`], [`agent`])
//! → [`harvest`] → [`result`] → [`report`] / [`progress`].
//! The command-line edge is [`cli`] (raw flags) and [`commands`] (one file per
//! subcommand); [`exit`] documents the exit codes.

#![warn(missing_docs)]

pub mod agent;
pub mod bundle;
pub mod checks;
pub mod cli;
pub mod commands;
pub mod config;
pub mod conflicts;
pub mod execute;
pub mod exit;
pub mod gha;
pub mod github;
pub mod harvest;
pub mod journal;
pub mod plan;
pub mod progress;
pub mod publish;
pub mod repo;
pub mod report;
pub mod result;
pub mod resume;
pub mod select;
pub mod settings;
pub mod setup;
pub mod worktree;
