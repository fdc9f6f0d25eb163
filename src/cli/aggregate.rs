//! `fanout aggregate`: matrix mode's fan-in. Reads every worker job's
//! `fanout-result-<id>/`, verifies and imports each branch bundle (only the expected
//! branch, based on the plan's base commit), recomputes what changed from git rather
//! than trusting the job's word, reports (summary, outputs) and publishes. A worker
//! job that died without a result is reported as failed, never silently missing. The
//! publish settings come from the plan (as the plan job read them), not from a
//! fanout.yml here ([`aggregate_settings`]).

use std::path::PathBuf;

use clap::Args;

use super::common::{CliError, Context, PublishArgs};
use crate::ops::matrix::{SettingsCheck, aggregate as run_aggregate, aggregate_settings};
use crate::ops::run::After;
use crate::report::table::{pr_table, table};
use crate::secret::Secrets;
use crate::util::out::{errln, out};

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # Collect the worker jobs' artifacts and report
  fanout aggregate --plan plan.json --from artifacts
  # …and open the pull requests, plus one integrating every success
  fanout aggregate --plan plan.json --from artifacts --publish --integrate";

/// `fanout aggregate`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
pub struct AggregateArgs {
    /// The plan file.
    #[arg(long, value_name = "PATH")]
    pub plan: PathBuf,
    /// The plan file's SHA-256 as the plan job printed it (`plan-sha256`): a plan file
    /// with any other digest is refused (exit 2). In GitHub Actions, `--publish` needs
    /// it.
    #[arg(long, value_name = "HEX")]
    pub plan_sha256: Option<String>,
    /// Directory holding the downloaded `fanout-result-*` artifacts.
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
    /// Push successful branches and open or update their pull requests.
    #[arg(long)]
    pub publish: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also build one integration branch of every success that merges cleanly.
    #[arg(long)]
    pub integrate: bool,
    /// Publishing flags (with --publish).
    #[command(flatten, next_help_heading = "Publishing (with --publish)")]
    pub publish_args: PublishArgs,
}

/// Entry point of `fanout aggregate`.
pub fn aggregate(ctx: &Context, args: &AggregateArgs, secrets: &Secrets) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let plan = ctx.plan_file_checked(&args.plan, args.plan_sha256.as_deref())?;
    let file = aggregate_settings(
        &plan,
        || ctx.load_config(&repo).map(|(file, _)| file),
        SettingsCheck {
            publish: args.publish,
            digest_checked: args.plan_sha256.is_some(),
            in_actions: crate::util::in_actions(),
        },
    )?;
    if let (Some(config), Some(_)) = (&ctx.config, &plan.fanin) {
        errln!(
            "fanout: warning: --config {} is not read: the plan carries the settings the plan job read at the base commit",
            config.display()
        );
    }
    super::common::dry_run_needs_publish(&args.publish_args, args.publish)?;
    let flags = args.publish.then(|| args.publish_args.flags(secrets));
    let after = After {
        repo: &repo,
        file: &file,
        publish: flags.as_ref(),
        integrate: args.integrate,
    };
    let (report, _, code) = run_aggregate(&after, &plan, &ctx.path(&args.from))?;
    if args.json {
        crate::util::out::stdout_json(&report);
    } else {
        out!("{}", table(&report.results));
        if args.publish && !args.publish_args.dry_run {
            out!("\n{}", pr_table(&report));
        }
    }
    Ok(code)
}
