//! GitHub Actions plumbing: step outputs (`$GITHUB_OUTPUT`) of `fanout plan` and of a
//! finished run ([`outputs`]), and the workflow templates `fanout init` writes
//! ([`workflows`]).

pub mod outputs;
pub mod workflows;
