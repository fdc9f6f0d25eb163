//! fanout's integration tests, in one binary (each test file of its own would link
//! the whole crate again): one module per area, sharing the hermetic environment of
//! `tests/common` and the peers of `tests/support`.

#[path = "../support/act.rs"]
mod act_support;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/fake_github.rs"]
#[allow(dead_code)] // a fake service: it answers more than today's tests ask
mod fake_github;
#[path = "../support/fake_provider.rs"]
mod fake_provider;
#[path = "../support/fake_release.rs"]
#[allow(dead_code)] // a fake service: it answers more than today's tests ask
mod fake_release;
#[path = "../support/peers.rs"]
mod peers;
#[path = "../support/runner_commands.rs"]
mod runner_commands;

mod act;
mod adapters;
mod agents_real;
mod architect;
mod architecture;
mod checkout;
mod cleanup;
mod deps;
mod docs;
mod fake_github_api;
mod findings;
mod first_contact;
mod forged_records;
mod fuzz_corpus;
mod gateway;
mod gateway_run;
#[macro_use] // both_modes!, for hostile_ci too
mod hostile;
mod hostile_ci;
mod init;
mod install;
mod limits;
mod matrix;
mod nightly;
mod outcomes;
mod overrides;
mod pins;
mod publish;
mod records;
mod release;
mod resume;
mod run;
mod sandbox;
mod select;
mod setup;
mod signals;
mod supervision;
mod tokens;
