//! fanout's workflow templates (`templates/workflows/`, embedded in the binary), for
//! `fanout init`: rendering one for an action reference, checking that the file in
//! `.github/workflows/` still holds what the template says ([`drift`]), and writing it.
//!
//! The templates are minijinja templates (strict: an unknown variable is an error)
//! that are also workflow files the linters pass as they are: their only template
//! syntax is line statements starting `#%` (YAML comments) and, in the included
//! `agent-install.j2`, `[[ variables ]]` (`{{ }}` is left to GitHub's `${{ }}`).
//! Rendered for its agents (the run's and those tasks name), a workflow installs
//! their CLIs before each step that runs them and passes only their providers' keys;
//! the action reference (`--action`) replaces the default one. fanout owns what the
//! template says, the user what they add to the file (a step, an input, comments);
//! a file that lacks part of the template is never overwritten without `--force`: it
//! may hold the user's edits.

use std::path::Path;

use clap::ValueEnum;
use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, UndefinedBehavior, context};

use crate::agent::preflight::AgentCli;
use crate::exit::Failure;

/// The action reference the templates are written with.
pub const DEFAULT_ACTION: &str = "fanout-dev/fanout@v0";

/// Which workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Plan, one matrix job per worker (read-only), an aggregate job that publishes.
    Matrix,
    /// Every worker on one runner, in its own worktree; publishes.
    Local,
    /// Scheduled maintenance: the config's tasks every night; publishes.
    Nightly,
}

impl Kind {
    /// The template's text.
    pub fn template(self) -> &'static str {
        match self {
            Kind::Matrix => include_str!("../../templates/workflows/matrix.yml"),
            Kind::Local => include_str!("../../templates/workflows/local.yml"),
            Kind::Nightly => include_str!("../../templates/workflows/nightly.yml"),
        }
    }

    /// The workflow's `name:`, as the Actions tab shows it.
    pub fn workflow_name(self) -> &'static str {
        match self {
            Kind::Matrix => "fanout",
            Kind::Local => "fanout (local)",
            Kind::Nightly => "fanout (nightly)",
        }
    }

    /// The kind's name (`matrix`, `local`, `nightly`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Matrix => "matrix",
            Kind::Local => "local",
            Kind::Nightly => "nightly",
        }
    }
}

/// The agents a workflow is written for: the built-in CLIs it installs, and whether
/// some agent is none of them (your own, or a built-in run by another program).
#[derive(Debug, Clone, Default)]
pub struct ForAgents {
    /// Built-in agent CLIs run by their own programs: each installed, its key passed.
    pub clis: Vec<&'static AgentCli>,
    /// Some agent is not one of `clis`: both keys are passed, and a comment says to
    /// install it.
    pub other: bool,
}

impl ForAgents {
    /// One built-in CLI, or (`None`) an agent that is not one.
    #[cfg(test)]
    pub fn one(cli: Option<&'static AgentCli>) -> ForAgents {
        ForAgents {
            clis: cli.into_iter().collect(),
            other: cli.is_none(),
        }
    }

    /// The provider keys the agents read (both when one is not a built-in CLI).
    pub fn secrets(&self) -> Vec<&'static str> {
        const BOTH: [&str; 2] = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];
        if self.other || self.clis.is_empty() {
            return BOTH.to_vec();
        }
        BOTH.into_iter()
            .filter(|k| self.clis.iter().any(|c| c.secrets.contains(k)))
            .collect()
    }
}

