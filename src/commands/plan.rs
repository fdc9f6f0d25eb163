//! `fanout plan`: print the plan without running anything.

use crate::cli::PlanArgs;

use super::{CliError, Context};

/// Entry point of `fanout plan`.
pub fn plan(ctx: &Context, args: &PlanArgs) -> Result<i32, CliError> {
    let (repo, settings) = ctx.settings(args)?;
    let run_id = super::run_id(args.run_id.as_deref())?;
    let base = repo.resolve_base(&settings.base)?;
    let plan = crate::plan::build(&settings, base, &run_id);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&plan).expect("plan serializes")
        );
        return Ok(0);
    }
    println!(
        "run {}: {} worker run{}, {} at a time, agent {}, base {}{}",
        plan.run_id,
        plan.workers.len(),
        if plan.workers.len() == 1 { "" } else { "s" },
        plan.concurrency,
        plan.agent.name,
        crate::report::short(&plan.base.commit),
        plan.base
            .branch
            .as_ref()
            .map(|b| format!(" ({b})"))
            .unwrap_or_default()
    );
    for w in &plan.workers {
        println!(
            "  #{:<3} {:<16} {}  {}",
            w.id,
            w.model_label(),
            w.branch,
            w.task.prompt.lines().next().unwrap_or("")
        );
    }
    Ok(0)
}
