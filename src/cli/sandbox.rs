//! `fanout sandbox`: which sandbox this machine gives agents — Landlock's ABI, and
//! what `sandbox: auto` and `sandbox: required` do here — for people and for the
//! Action's self-test.

use clap::Args;

use super::common::CliError;
use crate::sandbox::{self, Mode};
use crate::util::out::outln;

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # Landlock's ABI here, and what `sandbox: auto` and `sandbox: required` would do
  fanout sandbox
  # The same as JSON, for a script or a CI step
  fanout sandbox --json | jq .landlock_abi";

/// `fanout sandbox`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
pub struct SandboxArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Entry point of `fanout sandbox`.
pub fn sandbox(args: &SandboxArgs) -> Result<i32, CliError> {
    let probe = sandbox::probe();
    let auto = sandbox::decide(Mode::Auto, &probe).expect("auto never refuses");
    let required = sandbox::decide(Mode::Required, &probe);
    if args.json {
        let v = serde_json::json!({
            "landlock_abi": probe.abi,
            "kernel_abi": probe.kernel_abi,
            "note": probe.note,
            "auto": {"confined": auto.abi.is_some(), "abi": auto.abi, "notice": auto.notice},
            "required": {"ok": required.is_ok(), "error": required.as_ref().err()},
        });
        crate::util::out::stdout_json(&v);
        return Ok(0);
    }
    match (probe.abi, probe.kernel_abi) {
        (Some(a), Some(k)) if a == k => outln!("Landlock: ABI {a}"),
        (Some(a), Some(k)) => outln!("Landlock: ABI {a} (the kernel's: {k})"),
        _ => outln!("Landlock: unavailable"),
    }
    if let Some(n) = &probe.note {
        outln!("  {n}");
    }
    match auto.abi {
        Some(a) => outln!("sandbox: auto     → agents confined (Landlock ABI {a})"),
        None => outln!("sandbox: auto     → agents run WITHOUT a sandbox"),
    }
    match &required {
        Ok(_) => outln!("sandbox: required → agents confined"),
        Err(_) => outln!("sandbox: required → fanout refuses to run (exit 2)"),
    }
    Ok(0)
}
