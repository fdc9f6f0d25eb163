//! The command line of a built-in adapter (claude, codex, aider, architect): the
//! adapter's own arguments, the definition's `args:` with placeholders expanded, the
//! `FANOUT_*` variables and the definition's `env:`.

use super::command::lookup;
use super::template::expand;
use super::{AgentSpec, CommandLine, WorkerContext, fanout_env};

/// A built-in adapter's command line: `head` (the adapter's own arguments), then the
/// definition's extra `args:` (placeholders expanded), then `tail`; the environment is
/// the `FANOUT_*` variables, the adapter's `defaults`, then the definition's `env:`.
pub(crate) fn command_line(
    spec: &AgentSpec,
    ctx: &WorkerContext<'_>,
    mut head: Vec<String>,
    tail: Vec<String>,
    defaults: Vec<(String, String)>,
) -> Result<CommandLine, String> {
    let mut vars = lookup(ctx);
    for a in &spec.args {
        head.push(expand(a, &mut vars)?);
    }
    head.extend(tail);
    let mut env = fanout_env(ctx);
    env.extend(defaults);
    env.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(CommandLine {
        program: spec.program.clone(),
        args: head,
        env,
    })
}
