//! fanout: fan AI coding-agent tasks out to isolated git worktrees and fan the
//! results back in.
//!
//! Data flows one way, one folder per stage; each imports only the stages before it
//! and the shared leaves (`tests/it/architecture.rs` checks it):
//!
//! | stage | owns | hands on |
//! |---|---|---|
//! | [`config`] | `fanout.yml`: its raw shape, units, schema, located errors | a `ConfigFile` |
//! | [`agent`] | adapters (claude, codex, aider, architect, command), templates, prices, the checks of agent definitions | an `AgentSpec`, adapters |
//! | [`gateway`] | the run's one door out on loopback: model keys, usage and budgets measured from the wire, the network allow-list, rate limits waited out | a `Gateway`, per-worker credentials and usage |
//! | [`plan`] | settings (file + flags, tasks files, validated), tonight's inputs as data (issues as tasks, tends), task dependencies, assignment, worktree setup plan, matrix chunks | a `Plan` |
//! | [`run`] | an attempt at a plan: worktrees, setup, supervised agents, signals, harvest, checks, journal, per-worker records, the pid file | one result per worker, a `RunReport` |
//! | [`store`] | the runs kept on disk, read after their attempt: listing, live-fanout check, status, cleanup, finding and preparing a run to resume, stray processes, unsaved work | a run's state, a prepared `Attempt` |
//! | [`fanin`] | best-of-N selection, conflict map, integration branch, matrix artifacts and bundles | the amended `RunReport` |
//! | [`report`] | `results.json`, the Markdown summary, terminal tables, live progress | files people read |
//! | [`publish`] | the GitHub client (auth, retry), push, pull-request bodies, the nightly lifecycle (stable branches, stacks, the cap), tending before a night, posted findings, the digest, publishing a report | pull requests, issues, reviews |
//! | [`actions`] | GitHub Actions plumbing: step outputs, workflow templates | |
//! | [`ops`] | what each command does, chaining the stages: read GitHub before a night, run a plan end to end, integrate and publish, matrix worker and aggregate, the demo | |
//! | [`cli`] | raw flags (clap) and one thin file per subcommand: flags → library call → printed outcome | an exit code |
//!
//! Leaves, shared by every stage and importing no stage: [`exit`] (exit codes, the
//! library's [`exit::Failure`]), [`git`] (the hardened git command line every git
//! command fanout starts goes through), [`model`] (the results model), [`repo`] (the
//! user's repository, run directories), [`sandbox`] (Landlock and the socket filter: the probe, the
//! confinement of one process, applied between fork and exec), [`secret`] (which variables and git settings
//! carry credentials), [`util`] (atomic writes, bounded reads, timestamps, path
//! patterns).
//!
//! After them all, hidden from these docs: `fuzzing`, every parser of input an agent
//! or a job can write as one fuzz entry point (`fuzz/`, `tests/it/fuzz_corpus.rs`).

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]
// Output goes through util::out (a closed pipe ends fanout quietly), never println!.
#![warn(clippy::print_stdout, clippy::print_stderr)]

// Leaves: import no stage.
pub(crate) mod exit;
pub(crate) mod git;
pub(crate) mod model;
pub(crate) mod repo;
pub mod sandbox;
pub mod secret;
pub(crate) mod util;

// Stages, in the order data flows (one per line so rustfmt keeps the order); each
// imports only earlier stages and the leaves.
pub(crate) mod config;

pub(crate) mod agent;

pub mod gateway;

pub(crate) mod plan;

pub(crate) mod run;

pub(crate) mod store;

pub(crate) mod fanin;

pub(crate) mod report;

pub(crate) mod publish;

pub(crate) mod actions;

pub(crate) mod ops;

pub mod cli;

// Not a stage: every parser of untrusted input as a fuzz entry point. It calls every
// stage, so it comes last, after the command-line edge.
#[doc(hidden)]
pub mod fuzzing;
