//! Before a run creates anything: does the agent resolve to a program that is there?
//!
//! [`check`] looks the agent's program up on `PATH` (its definition's `env: PATH`
//! when it sets one), or at its path when it names one, and says what to do when it
//! is missing: the closest agent name fanout knows ("did you mean `claude`?") when an
//! unknown name fell through to architect's agents, and, when nothing chose an
//! agent, which agent CLIs are on `PATH` and how to pick one. A program given by a
//! relative path (`./bin/agent`) is looked for in the worktree at run time (setup
//! may make it), so it is not checked here.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{AdapterKind, AgentSpec};

/// An agent CLI fanout has a built-in adapter for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentCli {
    /// Its agent name and program.
    pub name: &'static str,
    /// What it is.
    pub what: &'static str,
    /// The command that installs it (on a GitHub-hosted Ubuntu runner too): the exact
    /// version fanout's tests drive (`.ci/install-agents.sh`), never whatever is newest.
    pub install: &'static str,
    /// The environment variables its model provider's key is read from.
    pub secrets: &'static [&'static str],
}

/// The agent CLIs fanout has a built-in adapter for.
pub const AGENT_CLIS: [AgentCli; 4] = [
    AgentCli {
        name: "claude",
        what: "Claude Code",
        install: "npm install -g @anthropic-ai/claude-code@2.1.330",
        secrets: &["ANTHROPIC_API_KEY"],
    },
    AgentCli {
        name: "codex",
        what: "Codex",
        install: "npm install -g @openai/codex@0.169.0",
        secrets: &["OPENAI_API_KEY"],
    },
    AgentCli {
        name: "aider",
        what: "aider",
        install: "pipx install aider-chat==0.86.2",
        secrets: &["ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
    },
    AgentCli {
        name: "architect",
        what: "architect",
        install: "pipx install architect-ai-cli==1.1.0 && pipx inject architect-ai-cli mcp==2.3.0",
        secrets: &["OPENAI_API_KEY"],
    },
];

/// The built-in agent CLI named `name`.
pub fn agent_cli(name: &str) -> Option<&'static AgentCli> {
    AGENT_CLIS.iter().find(|c| c.name == name)
}

/// The agent CLIs fanout knows that are on `path`, in [`AGENT_CLIS`]' order.
pub fn clis_on_path(path: Option<&OsStr>) -> Vec<&'static str> {
    AGENT_CLIS
        .iter()
        .map(|c| c.name)
        .filter(|name| on_path(name, path).is_some())
        .collect()
}

/// How the run's agent was chosen, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// `--agent NAME`.
    Flag,
    /// `parallel_runs.agent` in this file.
    File(String),
    /// Nothing chose one: fanout's default (architect's `build` agent).
    Default,
    /// `agent:` of these tasks (their labels, for messages).
    Task(String),
}

/// Check `spec` (chosen as `choice`; `defined` are the names under `agents:`) against
/// `path` (fanout's `PATH`). Ok holds warnings: a name that looks like a typo of a
/// known one but runs as an architect agent. Err says why the run cannot start and
/// what to do.
pub fn check(
    spec: &AgentSpec,
    choice: &Choice,
    defined: &[String],
    path: Option<&OsStr>,
) -> Result<Vec<String>, String> {
    let path = spec.env.get("PATH").map(OsStr::new).or(path);
    let known = known_names(defined);
    let fell_through = spec.adapter == AdapterKind::Architect
        && !known.contains(&spec.name)
        && spec.architect_agent.as_deref() == Some(spec.name.as_str());
    let hint = closest(&spec.name, &known).map(|k| format!("did you mean `{k}`?"));
    let origin = match choice {
        Choice::Flag => format!("--agent {}", spec.name),
        Choice::File(file) => format!("{file}: parallel_runs.agent {}", spec.name),
        Choice::Default => String::new(),
        Choice::Task(tasks) => format!("task {tasks}: agent {}", spec.name),
    };
    let missing = match locate(&spec.program, path) {
        Ok(_) if fell_through => {
            return Ok(hint
                .map(|h| {
                    format!(
                        "{origin}: not defined under `agents:` nor a built-in agent; running architect's agent `{}` ({h})",
                        spec.name
                    )
                })
                .into_iter()
                .collect());
        }
        Ok(_) => return Ok(Vec::new()),
        Err(why) => why,
    };
    let mut msg = if *choice == Choice::Default {
        format!(
            "no agent is chosen, and fanout's default, architect's `build` agent, needs {missing}"
        )
    } else if fell_through {
        format!(
            "{origin}: no agent of that name is defined under `agents:` or built in ({}); as architect's agent `{}` it needs {missing}",
            builtin_names().join(", "),
            spec.name
        )
    } else {
        format!("{origin}: the agent's program {missing}")
    };
    if let Some(h) = hint.filter(|_| fell_through) {
        msg.push_str(&format!("\n  {h}"));
    }
    msg.push_str(&found_on_path(path, &spec.program));
    Err(msg)
}

