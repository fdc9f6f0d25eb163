//! `fanout publish`: push each successful worker's branch of a finished run and open
//! or update its pull request ([`crate::publish::report`]); with `--dry-run`, say what
//! it would do ([`crate::publish::preview`]).

use std::path::PathBuf;

use clap::Args;

use super::common::{CliError, Context, PublishArgs};
use crate::publish::preview::render;
use crate::publish::report::{check_stable_prefix, load_report, preview_report, publish_report};
use crate::report::table::pr_table;
use crate::run::journal::Journal;
use crate::secret::Secrets;
use crate::store::runs::newest_with_results;
use crate::util::out::out;

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # Open or update a pull request per success of the newest run
  fanout publish
  # A given run, as drafts with a label, asking for a review
  fanout publish --run 20260101-120000-3fa2c1 --draft --label fanout --reviewer octocat
  # Say what would be pushed and opened, updated or closed (partial work too,
  # against another base branch), and do none of it
  fanout publish --dry-run --include partial --pr-base develop";

/// `fanout publish`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
pub struct PublishCommand {
    /// The run to publish (default: the newest run with results).
    #[arg(long = "run", value_name = "ID", conflicts_with = "results")]
    pub run: Option<String>,
    /// A results.json to publish instead of a run of this repository.
    #[arg(long, value_name = "FILE")]
    pub results: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Publishing flags.
    #[command(flatten)]
    pub publish: PublishArgs,
}

/// Entry point of `fanout publish`.
pub fn publish_command(
    ctx: &Context,
    args: &PublishCommand,
    secrets: &Secrets,
) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let (file, _) = ctx.load_config(&repo)?;
    // Where to push comes from the run's record of its remotes (taken when it
    // started), never from the repository's configuration now.
    let (path, record, record_run) = match &args.results {
        Some(p) => (ctx.path(p), None, None),
        None => {
            let id = match &args.run {
                Some(id) => id.clone(),
                None => newest_with_results(&repo.runs_dir()).ok_or_else(|| {
                    CliError::Usage("no finished run in this repository to publish".into())
                })?,
            };
            let run_dir = repo.run_dir(&id);
            let path = run_dir.join("results.json");
            if !path.is_file() {
                return Err(CliError::Usage(format!(
                    "--run {id}: no results.json (see `fanout status`)"
                )));
            }
            (
                path,
                Journal::load(&run_dir).ok().and_then(|j| j.push),
                Some(id),
            )
        }
    };
    let mut report = load_report(&path)?;
    if let Some(id) = record_run.as_deref()
        && report.run_id != id
    {
        return Err(CliError::Fatal(format!(
            "{}: the results of run {id} name run {:?}; fanout publishes a run's own branches only (nothing was pushed)",
            path.display(),
            report.run_id
        )));
    }
    if record_run.is_some() {
        check_stable_prefix(&file, &args.publish.flags(secrets), &report)?;
    }
    if args.publish.dry_run {
        let flags = args.publish.flags(secrets);
        let previews = preview_report(&repo, &file, &flags, record.as_ref(), &report)?;
        if args.json {
            crate::util::out::stdout_json(&previews);
        } else {
            out!("{}", render(&previews));
        }
        return Ok(crate::exit::SUCCESS);
    }
    let code = publish_report(
        &repo,
        &file,
        &args.publish.flags(secrets),
        record.as_ref(),
        &mut report,
        &path,
        &Default::default(),
    )?;
    if args.json {
        crate::util::out::stdout_json(&report);
    } else {
        out!("{}", pr_table(&report));
    }
    Ok(code)
}
