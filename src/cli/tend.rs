//! `fanout tend`: read what GitHub says before tonight's plan — tasks from labelled
//! issues, fanout's open pull requests to tend (failed checks, conflicts: rebased
//! when git can) or left to people — and write it for `fanout run --tend-file`
//! ([`crate::ops::tend`]). For a run that has no credentials, as the action's run
//! step, which starts after this one.

use std::path::PathBuf;

use clap::Args;

use super::common::{CliError, Context, PlanArgs, PublishArgs};
use crate::run::attempt::push_record;
use crate::secret::Secrets;
use crate::util::out::errln;

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # Tonight's inputs for the tasks of fanout.yml, then the night without a token
  fanout tend --out tend.json
  # With another config, against GitHub Enterprise
  fanout tend --config nightly.yml --api-url https://ghe.example.com/api/v3 --out tend.json";

/// `fanout tend`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
pub struct TendArgs {
    /// Where to write what was read (JSON, for `fanout run --tend-file`).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,

    /// Plan flags (which tasks tonight has).
    #[command(flatten)]
    pub plan: PlanArgs,

    /// Publishing flags (where GitHub is, the credentials).
    #[command(flatten, next_help_heading = "Publishing")]
    pub publish: PublishArgs,
}

/// Entry point of `fanout tend`.
pub fn tend(ctx: &Context, args: &TendArgs, secrets: &Secrets) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let (file, path) = ctx.load_config(&repo)?;
    let settings = ctx.resolve(&file, &path, &args.plan, true, None)?;
    let record = push_record(&repo, settings.publish_remote.clone());
    let flags = args.publish.flags(secrets);
    let night = if crate::ops::tend::wanted(&file, &flags) {
        crate::ops::tend::night(&repo, &file, &settings, &flags, Some(&record))?
    } else {
        errln!(
            "fanout: tend: nothing to read before the night (no tasks_from, and no stable branches with tending: publish.branch, --branch, tend.max_attempts)"
        );
        Default::default()
    };
    for note in &night.notes {
        errln!("fanout: warning: {note}");
    }
    let mut json = serde_json::to_vec_pretty(&night).expect("serializes");
    json.push(b'\n');
    let out = ctx.path(&args.out);
    crate::util::write_atomic(&out, &json)
        .map_err(|e| CliError::Fatal(format!("--out {}: {e}", out.display())))?;
    errln!(
        "fanout: tend: {} task(s) from issues, {} pull request(s) to run again, {} settled; written to {}",
        night.issues.len(),
        night.tend.len(),
        night.settled.len(),
        out.display()
    );
    Ok(crate::exit::SUCCESS)
}