/// Every agent name fanout resolves without falling through to architect: the file's
/// definitions and the built-ins.
fn known_names(defined: &[String]) -> Vec<String> {
    let mut known: Vec<String> = builtin_names().iter().map(|s| (*s).to_owned()).collect();
    known.extend(defined.iter().cloned());
    known
}

fn builtin_names() -> Vec<&'static str> {
    AGENT_CLIS.iter().map(|c| c.name).collect()
}

/// The known name most like `name`, when one is close (clap's measure, stricter).
pub fn closest<'a>(name: &str, known: &'a [String]) -> Option<&'a str> {
    known
        .iter()
        .filter(|k| k.as_str() != name)
        .map(|k| (strsim::jaro_winkler(name, k), k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k.as_str())
}

/// Where `program` runs from: the file it names, or the first executable of that
/// name on `path`. Err completes "… needs …" / "the agent's program …".
pub fn locate(program: &str, path: Option<&OsStr>) -> Result<Option<PathBuf>, String> {
    if program.contains('/') {
        let p = Path::new(program);
        if !p.is_absolute() {
            return Ok(None);
        }
        return match std::fs::metadata(p) {
            Err(_) => Err(format!("`{program}`, which does not exist")),
            Ok(m) if m.is_dir() || m.permissions().mode() & 0o111 == 0 => {
                Err(format!("`{program}`, which is not an executable file"))
            }
            Ok(_) => Ok(Some(p.to_owned())),
        };
    }
    on_path(program, path)
        .map(Some)
        .ok_or_else(|| match install_hint(program) {
            Some((what, how)) => {
                format!("`{program}`, which is not on PATH (to install {what}: {how})")
            }
            None => format!("`{program}`, which is not on PATH"),
        })
}

