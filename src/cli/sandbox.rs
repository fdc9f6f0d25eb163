//! `fanout sandbox`: which sandbox this machine gives agents — Landlock's ABI, and
//! what `sandbox: auto` and `sandbox: required` do here — for people and for the
//! Action's self-test; and, hidden, `fanout sandbox exec`: the exec shim every confined
//! agent, setup command and check runs through ([`crate::sandbox::exec`]).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::CliError;
use crate::sandbox::{self, Mode, Policy};
use crate::util::out::{errln, outln};

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
    /// The shim (internal).
    #[command(subcommand)]
    pub command: Option<SandboxCommand>,
}

/// `fanout sandbox exec` (internal).
#[derive(Debug, Subcommand, Clone)]
pub enum SandboxCommand {
    /// Confine this process, then execute PROGRAM (fanout runs agents through this).
    #[command(hide = true)]
    Exec(ExecArgs),
}

/// The confinement and the program (see [`Policy`]).
#[derive(Debug, Args, Clone)]
pub struct ExecArgs {
    /// Landlock ABI to use.
    #[arg(long)]
    pub abi: u8,
    /// A directory (or file) writable beneath.
    #[arg(long = "write", value_name = "PATH")]
    pub write: Vec<PathBuf>,
    /// A file that may be opened for writing.
    #[arg(long = "write-file", value_name = "PATH")]
    pub write_files: Vec<PathBuf>,
    /// A directory nothing beneath may be read.
    #[arg(long = "hide", value_name = "PATH")]
    pub hide: Vec<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    pub command: Vec<OsString>,
}

/// Whether these are the arguments of the exec shim as fanout starts it
/// (`fanout sandbox exec …`).
pub fn is_shim(mut args: impl Iterator<Item = OsString>) -> bool {
    let _program = args.next();
    args.next().is_some_and(|a| a == "sandbox") && args.next().is_some_and(|a| a == "exec")
}

/// Exit code of a shim that could not confine itself or run its program.
const SHIM_FAILED: i32 = 126;

/// Entry point of `fanout sandbox`.
pub fn sandbox(args: &SandboxArgs) -> Result<i32, CliError> {
    if let Some(SandboxCommand::Exec(e)) = &args.command {
        let policy = Policy {
            abi: e.abi,
            write: e.write.clone(),
            write_files: e.write_files.clone(),
            hide: e.hide.clone(),
        };
        let (program, rest) = e.command.split_first().expect("clap requires one");
        let why = sandbox::exec(&policy, program, rest);
        errln!("fanout: sandbox: {why}");
        return Ok(SHIM_FAILED);
    }
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
        outln!("{}", serde_json::to_string_pretty(&v).expect("serializes"));
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
