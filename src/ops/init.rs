//! `fanout init`'s work besides the workflow file ([`crate::actions::workflows`]):
//! which agent the files are written for, the `fanout.yml` it scaffolds when there is
//! none (`templates/fanout.yml.j2`, minijinja strict), and what is left for the user
//! to do on GitHub (secrets, the repository setting that lets workflows open pull
//! requests).

use std::ffi::OsStr;

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, UndefinedBehavior, context};

use crate::actions::workflows::{ForAgents, Kind};
use crate::agent::AgentSpec;
use crate::agent::preflight::{AgentCli, agent_cli, clis_on_path};
use crate::config::ConfigFile;

/// The agent `fanout init` writes for, and what it found.
#[derive(Debug, Clone)]
pub struct InitAgent {
    /// The agent's name (for `parallel_runs.agent`).
    pub name: String,
    /// What the workflow installs: this agent's CLI and those of the agents the
    /// file's tasks name (`tasks[].agent`).
    pub workflow: ForAgents,
    /// The agent CLIs on `PATH`.
    pub found: Vec<&'static str>,
}

/// `--agent`, else the agent `file` (the repository's `fanout.yml`, when there is one)
/// names, else the first agent CLI on `path`, else `claude`.
pub fn choose_agent(
    flag: Option<&str>,
    file: Option<&ConfigFile>,
    path: Option<&OsStr>,
) -> InitAgent {
    let found = clis_on_path(path);
    let name = flag
        .map(str::to_owned)
        .or_else(|| file.map(|f| f.parallel_runs.agent.clone()))
        .or_else(|| found.first().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "claude".to_owned());
    let defs = file.map(|f| f.agents.clone()).unwrap_or_default();
    // The built-in CLI an agent runs, with its default program (not a `binary:` of the user's).
    let cli_of = |name: &str, flag: bool| {
        AgentSpec::resolve(name, &defs, "fanout.yml", flag)
            .ok()
            .and_then(|spec| agent_cli(&spec.program).filter(|c| c.name == spec.adapter.program()))
    };
    let cli = cli_of(&name, flag.is_some());
    let mut workflow = ForAgents::default();
    let mut add = |c: Option<&'static AgentCli>| match c {
        Some(c) if !workflow.clis.iter().any(|x| x.name == c.name) => workflow.clis.push(c),
        Some(_) => {}
        None => workflow.other = true,
    };
    let tasks = file.map_or(&[][..], |f| &f.tasks[..]);
    // The run's agent, unless every task names its own.
    if tasks.is_empty()
        || tasks
            .iter()
            .any(|t| task_agent(t).is_none_or(|a| a == name))
    {
        add(cli);
    }
    for a in tasks.iter().filter_map(task_agent) {
        add(cli_of(a, false));
    }
    InitAgent {
        name,
        workflow,
        found,
    }
}

/// The agent a task of the file names, if any.
fn task_agent(t: &crate::config::TaskEntry) -> Option<&str> {
    match t {
        crate::config::TaskEntry::Detailed(d) => d.agent.as_deref().map(str::trim),
        crate::config::TaskEntry::Prompt(_) => None,
    }
}

/// The `fanout.yml` `fanout init` writes for `agent`.
pub fn config_text(agent: &InitAgent) -> Result<String, String> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .keep_trailing_newline(true)
        .build()
        .map_err(|e| e.to_string())?;
    env.set_syntax(syntax);
    env.add_template("fanout.yml", include_str!("../../templates/fanout.yml.j2"))
        .map_err(|e| e.to_string())?;
    env.get_template("fanout.yml")
        .and_then(|t| t.render(context! { agent => &agent.name, found => &agent.found }))
        .map_err(|e| format!("templates/fanout.yml.j2: {e}"))
}

/// What is left to do once the files are written: commit them, add the agent's
/// secrets, let workflows open pull requests, run it.
pub fn next_steps(kind: Kind, agent: &InitAgent, files: &[String]) -> String {
    let w = &agent.workflow;
    let secrets = w.secrets();
    let key = match &w.clis[..] {
        [c] if !w.other => format!("the key {} reads: {}", c.what, secrets.join(" or ")),
        [_, _, ..] if !w.other => format!(
            "the keys {} read: {}",
            w.clis
                .iter()
                .map(|c| c.what)
                .collect::<Vec<_>>()
                .join(" and "),
            secrets.join(" and ")
        ),
        _ => format!("your agent's model key ({})", secrets.join(" or ")),
    };
    let when = match kind {
        Kind::Nightly => "it also runs every night, on the `tasks:` of fanout.yml",
        _ => "give it tasks, one per line",
    };
    format!(
        "next:\n  1. commit {}\n  2. add a repository secret with {key}: Settings → Secrets and variables → Actions → New repository secret\n  3. let workflows open pull requests: Settings → Actions → General → Workflow permissions → \"Allow GitHub Actions to create and approve pull requests\"\n  4. run it: Actions → {} → Run workflow ({when})",
        files.join(" and "),
        kind.workflow_name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> ConfigFile {
        crate::config::parse(text, std::path::Path::new("fanout.yml")).unwrap()
    }

    fn installs(a: &InitAgent) -> Vec<&str> {
        a.workflow.clis.iter().map(|c| c.name).collect()
    }

    #[test]
    fn the_workflow_installs_every_agent_the_tasks_name() {
        let none = Some(std::ffi::OsStr::new("/nonexistent"));
        let f = file(
            "parallel_runs: {agent: claude}\ntasks:\n  - fix it\n  - {prompt: review it, agent: codex}\n",
        );
        let a = choose_agent(None, Some(&f), none);
        assert_eq!(a.name, "claude");
        assert_eq!(installs(&a), ["claude", "codex"]);
        assert!(!a.workflow.other);
        assert!(
            next_steps(Kind::Matrix, &a, &["x".into()]).contains(
                "the keys Claude Code and Codex read: ANTHROPIC_API_KEY and OPENAI_API_KEY"
            )
        );
        // Every task names its own agent: the run's is not installed.
        let f = file("tasks:\n  - {prompt: a, agent: codex}\n  - {prompt: b, agent: aider}\n");
        let a = choose_agent(None, Some(&f), none);
        assert_eq!(installs(&a), ["codex", "aider"]);
        // An agent of the user's among them: installed by the user (a comment says so).
        let f = file(
            "agents: {mine: {command: [m]}}\ntasks:\n  - {prompt: a, agent: mine}\n  - {prompt: b}\n",
        );
        let a = choose_agent(Some("codex"), Some(&f), none);
        assert_eq!(installs(&a), ["codex"]);
        assert!(a.workflow.other);
    }
}