/// The workflow text for `kind` using the action `action`, for `agents`: an install
/// step for each built-in CLI and its provider's key (both keys, and a comment instead
/// of an install step, for an agent that is not a built-in CLI run by its own program).
pub fn render(kind: Kind, action: &str, agents: &ForAgents) -> Result<String, String> {
    let ok = !action.is_empty()
        && !action
            .chars()
            .any(|c| c.is_whitespace() || c == '#' || c == '\'' || c == '"')
        && (action.starts_with("./") || action.starts_with("docker://") || action.contains('@'));
    if !ok {
        return Err(format!(
            "--action {action:?}: expected `owner/repo@ref` or a local `./path`"
        ));
    }
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    let syntax = SyntaxConfig::builder()
        .variable_delimiters("[[", "]]")
        .line_statement_prefix("#%")
        .keep_trailing_newline(true)
        .build()
        .map_err(|e| e.to_string())?;
    env.set_syntax(syntax);
    let fail = |e: minijinja::Error| format!("workflow template {}: {e}", kind.name());
    env.add_template("agent-install.j2", AGENT_INSTALL)
        .map_err(fail)?;
    env.add_template("workflow", kind.template())
        .map_err(fail)?;
    let installs: Vec<minijinja::Value> = agents
        .clis
        .iter()
        .map(|c| context! { what => c.what, install => c.install })
        .collect();
    let text = env
        .get_template("workflow")
        .and_then(|t| {
            t.render(context! {
                installs => installs,
                other => agents.other || agents.clis.is_empty(),
                secrets => agents.secrets(),
            })
        })
        .map_err(fail)?;
    Ok(text.replace(
        &format!("uses: {DEFAULT_ACTION}"),
        &format!("uses: {action}"),
    ))
}

/// The install step the templates include before each step that runs the agent.
const AGENT_INSTALL: &str = include_str!("../../templates/workflows/agent-install.j2");

/// What of `template` (a rendered workflow) the workflow `file` does not hold: the
/// lines `init --check` reports, one per difference, each naming the place in YAML
/// terms (`jobs.fanout.steps[fanout].with.workers`). Only what the template says is
/// checked — every key it sets with its value, every list item in its order — so the
/// user's additions (a step of their own, another input, more `env:`) are no drift,
/// nor are comments and layout. A `uses:` may name another ref of the same action
/// (a pin to a commit, a newer version). Empty when the file holds the whole template.
pub fn drift(template: &str, file: &str) -> Result<Vec<String>, String> {
    let parse = |text: &str| serde_saphyr::from_str::<serde_json::Value>(text);
    let t = parse(template).map_err(|e| format!("the template: {e}"))?;
    let f = parse(file).map_err(|e| format!("not a YAML file fanout can read: {e}"))?;
    let mut out = Vec::new();
    contained(&t, &f, "", &mut out);
    Ok(out)
}

/// Add to `out` each way `file` (at `path`) lacks something of `template`.
fn contained(
    template: &serde_json::Value,
    file: &serde_json::Value,
    path: &str,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    let here = |p: &str| {
        if p.is_empty() {
            "the file".to_owned()
        } else {
            p.to_owned()
        }
    };
    match (template, file) {
        // A bare key (`workflow_dispatch:`): its presence is all the template says.
        (Value::Null, _) => {}
        (Value::Object(t), Value::Object(f)) => {
            for (key, tv) in t {
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match f.get(key) {
                    Some(fv) => contained(tv, fv, &at, out),
                    None => out.push(format!("{at}: missing (the template has {})", brief(tv))),
                }
            }
        }
        (Value::Array(t), Value::Array(f)) => items_contained(t, f, path, out),
        (Value::String(t), Value::String(f)) if path.ends_with(".uses") && same_action(t, f) => {}
        (t, f) if t == f => {}
        (t, f) => out.push(format!(
            "{}: {} (the template has {})",
            here(path),
            brief(f),
            brief(t)
        )),
    }
}

/// The template's list items, in order, among the file's (which may hold more).
/// An item that is not there whole is looked for by its name (a step's `id`, `name`
/// or action) to say what of it differs.
fn items_contained(
    template: &[serde_json::Value],
    file: &[serde_json::Value],
    path: &str,
    out: &mut Vec<String>,
) {
    let holds = |t: &serde_json::Value, f: &serde_json::Value| {
        let mut d = Vec::new();
        contained(t, f, "", &mut d);
        d.is_empty()
    };
    let mut next = 0;
    for (i, t) in template.iter().enumerate() {
        let label = item_label(t).unwrap_or_else(|| i.to_string());
        let at = format!("{path}[{label}]");
        if let Some(j) = file[next..].iter().position(|f| holds(t, f)) {
            next += j + 1;
            continue;
        }
        let named =
            item_label(t).and_then(|l| file.iter().find(|f| item_label(f).as_deref() == Some(&l)));
        match named {
            Some(f) if holds(t, f) => out.push(format!("{at}: out of the template's order")),
            Some(f) => contained(t, f, &at, out),
            None => out.push(format!("{at}: missing (the template has {})", brief(t))),
        }
    }
}