/// The first executable file named `program` in the directories of `path`.
fn on_path(program: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn install_hint(program: &str) -> Option<(&'static str, &'static str)> {
    agent_cli(program).map(|c| (c.what, c.install))
}

/// The agent CLIs on `path`, and how to choose one (a line each, indented).
fn found_on_path(path: Option<&OsStr>, missing: &str) -> String {
    let found: Vec<&str> = clis_on_path(path)
        .into_iter()
        .filter(|name| *name != missing)
        .collect();
    match found.first() {
        Some(first) => format!(
            "\n  agent CLIs found on PATH: {}\n  choose one: `fanout run --agent {first} …`, or `parallel_runs: {{agent: {first}}}` in fanout.yml (`fanout init` writes one)",
            found.join(", ")
        ),
        None => format!(
            "\n  no agent CLI found on PATH ({}): install one (Claude Code: {}; Codex: {}), or define your own under `agents:` in fanout.yml",
            builtin_names().join(", "),
            AGENT_CLIS[0].install,
            AGENT_CLIS[1].install
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A PATH of one directory holding executables `names` (and a non-executable `x`).
    fn bin_dir(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for name in names.iter().chain(&["not-exec"]) {
            let p = dir.path().join(name);
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            let mode = if *name == "not-exec" { 0o644 } else { 0o755 };
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        dir
    }

    fn spec(name: &str) -> AgentSpec {
        AgentSpec::resolve(name, &BTreeMap::new(), "fanout.yml", true).unwrap()
    }

    #[test]
    fn a_typo_gets_the_closest_name_and_the_agents_on_path() {
        let bin = bin_dir(&["codex"]);
        let e = check(
            &spec("claud"),
            &Choice::Flag,
            &[],
            Some(bin.path().as_os_str()),
        )
        .unwrap_err();
        insta::assert_snapshot!(e, @r"
        --agent claud: no agent of that name is defined under `agents:` or built in (claude, codex, aider, architect); as architect's agent `claud` it needs `architect`, which is not on PATH (to install architect: pipx install architect-ai-cli==1.1.0 && pipx inject architect-ai-cli mcp==2.3.0)
          did you mean `claude`?
          agent CLIs found on PATH: codex
          choose one: `fanout run --agent codex …`, or `parallel_runs: {agent: codex}` in fanout.yml (`fanout init` writes one)
        ");
        // With architect there, the name may be architect's own: a warning only.
        let bin = bin_dir(&["architect"]);
        let w = check(
            &spec("claud"),
            &Choice::Flag,
            &[],
            Some(bin.path().as_os_str()),
        );
        assert_eq!(
            w.unwrap(),
            [
                "--agent claud: not defined under `agents:` nor a built-in agent; running architect's agent `claud` (did you mean `claude`?)"
            ]
        );
        let w = check(
            &spec("review"),
            &Choice::Flag,
            &[],
            Some(bin.path().as_os_str()),
        );
        assert_eq!(w.unwrap(), Vec::<String>::new());
    }

    #[test]
    fn nothing_chosen_and_no_architect_lists_what_is_there() {
        let bin = bin_dir(&["claude", "aider"]);
        let e = check(
            &spec("build"),
            &Choice::Default,
            &[],
            Some(bin.path().as_os_str()),
        )
        .unwrap_err();
        insta::assert_snapshot!(e, @r"
        no agent is chosen, and fanout's default, architect's `build` agent, needs `architect`, which is not on PATH (to install architect: pipx install architect-ai-cli==1.1.0 && pipx inject architect-ai-cli mcp==2.3.0)
          agent CLIs found on PATH: claude, aider
          choose one: `fanout run --agent claude …`, or `parallel_runs: {agent: claude}` in fanout.yml (`fanout init` writes one)
        ");
        let empty = bin_dir(&[]);
        let e = check(
            &spec("build"),
            &Choice::Default,
            &[],
            Some(empty.path().as_os_str()),
        )
        .unwrap_err();
        assert!(
            e.ends_with("no agent CLI found on PATH (claude, codex, aider, architect): install one (Claude Code: npm install -g @anthropic-ai/claude-code@2.1.330; Codex: npm install -g @openai/codex@0.169.0), or define your own under `agents:` in fanout.yml"),
            "{e}"
        );
    }

    #[test]
    fn programs_are_found_on_path_or_at_their_path() {
        let bin = bin_dir(&["claude"]);
        let path = Some(bin.path().as_os_str());
        let file = Choice::File("fanout.yml".into());
        assert!(check(&spec("claude"), &file, &[], path).is_ok());
        let e = check(&spec("codex"), &file, &[], path).unwrap_err();
        assert!(
            e.starts_with("fanout.yml: parallel_runs.agent codex: the agent's program `codex`, which is not on PATH (to install Codex: npm install -g @openai/codex@0.169.0)"),
            "{e}"
        );
        let mut s = spec("claude");
        s.program = bin.path().join("not-exec").display().to_string();
        let e = check(&s, &Choice::Flag, &[], path).unwrap_err();
        assert!(e.contains("which is not an executable file"), "{e}");
        s.program = "/nonexistent/agent".into();
        let e = check(&s, &Choice::Flag, &[], path).unwrap_err();
        assert!(
            e.starts_with(
                "--agent claude: the agent's program `/nonexistent/agent`, which does not exist"
            ),
            "{e}"
        );
        // A relative path is the worktree's business; the definition's PATH wins.
        s.program = "./bin/agent".into();
        assert!(check(&s, &Choice::Flag, &[], None).is_ok());
        let mut s = spec("codex");
        s.env
            .insert("PATH".into(), bin.path().display().to_string());
        s.program = "claude".into();
        assert!(check(&s, &Choice::Flag, &[], None).is_ok());
    }
}
