//! `fanout init`: write one of fanout's workflow templates
//! ([`crate::actions::workflows`]) into `.github/workflows/`, rendered for the agent
//! ([`crate::ops::init`]: `--agent`, fanout.yml's, else the first agent CLI on PATH),
//! and `fanout.yml` when the repository has none; then say what is left to do on
//! GitHub. With `--check`, report what of the template the workflow no longer holds
//! (the user's additions are theirs). A file that lacks part of the template is never
//! overwritten without `--force`: it may hold the user's edits; an existing
//! `fanout.yml` is never touched. What init writes is noted in the repository's git
//! directory, so the first run does not call it the user's uncommitted changes.

use std::path::PathBuf;

use clap::Args;

use super::common::{CliError, Context};
use crate::actions::workflows::{self, DEFAULT_ACTION, Kind};
use crate::ops::init::{InitAgent, choose_agent, config_text, next_steps};
use crate::util::out::{errln, out, outln};

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
    /// Check the workflow file instead of writing it: exit 0 when it holds everything
    /// the template says (steps, inputs and comments of your own besides), 1 naming
    /// what differs, or when the file is missing.
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
        Some(p) => ctx.path(p),
        None => workdir
            .join(".github/workflows")
            .join(format!("fanout-{}.yml", args.kind.name())),
    };
    let existing = workflows::read(&path)?;
    let shown = args.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!(".github/workflows/fanout-{}.yml", args.kind.name()))
    });
    let drift = match existing.as_deref() {
        Some(old) => Some(
            workflows::drift(&text, old)
                .map_err(|e| CliError::Usage(format!("{}: {e}", shown.display())))?,
        ),
        None => None,
    };
    if args.check {
        return Ok(check(args.kind, &shown, drift.as_deref()));
    }
    // Holds the whole template (the user's additions besides): left as it is.
    let up_to_date = drift.as_ref().is_some_and(Vec::is_empty);
    if let Some(lines) = drift.as_ref().filter(|_| !up_to_date && !args.force) {
        print_drift(&shown, lines);
        return Err(CliError::Usage(format!(
            "{} exists and differs from the {} template (above); keep it, or pass --force to overwrite it",
            shown.display(),
            args.kind.name()
        )));
    }
    let mut written = Vec::new();
    if file.is_none() && ctx.config.is_none() {
        let config = workdir.join("fanout.yml");
        let text = write_config(&config, &agent)?;
        record(&workdir, &config, &text);
        written.push("fanout.yml".to_owned());
    }
    if up_to_date {
        errln!("{}: already up to date", shown.display());
    } else {
        workflows::write(&path, &text)?;
        record(&workdir, &path, &text);
        errln!("wrote {}", shown.display());
        written.push(shown.display().to_string());
    }
    if !written.is_empty() {
        errln!("{}", next_steps(args.kind, &agent, &written));
    }
    Ok(0)
}

/// Note that init wrote `text` to `path` (in the repository at `workdir`), so the
/// next run does not count it among the user's uncommitted changes. Best effort: the
/// note only spares a warning.
fn record(workdir: &std::path::Path, path: &std::path::Path, text: &str) {
    if let Ok(repo) = crate::repo::UserRepo::discover(workdir)
        && let Ok(rel) = path.strip_prefix(&repo.workdir)
        && let Err(e) = repo.note_written_by_init(rel, text.as_bytes())
    {
        tracing::debug!("noting {} as init's: {e}", path.display());
    }
}

/// Write the scaffolded `fanout.yml` (never over an existing file); what it wrote.
fn write_config(path: &std::path::Path, agent: &InitAgent) -> Result<String, CliError> {
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
    Ok(text)
}

/// Print what of the template `shown` lacks, one line each.
fn print_drift(shown: &std::path::Path, lines: &[String]) {
    for l in lines {
        outln!("{}: {l}", shown.display());
    }
}

/// `--check`: 0 when the file holds the whole template (with whatever the user
/// added), else 1, saying what of the template it lacks.
fn check(kind: Kind, shown: &std::path::Path, drift: Option<&[String]>) -> i32 {
    match drift {
        Some([]) => {
            errln!("{}: holds the {} template", shown.display(), kind.name());
            0
        }
        Some(lines) => {
            print_drift(shown, lines);
            errln!(
                "{}: differs from the {} template (above); edit it back, or run `fanout init --kind {} --force` to reset it (your additions go too)",
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