/// What names a list item: a step's `id`, else its `name`, else the action it uses
/// (without the ref); a scalar item is its own name.
fn item_label(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Object(m) => ["id", "name", "uses"].iter().find_map(|k| {
            m.get(*k)
                .and_then(|v| v.as_str())
                .map(|s| s.split('@').next().unwrap_or(s).to_owned())
        }),
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => Some(v.to_string()),
        _ => None,
    }
}

/// Two `uses:` of one action (`owner/repo[/path]@ref`), whatever their refs.
fn same_action(a: &str, b: &str) -> bool {
    match (a.split_once('@'), b.split_once('@')) {
        (Some((a, _)), Some((b, _))) => a == b,
        _ => false,
    }
}

/// A value as a line can show it: a scalar as YAML would, a mapping or list in short.
fn brief(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(_) | serde_json::Value::Array(_) => {
            let s = v.to_string();
            if s.chars().count() > 60 {
                format!("{}…", s.chars().take(60).collect::<String>())
            } else {
                s
            }
        }
        serde_json::Value::Null => "nothing".to_owned(),
        other => other.to_string(),
    }
}

/// The workflow file at `path`, when there is one.
pub fn read(path: &Path) -> Result<Option<String>, Failure> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Failure::Fatal(format!("{}: {e}", path.display()))),
    }
}

