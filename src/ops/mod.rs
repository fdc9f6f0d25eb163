//! Operations: what each command does, as library functions that chain the stages in
//! order (the command-line files only turn flags into a call and print the outcome).
//! [`go`] is the one choreography of `fanout run`, `resume` and `worker` (secrets
//! dropped before any agent starts, publishing checked before the first worker); [`run`] runs a plan end to end — attempt, fan-in, report — and integrates and
//! publishes it when asked (`fanout run`, `resume`, `demo`); [`matrix`] is the same
//! spread over GitHub Actions jobs (`fanout worker`, `aggregate`); [`demo`] makes the
//! demo's throwaway repository; [`init`] chooses the agent `fanout init` writes for
//! and scaffolds `fanout.yml`; [`tend`] reads what GitHub says before a night's plan
//! (issues as tasks, pull requests to tend).

pub mod demo;
pub mod go;
pub mod init;
pub mod matrix;
pub mod run;
pub mod tend;
