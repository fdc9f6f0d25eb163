//! `fanout run`: plan → worktrees → supervised agents → harvest → report
//! ([`crate::ops::go`]), then the integration branch and publishing when asked.

use clap::Args;

use super::common::{CliError, Context, PlanArgs, PublishArgs, dry_run_needs_publish};
use crate::config::PublishWhen;
use crate::ops::go::{Job, Request, go};
use crate::publish::report::check_publishing;
use crate::report::next::{Hints, next_steps};
use crate::report::progress::Style;
use crate::report::table::{pr_table, table};
use crate::run::attempt::push_record;
use crate::run::results::RunReport;
use crate::secret::Secrets;
use crate::util::out::{errln, out, outln};

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # Three attempts at one task, with the agent fanout.yml names
  fanout run \"fix the flaky login test\"
  # Two tasks on Claude Code, 20 minutes each at most, then open their pull requests
  fanout run --agent claude --timeout-per-worker 20m --publish -t \"update deps\" -t \"fix lints\"
  # Every task on two models; keep one winner per task
  fanout run --cross --models gpt-4o,o3 --select-best \"speed up the parser\"";

/// `fanout run`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
pub struct RunArgs {
    /// Plan flags.
    #[command(flatten)]
    pub plan: PlanArgs,

    /// No live progress bars (plain log lines), and no what-next lines after the table.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// No task is not an error: say so and do nothing (for scheduled workflows).
    #[arg(long)]
    pub allow_empty: bool,

    /// After the run, push successful branches and open or update their pull requests.
    #[arg(long)]
    pub publish: bool,

    /// With --publish: `as-ready` publishes each worker as soon as it has finished,
    /// while the others still run; `end` once the run is over (default: fanout.yml's
    /// `publish.when`, else `end`).
    #[arg(long, value_enum, value_name = "WHEN", requires = "publish")]
    pub publish_when: Option<PublishWhen>,

    /// Also build one integration branch merging every success that merges cleanly
    /// (in worker-id order), and with --publish open its pull request.
    #[arg(long)]
    pub integrate: bool,

    /// Publishing flags (with --publish).
    #[command(flatten, next_help_heading = "Publishing (with --publish)")]
    pub publish_args: PublishArgs,
}

/// What GitHub says before tonight's plan ([`crate::ops::tend`]): `--tend-file`'s,
/// else read now when the run publishes and the config asks for it (issues as tasks,
/// tending), before any agent starts.
fn tonight(
    ctx: &Context,
    args: &RunArgs,
    (repo, file, path): (
        &crate::repo::UserRepo,
        &crate::config::ConfigFile,
        &std::path::Path,
    ),
    flags: Option<&crate::publish::report::PublishFlags>,
) -> Result<Option<crate::plan::night::NightInputs>, CliError> {
    if let Some(p) = &args.plan.tend_file {
        return crate::ops::tend::read(&ctx.path(p)).map(Some);
    }
    let Some(flags) = flags.filter(|f| crate::ops::tend::wanted(file, f)) else {
        return Ok(None);
    };
    let first = ctx.resolve(file, path, &args.plan, true, None)?;
    let record = push_record(repo, first.publish_remote.clone());
    check_publishing(flags, Some(&record))?;
    let night = crate::ops::tend::night(repo, file, &first, flags, Some(&record))?;
    for note in &night.notes {
        errln!("fanout: warning: {note}");
    }
    Ok(Some(night))
}

/// Entry point of `fanout run`. Everything publishing needs is checked, and the
/// repository's remotes recorded, before the first worker starts; the config file is
/// read once, then (like the report) kept in memory — nothing an agent could rewrite
/// is read again.
pub fn run(ctx: &Context, args: &RunArgs, secrets: Secrets) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let (file, path) = ctx.load_config(&repo)?;
    dry_run_needs_publish(&args.publish_args, args.publish)?;
    let flags = args.publish.then(|| args.publish_args.flags(&secrets));
    let night = tonight(ctx, args, (&repo, &file, &path), flags.as_ref())?;
    let settings = ctx.resolve(&file, &path, &args.plan, args.allow_empty, night)?;
    if settings.tasks.is_empty() {
        errln!("fanout: no task to run (none given, no `tasks:` in fanout.yml); nothing done");
        return Ok(crate::exit::SUCCESS);
    }
    let run_id = super::common::run_id(args.plan.run_id.as_deref())?;
    let base = repo.resolve_base(&settings.base)?;
    for warning in crate::ops::run::check_agent(&settings)? {
        errln!("fanout: warning: {warning}");
    }
    for note in &settings.notes {
        errln!("fanout: note: {note}");
    }
    let plan = crate::plan::assign::build(&settings, base, &run_id);
    plan.check_arguments().map_err(CliError::Usage)?;
    // A dry run publishes nothing while the run goes on: it says what the end would do.
    let as_ready = args.publish_when.or(file.publish.when) == Some(PublishWhen::AsReady)
        && !args.publish_args.dry_run;
    let outcome = go(Request {
        repo: &repo,
        file: &file,
        job: Job::Fresh {
            settings: &settings,
            plan,
            as_ready,
        },
        publish: flags,
        integrate: args.integrate,
        style: Style::detect(args.quiet),
        secrets,
    })?;
    if let Some(report) = &outcome.report {
        print(args, report, &outcome.dir);
    }
    Ok(outcome.code)
}

/// The report as `args` ask: JSON, else the table (and the pull requests, the next
/// steps).
fn print(args: &RunArgs, report: &RunReport, run_dir: &std::path::Path) {
    if args.plan.json {
        crate::util::out::stdout_json(report);
        return;
    }
    out!("\n{}", table(&report.results));
    if args.publish && !args.publish_args.dry_run {
        out!("\n{}", pr_table(report));
    }
    if args.quiet {
        outln!("\nresults: {}", run_dir.join("results.json").display());
    } else {
        let hints = Hints {
            dir: None,
            publish: !args.publish,
        };
        out!("\n{}", next_steps(report, run_dir, hints));
    }
}