/// Write `text` to `path` (its directory made first), through a temporary file and a
/// rename: an interrupted write never leaves half a workflow.
pub fn write(path: &Path, text: &str) -> Result<(), Failure> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::Fatal(format!("{}: {e}", dir.display())))?;
    }
    let tmp = path.with_extension("yml.fanout-tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Failure::Fatal(format!("{}: {e}", path.display()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_uses_the_default_action_and_renders_another() {
        for kind in [Kind::Matrix, Kind::Local, Kind::Nightly] {
            let t = kind.template();
            assert!(
                t.contains(&format!("uses: {DEFAULT_ACTION}")),
                "{kind:?} template does not use {DEFAULT_ACTION}"
            );
            let r = render(kind, "./.fanout-action", &ForAgents::default()).unwrap();
            assert!(!r.contains(DEFAULT_ACTION), "{kind:?}");
            assert!(r.contains("uses: ./.fanout-action"), "{kind:?}");
            // Inputs reach the action through `with:`, never interpolated into shell text.
            for line in r.lines().filter(|l| l.trim_start().starts_with("run:")) {
                assert!(!line.contains("${{"), "{kind:?}: {line}");
            }
        }
    }

    #[test]
    fn each_agent_job_installs_the_agent_and_gets_only_its_key() {
        use crate::agent::preflight::AGENT_CLIS;
        for kind in [Kind::Matrix, Kind::Local, Kind::Nightly] {
            let jobs = if kind == Kind::Matrix { 4 } else { 1 };
            for cli in AGENT_CLIS.iter().map(Some).chain([None]) {
                let r = render(kind, DEFAULT_ACTION, &ForAgents::one(cli)).unwrap();
                let wf: serde_json::Value = serde_saphyr::from_str(&r)
                    .unwrap_or_else(|e| panic!("{kind:?} {cli:?}: {e}\n{r}"));
                assert!(wf["jobs"].is_object(), "{kind:?}");
                assert!(!r.contains("#%") && !r.contains("[["), "{kind:?}: {r}");
                let installs = r.matches("      - name: Install ").count();
                match cli {
                    Some(c) => {
                        assert_eq!(installs, jobs, "{kind:?} {}", c.name);
                        assert_eq!(r.matches(&format!("run: {}", c.install)).count(), jobs);
                        for key in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"] {
                            let passed = r.contains(&format!("{key}: ${{{{ secrets.{key} }}}}"));
                            assert_eq!(
                                passed,
                                c.secrets.contains(&key),
                                "{kind:?} {} {key}",
                                c.name
                            );
                        }
                    }
                    None => {
                        assert_eq!(installs, 0, "{kind:?}");
                        assert!(r.contains("ANTHROPIC_API_KEY") && r.contains("OPENAI_API_KEY"));
                    }
                }
            }
        }
    }

    #[test]
    fn bad_action_refs_are_refused() {
        for bad in ["", "owner/repo", "a b@v1", "x@v1 # c"] {
            let e = render(Kind::Local, bad, &ForAgents::default()).unwrap_err();
            assert!(e.starts_with("--action"), "{bad}: {e}");
        }
        assert!(render(Kind::Local, "me/fork@main", &ForAgents::default()).is_ok());
    }

    #[test]
    fn matrix_template_keeps_write_permissions_in_the_aggregate_job_only() {
        let wf: serde_json::Value = serde_saphyr::from_str(
            &render(Kind::Matrix, DEFAULT_ACTION, &ForAgents::default()).unwrap(),
        )
        .unwrap();
        assert_eq!(wf["permissions"], serde_json::json!({}));
        let jobs = wf["jobs"].as_object().unwrap();
        let names: Vec<&str> = jobs.keys().map(String::as_str).collect();
        // (serde_json's map is sorted)
        assert_eq!(
            names,
            ["aggregate", "plan", "work-1", "work-2", "work-3", "work-4"]
        );
        for (name, job) in jobs {
            let perms = job["permissions"].as_object().unwrap_or_else(|| {
                panic!("job {name} states no permissions");
            });
            let writes: Vec<&String> = perms
                .iter()
                .filter(|(_, v)| *v == "write")
                .map(|(k, _)| k)
                .collect();
            if name == "aggregate" {
                assert_eq!(writes, ["contents", "pull-requests"]);
            } else {
                assert!(writes.is_empty(), "job {name} may write: {writes:?}");
            }
        }
        // Each chunk's job runs only when the chunk is not empty, and aggregate waits for all.
        // Chunks run in order (waves of dependent tasks), each only when not empty.
        assert_eq!(jobs["work-1"]["if"], "needs.plan.outputs.count-1 != '0'");
        // A cancelled run starts no later wave and no aggregate: `!cancelled()`, never
        // `always()` (which runs even then).
        for i in 2..=4 {
            assert_eq!(
                jobs[&format!("work-{i}")]["if"],
                format!(
                    "${{{{ !cancelled() && needs.plan.result == 'success' && needs.plan.outputs.count-{i} != '0' }}}}"
                )
            );
            assert_eq!(
                jobs[&format!("work-{i}")]["needs"],
                serde_json::json!(["plan", format!("work-{}", i - 1)])
            );
        }
        assert_eq!(jobs["aggregate"]["needs"].as_array().unwrap().len(), 5);
        assert_eq!(
            jobs["aggregate"]["if"],
            "${{ !cancelled() && needs.plan.result == 'success' && needs.plan.outputs.count != '0' }}"
        );
        // `workers` caps the jobs at once: the plan job passes its step's
        // `max-parallel` on, and every chunk's matrix takes it.
        assert_eq!(
            jobs["plan"]["outputs"]["max-parallel"],
            "${{ steps.plan.outputs.max-parallel }}"
        );
        for i in 1..=4 {
            assert_eq!(
                jobs[&format!("work-{i}")]["strategy"]["max-parallel"],
                "${{ fromJSON(needs.plan.outputs.max-parallel) }}",
                "work-{i}"
            );
        }
    }

    #[test]
    fn a_workflow_for_several_agents_installs_each_and_passes_their_keys() {
        use crate::agent::preflight::agent_cli;
        let claude = agent_cli("claude").unwrap();
        let codex = agent_cli("codex").unwrap();
        let both = ForAgents {
            clis: vec![claude, codex],
            other: false,
        };
        assert_eq!(both.secrets(), ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]);
        let r = render(Kind::Matrix, DEFAULT_ACTION, &both).unwrap();
        for cli in [claude, codex] {
            // Once before each of the four worker jobs' fanout step.
            assert_eq!(r.matches(&format!("run: {}", cli.install)).count(), 4);
        }
        assert!(!r.contains("must be on PATH here"), "{r}");
        // An agent of the user's besides a built-in: its install is the user's to add.
        let mixed = ForAgents {
            clis: vec![codex],
            other: true,
        };
        let r = render(Kind::Local, DEFAULT_ACTION, &mixed).unwrap();
        assert_eq!(r.matches(&format!("run: {}", codex.install)).count(), 1);
        assert!(r.contains("must be on PATH here"), "{r}");
        assert!(r.contains("ANTHROPIC_API_KEY: ${{ secrets.ANTHROPIC_API_KEY }}"));
    }
}
