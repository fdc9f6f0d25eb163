//! `fanout init`: write one of fanout's workflow templates
//! ([`crate::actions::workflows`]) into `.github/workflows/`, rendered for the agent
//! ([`crate::ops::init`]: `--agent`, fanout.yml's, else the first agent CLI on PATH),
//! and `fanout.yml` when the repository has none; then say what is left to do on
//! GitHub. With `--check`, report how the workflow has drifted from the template. A
//! file that exists and differs is never overwritten without `--force`: it may hold
//! the user's edits; an existing `fanout.yml` is never touched.

use std::path::PathBuf;

use clap::Args;

use super::common::{CliError, Context};
use crate::actions::workflows::{self, DEFAULT_ACTION, Kind};
use crate::ops::init::{InitAgent, choose_agent, config_text, next_steps};
use crate::util::out::{errln, out};

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # fanout.yml (when missing) and the matrix workflow, for the agent CLI on PATH
  fanout init
  # The nightly workflow, for Codex
  fanout init --kind nightly --agent codex
  # In CI: has the checked-in workflow drifted from the template?
  fanout init --kind matrix --check";

/// `fanout init`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct InitArgs {
    /// Which workflow to write.
    #[arg(long, value_enum, default_value = "matrix")]
    pub kind: Kind,
    /// Compare the workflow file with the template instead of writing it: exit 0 when
    /// they match, 1 with a diff when they differ or the file is missing.
    #[arg(long)]
    pub check: bool,
    /// The action the workflow uses (`owner/repo@ref`, or a local `./path`).
    #[arg(long, value_name = "REF", default_value = DEFAULT_ACTION)]
    pub action: String,
    /// Where to write (default `.github/workflows/fanout-<kind>.yml` at the repository root).
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Overwrite a file that differs from the template.
    #[arg(long, conflicts_with = "check")]
    pub force: bool,
    /// Print the workflow to standard output instead of writing it.
    #[arg(long, conflicts_with_all = ["check", "output", "force"])]
    pub stdout: bool,
    /// The agent to write for (default: fanout.yml's, else the first agent CLI on
    /// PATH: claude, codex, aider, architect).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
}

/// Entry point of `fanout init`.
pub fn init(ctx: &Context, args: &InitArgs) -> Result<i32, CliError> {
    let repo = ctx.repo().ok();
    let file = match &repo {
        Some(r) if ctx.config.is_some() || r.workdir.join("fanout.yml").is_file() => {
            Some(ctx.load_config(r)?.0)
        }
        _ => None,
    };
    let path_var = std::env::var_os("PATH");
    let agent = choose_agent(args.agent.as_deref(), file.as_ref(), path_var.as_deref());
    let text =
        workflows::render(args.kind, &args.action, &agent.workflow).map_err(CliError::Usage)?;
    if args.stdout {
        out!("{text}");
        return Ok(0);
    }
    let workdir = match repo {
        Some(r) => r.workdir,
        None => ctx.repo()?.workdir,
    };
    let path = match &args.output {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => ctx.cwd.join(p),
        None => workdir
            .join(".github/workflows")
            .join(format!("fanout-{}.yml", args.kind.name())),
    };
    let existing = workflows::read(&path)?;
    let shown = args.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!(".github/workflows/fanout-{}.yml", args.kind.name()))
    });
    if args.check {
        return Ok(check(args.kind, &shown, existing.as_deref(), &text));
    }
    let up_to_date = existing.as_deref() == Some(text.as_str());
    if let Some(old) = existing.as_deref().filter(|_| !up_to_date && !args.force) {
        out!("{}", workflows::diff(&shown, old, &text));
        return Err(CliError::Usage(format!(
            "{} exists and differs from the {} template (diff above); keep it, or pass --force to overwrite it",
            shown.display(),
            args.kind.name()
        )));
    }
    let mut written = Vec::new();
    if file.is_none() && ctx.config.is_none() {
        write_config(&workdir.join("fanout.yml"), &agent)?;
        written.push("fanout.yml".to_owned());
    }
    if up_to_date {
        errln!("{}: already up to date", shown.display());
    } else {
        workflows::write(&path, &text)?;
        errln!("wrote {}", shown.display());
        written.push(shown.display().to_string());
    }
    if !written.is_empty() {
        errln!("{}", next_steps(args.kind, &agent, &written));
    }
    Ok(0)
}

/// Write the scaffolded `fanout.yml` (never over an existing file).
fn write_config(path: &std::path::Path, agent: &InitAgent) -> Result<(), CliError> {
    use std::io::Write;
    let text = config_text(agent).map_err(CliError::Fatal)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| CliError::Fatal(format!("{}: {e}", path.display())))?;
    let found = if agent.found.is_empty() {
        "none".to_owned()
    } else {
        agent.found.join(", ")
    };
    errln!(
        "wrote fanout.yml (agent: {}; agent CLIs on PATH: {found})",
        agent.name
    );
    Ok(())
}

/// `--check`: 0 when the file matches the template, else 1 with a diff.
fn check(kind: Kind, shown: &std::path::Path, existing: Option<&str>, text: &str) -> i32 {
    match existing {
        Some(old) if old == text => {
            errln!("{}: matches the {} template", shown.display(), kind.name());
            0
        }
        Some(old) => {
            out!("{}", workflows::diff(shown, old, text));
            errln!(
                "{}: differs from the {} template (run `fanout init --kind {} --force` to reset it)",
                shown.display(),
                kind.name(),
                kind.name()
            );
            1
        }
        None => {
            errln!(
                "{}: missing (run `fanout init --kind {}` to write it)",
                shown.display(),
                kind.name()
            );
            1
        }
    }
}
