//! `fanout init`: write one of fanout's workflow templates
//! ([`crate::actions::workflows`]) into `.github/workflows/`, or with `--check` report
//! how the file there has drifted from the template. A file that exists and differs
//! is never overwritten without `--force`: it may hold the user's edits.

use std::path::PathBuf;

use clap::Args;

use super::common::{CliError, Context};
use crate::actions::workflows::{self, DEFAULT_ACTION, Kind};
use crate::util::out::{errln, out};

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # The matrix workflow
  fanout init
  # The nightly workflow, printed instead of written
  fanout init --kind nightly --stdout
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
}

/// Entry point of `fanout init`.
pub fn init(ctx: &Context, args: &InitArgs) -> Result<i32, CliError> {
    let text = workflows::render(args.kind, &args.action).map_err(CliError::Usage)?;
    if args.stdout {
        out!("{text}");
        return Ok(0);
    }
    let path = match &args.output {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => ctx.cwd.join(p),
        None => ctx
            .repo()?
            .workdir
            .join(".github/workflows")
            .join(format!("fanout-{}.yml", args.kind.name())),
    };
    let existing = workflows::read(&path)?;
    let shown = args.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!(".github/workflows/fanout-{}.yml", args.kind.name()))
    });
    if args.check {
        return Ok(match existing {
            Some(old) if old == text => {
                errln!(
                    "{}: matches the {} template",
                    shown.display(),
                    args.kind.name()
                );
                0
            }
            Some(old) => {
                out!("{}", workflows::diff(&shown, &old, &text));
                errln!(
                    "{}: differs from the {} template (run `fanout init --kind {} --force` to reset it)",
                    shown.display(),
                    args.kind.name(),
                    args.kind.name()
                );
                1
            }
            None => {
                errln!(
                    "{}: missing (run `fanout init --kind {}` to write it)",
                    shown.display(),
                    args.kind.name()
                );
                1
            }
        });
    }
    match existing {
        Some(old) if old == text => {
            errln!("{}: already up to date", shown.display());
            return Ok(0);
        }
        Some(old) if !args.force => {
            out!("{}", workflows::diff(&shown, &old, &text));
            return Err(CliError::Usage(format!(
                "{} exists and differs from the {} template (diff above); keep it, or pass --force to overwrite it",
                shown.display(),
                args.kind.name()
            )));
        }
        _ => {}
    }
    workflows::write(&path, &text)?;
    errln!("wrote {}", shown.display());
    Ok(0)
}
