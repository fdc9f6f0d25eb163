//! `fanout plan`: print the plan without running anything.

use std::path::PathBuf;

use clap::Args;

use super::common::{CliError, Context, PlanArgs};
use crate::util::out::{errln, outln};

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # What `fanout run` would do, without doing it
  fanout plan -w 4 \"fix the flaky login test\"
  # The plan as JSON, for a script
  fanout plan --json -t \"update deps\" -t \"fix lints\"
  # Matrix mode: write the plan for the worker jobs (an empty one is fine on a schedule)
  fanout plan --plan-file plan.json --allow-empty";

/// `fanout plan`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
pub struct PlanCommand {
    /// Plan flags.
    #[command(flatten)]
    pub plan: PlanArgs,

    /// Write the plan as JSON to this file (for `fanout worker` and `fanout aggregate`).
    #[arg(long, value_name = "PATH")]
    pub plan_file: Option<PathBuf>,

    /// Write the matrix outputs (`matrix`, `count`, chunks) to `$GITHUB_OUTPUT`
    /// (default: whenever `$GITHUB_OUTPUT` is set).
    #[arg(long)]
    pub github_output: bool,

    /// No task is not an error: the plan is empty (count 0), for scheduled workflows.
    #[arg(long)]
    pub allow_empty: bool,
}

/// Entry point of `fanout plan`.
pub fn plan(ctx: &Context, cmd: &PlanCommand) -> Result<i32, CliError> {
    let args = &cmd.plan;
    let repo = ctx.repo()?;
    let (file, path) = ctx.load_config(&repo)?;
    let tend_file = args.tend_file.as_ref();
    let night = tend_file
        .map(|p| crate::ops::tend::read(&ctx.path(p)))
        .transpose()?;
    let settings = ctx.resolve(&file, &path, args, cmd.allow_empty, night)?;
    let run_id = super::common::run_id(args.run_id.as_deref())?;
    let base = repo.resolve_base(&settings.base)?;
    for note in &settings.notes {
        errln!("fanout: note: {note}");
    }
    let mut plan = crate::plan::assign::build(&settings, base, &run_id);
    plan.check_arguments().map_err(CliError::Usage)?;
    // What the aggregate job publishes with travels in the plan, under its digest.
    plan.fanin =
        Some(crate::plan::FaninSettings::read(&file, &repo.workdir).map_err(CliError::Usage)?);
    let outputs = crate::actions::outputs::output_file();
    if outputs.is_some() || cmd.github_output {
        // Check the matrix limits before writing anything.
        crate::plan::matrix::matrix_chunks(&plan).map_err(CliError::Usage)?;
    }
    let mut plan_sha256 = None;
    if let Some(path) = &cmd.plan_file {
        let path = ctx.path(path);
        let mut json = serde_json::to_vec_pretty(&plan).expect("plan serializes");
        json.push(b'\n');
        std::fs::write(&path, &json)
            .map_err(|e| CliError::Fatal(format!("--plan-file {}: {e}", path.display())))?;
        plan_sha256 = Some(crate::util::sha256_hex(&json));
    }
    if let Some(out) = outputs {
        crate::actions::outputs::write_matrix_outputs(&out, &plan).map_err(CliError::Fatal)?;
        if let Some(sha) = &plan_sha256 {
            crate::actions::outputs::write_output(&out, "plan-sha256", sha)
                .map_err(|e| CliError::Fatal(format!("{}: {e}", out.display())))?;
        }
    } else if cmd.github_output {
        return Err(CliError::Usage(
            "--github-output: $GITHUB_OUTPUT is not set".into(),
        ));
    }
    if args.json {
        crate::util::out::stdout_json(&plan);
        return Ok(0);
    }
    outln!(
        "run {}: {}; {}, base {}{}",
        plan.run_id,
        plan.shape(),
        plan.agents_label(),
        crate::util::short(&plan.base.commit),
        plan.base
            .branch
            .as_ref()
            .map(|b| format!(" ({b})"))
            .unwrap_or_default()
    );
    let width = plan.workers.iter().map(|w| w.branch.chars().count()).max();
    let width = width.unwrap_or(0).max("BRANCH".len());
    outln!("  {:<4} {:<16} {:<width$}  TASK", "#", "MODEL", "BRANCH");
    for w in &plan.workers {
        outln!(
            "  #{:<3} {:<16} {:<width$}  {}",
            w.id,
            w.model_cell(plan.several_agents()),
            w.branch,
            w.task.prompt.lines().next().unwrap_or("")
        );
    }
    Ok(0)
}
