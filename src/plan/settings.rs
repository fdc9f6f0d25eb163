//! Validated settings: the config file and the command-line flags merged into one
//! checked value (flags win). Raw flags live in [`crate::cli`]; this is the second,
//! validated type that everything downstream reads.
//!
//! The file is read in [`crate::config`]; checking its text ([`parse_config`]) runs
//! the raw file's own checks and then the checks that belong to the stages that use
//! it — agent definitions ([`crate::agent::check`]), the agents tasks name, and `copy:` globs
//! ([`crate::util::glob::check`]) — each problem located at its line, column and key.
//!
//! A task's own settings (`agent`, `model`, `timeout`, `budget`, `checks`, `output`)
//! win over the run's, flags included; a flag some tasks override is noted
//! ([`Settings::notes`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::deps::order_by_dependencies;
use super::setup::SetupPlan;
use super::{Check, Select, Task};
use crate::agent::AgentSpec;
use crate::agent::preflight::Choice;
use crate::config::error::key;
use crate::config::{ConfigError, ConfigFile, KeySeg, MAX_WORKERS, Problem, TaskEntry};

/// Parse config text ([`crate::config::parse`]) and run the checks later stages own
/// ([`check_file`]); `path` is used in error messages only.
pub fn parse_config(text: &str, path: &Path) -> Result<ConfigFile, ConfigError> {
    let file = crate::config::parse(text, path)?;
    check_file(&file).map_err(|p| ConfigError::at(text, path, p))?;
    Ok(file)
}

/// The checks of a parsed file that belong to the stages using it: `copy:` globs,
/// then agent definitions and the agents tasks name.
pub fn check_file(file: &ConfigFile) -> Result<(), Problem> {
    for (i, glob) in file.copy.iter().enumerate() {
        crate::util::glob::check(&glob.0)
            .map_err(|e| Problem::at(vec![key("copy"), KeySeg::Index(i)], e).in_value())?;
    }
    for (i, h) in file.hidden.iter().enumerate() {
        crate::sandbox::hidden::check_entry(h)
            .map_err(|e| Problem::at(vec![key("hidden"), KeySeg::Index(i)], e).in_value())?;
    }
    super::network::check_file(file)?;
    check_text_inputs(file)?;
    super::findings::check_file(file)?;
    crate::agent::check::definitions(file)?;
    task_agent_names(file)
}

/// [`parse_config`], and the checks that need the repository ([`check_places`]).
pub fn parse_config_for(
    text: &str,
    path: &Path,
    repo: &crate::repo::UserRepo,
) -> Result<ConfigFile, ConfigError> {
    let file = parse_config(text, path)?;
    check_places(&file, repo).map_err(|p| ConfigError::at(text, path, p))?;
    Ok(file)
}

/// The sandbox's paths against `repo` and the home directory
/// ([`crate::sandbox::hidden::Guarded`]): no `hidden:` entry holds the repository; no
/// agent's `writable:` entry holds the repository, its git directory or the home
/// directory, lies in the git directory, or holds or lies in a hidden path.
pub fn check_places(file: &ConfigFile, repo: &crate::repo::UserRepo) -> Result<(), Problem> {
    use crate::sandbox::hidden::{self, Guarded};
    let at = |i| vec![key("hidden"), KeySeg::Index(i)];
    let configured = (file.hidden.iter().enumerate())
        .map(|(i, h)| hidden::expand(h).map_err(|e| Problem::at(at(i), e).in_value()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut hide = hidden::credentials();
    hide.extend(configured.iter().cloned());
    let guard = Guarded::new(Some(&repo.workdir), &repo.common_dir, &hide);
    for (i, path) in configured.iter().enumerate() {
        guard
            .hidden(path)
            .map_err(|e| Problem::at(at(i), format!("{}: {e}", file.hidden[i])).in_value())?;
    }
    for (name, def) in &file.agents {
        for (i, w) in def.writable.iter().enumerate() {
            let refused = hidden::expand(w).and_then(|p| guard.writable(&p));
            refused.map_err(|e| {
                let at = vec![key("agents"), key(name), key("writable"), KeySeg::Index(i)];
                Problem::at(at, format!("{w}: {e}")).in_value()
            })?;
        }
    }
    Ok(())
}

/// Check the `agent:` of every task that names one: a definition under `agents:` or
/// a built-in (a run's own agent may also be one of architect's, as in
/// `agent: build`; a task's must be defined, so a typo is caught where it is written).
fn task_agent_names(file: &ConfigFile) -> Result<(), Problem> {
    for (i, t) in file.tasks.iter().enumerate() {
        let TaskEntry::Detailed(d) = t else {
            continue;
        };
        let Some(name) = &d.agent else { continue };
        let at = || vec![key("tasks"), KeySeg::Index(i), key("agent")];
        let name = name.trim();
        if !crate::config::is_agent_name(name) {
            return Err(Problem::at(
                at(),
                format!("agent name {name:?} may only hold letters, digits, '-', '_' and '.'"),
            )
            .in_value());
        }
        let builtins = crate::agent::preflight::AGENT_CLIS.map(|c| c.name);
        if file.agents.contains_key(name) || builtins.contains(&name) {
            continue;
        }
        let mut known: Vec<String> = builtins.iter().map(|s| (*s).to_owned()).collect();
        known.extend(file.agents.keys().cloned());
        let hint = match crate::agent::preflight::closest(name, &known) {
            Some(k) => format!("did you mean `{k}`? "),
            None => String::new(),
        };
        let message = if name == "command" {
            "the `command` adapter needs a definition: add `agents: {my-agent: {command: [prog, \"{task}\"]}}` and name it here".to_owned()
        } else {
            format!(
                "no agent `{name}` is defined under `agents:` or built in ({}); {hint}(for architect's own agent `{name}`, define it: `agents: {{{name}: {{agent: {name}}}}}`)",
                known.join(", ")
            )
        };
        return Err(Problem::at(at(), message).in_value());
    }
    Ok(())
}

/// The first control character of `s` (newlines and tabs allowed in `multiline` text).
fn control_char(s: &str, multiline: bool) -> Option<char> {
    s.chars()
        .find(|c| c.is_control() && !(multiline && matches!(c, '\n' | '\t' | '\r')))
}

/// What reaches branch names and commit messages — model names, task ids and prompts —
/// holds no control character (a newline in a model name would write lines of its own
/// into fanout's commit messages); prompts may span lines.
fn check_text_inputs(file: &ConfigFile) -> Result<(), Problem> {
    let bad = |path: Vec<KeySeg>, what: &str, c: char| {
        Problem::at(
            path,
            format!(
                "{what} holds a control character (U+{:04X}); it would reach branch names and commit messages",
                c as u32
            ),
        )
        .in_value()
    };
    for (i, m) in file.models.iter().enumerate() {
        if let Some(c) = control_char(m, false) {
            return Err(bad(
                vec![key("models"), KeySeg::Index(i)],
                "a model name",
                c,
            ));
        }
    }
    for (i, t) in file.tasks.iter().enumerate() {
        let at = |k: &str| vec![key("tasks"), KeySeg::Index(i), key(k)];
        match t {
            TaskEntry::Prompt(p) => {
                if let Some(c) = control_char(p, true) {
                    return Err(bad(vec![key("tasks"), KeySeg::Index(i)], "a prompt", c));
                }
            }
            TaskEntry::Detailed(d) => {
                let fields = [
                    ("prompt", Some(&d.prompt), true),
                    ("id", d.id.as_ref(), false),
                    ("model", d.model.as_ref(), false),
                ];
                for (k, v, multiline) in fields {
                    if let Some(c) = v.and_then(|v| control_char(v, multiline)) {
                        return Err(bad(at(k), &format!("the task's {k}"), c));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Flags that shape a plan; filled by the CLI, all optional.
#[derive(Debug, Clone, Default)]
pub struct PlanFlags {
    /// Tasks from the command line (positional and `--task`); replace the file's.
    pub tasks: Vec<String>,
    /// `--workers`.
    pub workers: Option<u32>,
    /// `--models`, as typed (comma-separated, possibly repeated).
    pub models: Vec<String>,
    /// `--agent`.
    pub agent: Option<String>,
    /// `--max-steps`.
    pub max_steps: Option<u32>,
    /// `--budget-per-worker`.
    pub budget_per_worker: Option<f64>,
    /// `--timeout-per-worker` in seconds.
    pub timeout_per_worker: Option<f64>,
    /// `--inactivity-timeout` in seconds.
    pub inactivity_timeout: Option<f64>,
    /// `--budget-total` in USD.
    pub budget_total: Option<f64>,
    /// `--select-best`.
    pub select_best: bool,
    /// `--fail-on`.
    pub fail_on: Option<crate::config::FailOn>,
    /// `--base`.
    pub base: Option<String>,
    /// `--cross`.
    pub cross: bool,
    /// `--worktree-dir`.
    pub worktree_dir: Option<PathBuf>,
    /// `--branch-prefix`.
    pub branch_prefix: Option<String>,
    /// No task makes an empty plan instead of an error.
    pub allow_empty: bool,
    /// `--sandbox`.
    pub sandbox: Option<crate::sandbox::Mode>,
    /// `--tasks-file`: its name (for messages) and text; its tasks replace the file's.
    pub tasks_file: Option<(String, String)>,
    /// What GitHub said before tonight ([`super::night`]): tasks from issues, tasks to
    /// tend, tasks settled without an agent.
    pub night: Option<super::night::NightInputs>,
}

/// Everything a run needs to know, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Tasks, in order, at least one.
    pub tasks: Vec<Task>,
    /// Models, trimmed, in order (may be empty: the agent's default model).
    pub models: Vec<String>,
    /// Number of workers (slots), also the concurrency cap.
    pub workers: u32,
    /// Every task × every model.
    pub cross: bool,
    /// The run's agent: every worker's, but those whose task names its own.
    pub agent: AgentSpec,
    /// How the agent was chosen, and the names defined under `agents:` (for the
    /// check that its program is there, [`crate::agent::preflight`]).
    pub agent_choice: (Choice, Vec<String>),
    /// The other agents tasks name (`tasks[].agent`), resolved, by name.
    pub task_agents: BTreeMap<String, AgentSpec>,
    /// What a user should know about how flags and the file combined: a flag that
    /// some tasks override with their own setting.
    pub notes: Vec<String>,
    /// Most steps per worker.
    pub max_steps: u32,
    /// Per-worker budget in USD.
    pub budget_per_worker: Option<f64>,
    /// Per-worker wall-clock limit.
    pub timeout_per_worker: Option<Duration>,
    /// Grace between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// Stop a worker that printed nothing for this long.
    pub inactivity_timeout: Option<Duration>,
    /// USD for the whole run.
    pub budget_total: Option<f64>,
    /// Checks after each agent.
    pub checks: Vec<Check>,
    /// How each new worktree is prepared before its agent.
    pub setup: SetupPlan,
    /// Selection among workers sharing a task.
    pub select: Select,
    /// When the run exits non-zero.
    pub fail_on: crate::config::FailOn,
    /// Base revision as given (default `HEAD`).
    pub base: String,
    /// Branch prefix.
    pub branch_prefix: String,
    /// Worktree root override, if any (absolute or relative to the repo root).
    pub worktree_dir: Option<PathBuf>,
    /// Paths never committed.
    pub exclude: Vec<String>,
    /// Commit identity (name, email).
    pub commit_identity: (String, String),
    /// `publish.remote`: the remote publishing pushes to (recorded when a run starts).
    pub publish_remote: Option<String>,
    /// Whether agents, setup commands and checks are confined.
    pub sandbox: crate::sandbox::Mode,
    /// Tasks settled before the night without an agent (not run tonight).
    pub settled: Vec<super::night::Settled>,
    /// Paths confined processes may not read besides the default ones (`hidden:`).
    pub hidden: Vec<String>,
    /// What agents reach through the gateway, and how it is enforced (`network:`).
    pub network: super::network::NetworkPlan,
}

/// Why flags and file could not be combined.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SettingsError {
    /// A bad `checks:` entry.
    #[error("{0}")]
    Check(String),
    /// A bad worktree setup (`ports:`).
    #[error("{0}")]
    Setup(String),
    /// A `depends_on` naming no task, or a dependency cycle.
    #[error("{0}")]
    Dependencies(String),
    /// No task anywhere.
    #[error("no task given: pass TASK or --task, or list `tasks:` in the config file")]
    NoTasks,
    /// A task on the command line that is surely something else (`-`, `@file`).
    #[error("{0}")]
    BadTask(String),
    /// A bad tasks file (`--tasks-file`), located.
    #[error("--tasks-file {0}")]
    TasksFile(String),
    /// An empty task.
    #[error("{origin}: task {index} is empty")]
    EmptyTask {
        /// `--task` or the file.
        origin: String,
        /// 1-based.
        index: usize,
    },
    /// A malformed model list.
    #[error("{origin}: empty model name in {list:?} (models are separated by commas)")]
    EmptyModel {
        /// `--models` or the file.
        origin: String,
        /// What was given.
        list: String,
    },
    /// `--workers` out of range.
    #[error("--workers: expected an integer from 1 to {MAX_WORKERS}, found {0}")]
    Workers(u32),
    /// A bad task id.
    #[error("{origin}: task id {id:?} may only hold letters, digits, '-', '_' and '.'")]
    TaskId {
        /// Where.
        origin: String,
        /// The id.
        id: String,
    },
    /// Duplicate task id.
    #[error("{origin}: task id {0:?} is used twice", origin = .1)]
    DuplicateTaskId(String, String),
    /// A bad branch prefix.
    #[error("{origin}: branch prefix {prefix:?} is not a valid git branch name component")]
    BranchPrefix {
        /// Where.
        origin: String,
        /// The prefix.
        prefix: String,
    },
    /// A bad budget or timeout flag.
    #[error("{flag}: expected a positive number, found {value}")]
    Number {
        /// The flag.
        flag: &'static str,
        /// The value.
        value: f64,
    },
    /// The agent definition is unusable.
    #[error("{0}")]
    Agent(String),
    /// A control character in text that reaches branch names or commit messages.
    #[error(
        "{origin}: {value:?} holds a control character (U+{code:04X}); it would reach branch names and commit messages"
    )]
    ControlCharacter {
        /// The flag.
        origin: String,
        /// What was given.
        value: String,
        /// The character.
        code: u32,
    },
}

/// `value` of `origin` (a flag), unless it holds a control character (newlines and
/// tabs allowed in `multiline` text).
fn no_control(origin: &str, value: &str, multiline: bool) -> Result<(), SettingsError> {
    match control_char(value, multiline) {
        Some(c) => Err(SettingsError::ControlCharacter {
            origin: origin.to_owned(),
            value: value.to_owned(),
            code: c as u32,
        }),
        None => Ok(()),
    }
}

impl Settings {
    /// Merge `file` (read from `file_name`, for messages) and `flags`, checking each
    /// part in turn: tasks, models, numbers, branch prefix, agent, checks, setup.
    pub fn resolve(
        file: &ConfigFile,
        file_name: &Path,
        flags: &PlanFlags,
    ) -> Result<Settings, SettingsError> {
        let origin = file_name.display().to_string();
        let (tasks, tonight) = resolve_tasks(file, &origin, flags)?;
        let mut notes = overridden_flags(&tasks, flags);
        notes.extend(tonight);
        let models = if !flags.models.is_empty() {
            split_models(&flags.models, "--models")?
        } else {
            split_models(&file.models, &format!("{origin}: models"))?
        };
        let numbers = Numbers::resolve(file, flags)?;
        let branch_prefix = branch_prefix(file, &origin, flags)?;
        let agent = agent(file, &origin, flags)?;
        let task_agents = task_agents(file, &origin, &tasks, &agent.name)?;
        let exclude = exclude(file, std::iter::once(&agent).chain(task_agents.values()));
        let unused = unused_models(
            &tasks,
            &models,
            numbers.workers,
            (flags.cross || file.cross, &agent.name),
        );
        notes.extend(unused);
        Ok(Settings {
            tasks,
            models,
            workers: numbers.workers,
            cross: flags.cross || file.cross,
            agent,
            agent_choice: agent_choice(file, file_name, flags),
            task_agents,
            notes,
            max_steps: flags.max_steps.unwrap_or(file.parallel_runs.max_steps),
            budget_per_worker: numbers.budget_per_worker,
            timeout_per_worker: numbers.timeout_per_worker.map(Duration::from_secs_f64),
            kill_grace: Duration::from_secs_f64(file.kill_grace.map(|s| s.0).unwrap_or(10.0)),
            inactivity_timeout: numbers.inactivity_timeout.map(Duration::from_secs_f64),
            budget_total: numbers.budget_total,
            checks: checks(&file.checks, &format!("{origin}: checks"))?,
            setup: SetupPlan::resolve(file, &origin).map_err(SettingsError::Setup)?,
            select: Select {
                mode: if flags.select_best {
                    crate::config::SelectMode::Best
                } else {
                    file.select
                },
                weights: file.select_weights,
            },
            fail_on: flags.fail_on.unwrap_or(file.fail_on),
            base: flags
                .base
                .clone()
                .or_else(|| file.base.clone())
                .unwrap_or_else(|| "HEAD".to_owned()),
            branch_prefix,
            worktree_dir: flags
                .worktree_dir
                .clone()
                .or_else(|| file.worktree_dir.clone()),
            exclude,
            commit_identity: file.commit_identity(),
            publish_remote: file.publish.remote.clone(),
            sandbox: flags.sandbox.or(file.sandbox).unwrap_or_default(),
            settled: flags
                .night
                .as_ref()
                .map(|n| n.settled.clone())
                .unwrap_or_default(),
            hidden: file.hidden.clone(),
            network: super::network::NetworkPlan::of(file),
        })
    }
}

impl Settings {
    /// The agents the run's workers will run, each with how it was chosen (for
    /// [`crate::agent::preflight`]): the run's, when a task runs it (or no task is
    /// given), and every other agent a task names.
    pub fn agents_used(&self) -> Vec<(&AgentSpec, Choice)> {
        let runs_default = self.tasks.is_empty()
            || self
                .tasks
                .iter()
                .any(|t| t.agent.as_deref().is_none_or(|a| a == self.agent.name));
        let mut out = Vec::new();
        if runs_default {
            out.push((&self.agent, self.agent_choice.0.clone()));
        }
        for (name, spec) in &self.task_agents {
            let tasks: Vec<String> = self
                .tasks
                .iter()
                .filter(|t| t.agent.as_deref() == Some(name.as_str()))
                .map(|t| format!("`{}`", t.label(32)))
                .collect();
            out.push((spec, Choice::Task(tasks.join(", "))));
        }
        out
    }
}

/// The tasks: the flags' or the tasks file's (which replace the file's) or the
/// file's, checked, then tonight's ([`super::night::NightInputs::apply`]: issues,
/// tends, settled tasks left out, said in the notes returned), with unique ids,
/// ordered so every task comes after those it depends on.
fn resolve_tasks(
    file: &ConfigFile,
    origin: &str,
    flags: &PlanFlags,
) -> Result<(Vec<Task>, Vec<String>), SettingsError> {
    let tasks = if !flags.tasks.is_empty() {
        flag_tasks(&flags.tasks)?
    } else if let Some((name, text)) = &flags.tasks_file {
        file_tasks(&tasks_file(file, name, text)?, name)?
    } else {
        file_tasks(&file.tasks, origin)?
    };
    let (tasks, notes) = match &flags.night {
        Some(night) => night.apply(tasks),
        None => (tasks, Vec::new()),
    };
    if tasks.is_empty() && !flags.allow_empty {
        return Err(SettingsError::NoTasks);
    }
    let mut seen = std::collections::BTreeSet::new();
    for t in &tasks {
        if let Some(id) = &t.id
            && !seen.insert(id.clone())
        {
            return Err(SettingsError::DuplicateTaskId(
                id.clone(),
                format!("{origin}: tasks"),
            ));
        }
    }
    let tasks = order_by_dependencies(tasks, origin).map_err(SettingsError::Dependencies)?;
    Ok((tasks, notes))
}

/// The note naming each model of `models` no worker runs: every slot it would have
/// taken is a task with its own model or agent (nothing asked for goes unsaid).
fn unused_models(
    tasks: &[Task],
    models: &[String],
    workers: u32,
    run: (bool, &str),
) -> Option<String> {
    if tasks.is_empty() {
        return None;
    }
    let planned = super::slots::assign(tasks, models, workers, run);
    let unused: Vec<&str> = models
        .iter()
        .filter(|m| {
            !planned
                .iter()
                .any(|(_, p)| p.as_deref() == Some(m.as_str()))
        })
        .map(String::as_str)
        .collect();
    (!unused.is_empty()).then(|| {
        format!(
            "models: no worker runs {}: the slot it would take runs a task with its own model or agent",
            unused.join(", ")
        )
    })
}

/// A tasks file (`--tasks-file FILE`, `-` for stdin): a YAML list of tasks as
/// `tasks:` holds them (checked as the config's are, its agents the config's), or
/// else one task a line (blank lines and lines starting with `#` skipped). Errors name
/// the file, line, column and item.
fn tasks_file(file: &ConfigFile, name: &str, text: &str) -> Result<Vec<TaskEntry>, SettingsError> {
    let content = text
        .lines()
        .enumerate()
        .map(|(n, l)| (n + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let first = content.clone().next().map_or("", |(_, l)| l);
    let yaml = first == "-" || first.starts_with("- ") || first.starts_with('[');
    if !yaml {
        return content
            .map(|(n, l)| {
                no_control(&format!("--tasks-file {name}, line {n}"), l, false)?;
                Ok(TaskEntry::Prompt(l.to_owned()))
            })
            .collect();
    }
    let wrapped = crate::config::list_text(text);
    let path = Path::new(name);
    let located = |e: ConfigError| {
        let e = e.in_list(text);
        let shown = e.snippet().map(|s| format!("\n{s}")).unwrap_or_default();
        SettingsError::TasksFile(format!("{e}{shown}"))
    };
    let parsed = crate::config::parse(&wrapped, path).map_err(located)?;
    let merged = ConfigFile {
        tasks: parsed.tasks,
        ..file.clone()
    };
    check_file(&merged).map_err(|p| located(ConfigError::at(&wrapped, path, p)))?;
    Ok(merged.tasks)
}

/// Tasks given as `TASK` / `--task`: prompts only.
fn flag_tasks(given: &[String]) -> Result<Vec<Task>, SettingsError> {
    given
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let prompt = t.trim();
            no_control("--task", prompt, true)?;
            let one_word = !prompt.contains(char::is_whitespace);
            if prompt == "-" || (one_word && prompt.len() > 1 && prompt.starts_with('@')) {
                let file = prompt.strip_prefix('@').unwrap_or(prompt);
                return Err(SettingsError::BadTask(format!(
                    "--task {prompt}: a task is its prompt; to read tasks from a file, pass --tasks-file {file}"
                )));
            }
            if let Some((_, id)) = super::findings::placeholders(prompt).first() {
                return Err(SettingsError::Dependencies(format!(
                    "--task {}: {{findings.{id}}} needs a task that depends on {id}; tasks given on the command line have no depends_on: list them in the config file's `tasks:`",
                    i + 1
                )));
            }
            if prompt.is_empty() {
                Err(SettingsError::EmptyTask {
                    origin: "--task".into(),
                    index: i + 1,
                })
            } else {
                Ok(Task {
                    prompt: prompt.to_owned(),
                    ..Task::default()
                })
            }
        })
        .collect()
}

/// The file's `tasks:`, trimmed; an empty prompt or a bad id is an error.
fn file_tasks(entries: &[TaskEntry], origin: &str) -> Result<Vec<Task>, SettingsError> {
    entries
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let task = match t {
                TaskEntry::Prompt(p) => Task {
                    prompt: p.trim().to_owned(),
                    ..Task::default()
                },
                TaskEntry::Detailed(d) => detailed_task(d, &format!("{origin}: tasks[{i}]"))?,
            };
            if task.prompt.is_empty() {
                return Err(SettingsError::EmptyTask {
                    origin: format!("{origin}: tasks"),
                    index: i + 1,
                });
            }
            if let Some(id) = &task.id
                && (id.is_empty()
                    || !id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
            {
                return Err(SettingsError::TaskId {
                    origin: format!("{origin}: tasks[{i}].id"),
                    id: id.clone(),
                });
            }
            Ok(task)
        })
        .collect()
}

/// A task in its object form, its settings of its own included; `origin` locates it
/// in messages (`fanout.yml: tasks[2]`).
fn detailed_task(d: &crate::config::TaskDef, origin: &str) -> Result<Task, SettingsError> {
    let text = |v: &Option<String>| {
        v.as_ref()
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty())
    };
    Ok(Task {
        id: d.id.as_ref().map(|s| s.trim().to_owned()),
        prompt: d.prompt.trim().to_owned(),
        model: text(&d.model),
        depends_on: with_review_of(&d.depends_on, d.review_of.as_deref()),
        output: d.output,
        findings: d.findings,
        review_of: text(&d.review_of),
        agent: text(&d.agent),
        timeout: d.timeout.map(|s| s.0),
        budget: d.budget.map(|u| u.0),
        checks: d
            .checks
            .as_ref()
            .map(|c| checks(c, &format!("{origin}.checks")))
            .transpose()?,
        ..Task::default()
    })
}

/// A task's `depends_on`, trimmed, with the task it reviews (`review_of`: a reviewer
/// starts from the branch it reviews) added when missing.
fn with_review_of(depends_on: &[String], review_of: Option<&str>) -> Vec<String> {
    let mut deps: Vec<String> = depends_on.iter().map(|s| s.trim().to_owned()).collect();
    if let Some(of) = review_of.map(str::trim)
        && !deps.iter().any(|d| d == of)
    {
        deps.push(of.to_owned());
    }
    deps
}

/// The flags some tasks override with a setting of their own (a task's own setting
/// wins: it is the more specific), each as a note naming those tasks.
fn overridden_flags(tasks: &[Task], flags: &PlanFlags) -> Vec<String> {
    let named = |pick: &dyn Fn(&Task) -> bool| -> Vec<String> {
        tasks
            .iter()
            .filter(|t| pick(t))
            .map(|t| format!("`{}`", t.label(32)))
            .collect()
    };
    let mut notes = Vec::new();
    let mut note = |flag: &str, what: &str, overriding: Vec<String>| {
        if !overriding.is_empty() {
            notes.push(format!(
                "{flag}: not for task {} — a task's own `{what}:` wins over the flag",
                overriding.join(", ")
            ));
        }
    };
    if let Some(a) = &flags.agent {
        note(
            "--agent",
            "agent",
            named(&|t| t.agent.as_ref().is_some_and(|x| x != a.trim())),
        );
    }
    if flags.timeout_per_worker.is_some() {
        note(
            "--timeout-per-worker",
            "timeout",
            named(&|t| t.timeout.is_some()),
        );
    }
    if flags.budget_per_worker.is_some() {
        note(
            "--budget-per-worker",
            "budget",
            named(&|t| t.budget.is_some()),
        );
    }
    if !flags.models.is_empty() {
        note("--models", "model", named(&|t| t.model.is_some()));
    }
    notes
}

/// The agents tasks name other than the run's (`run_agent`), resolved with the file's
/// definitions and prices.
fn task_agents(
    file: &ConfigFile,
    origin: &str,
    tasks: &[Task],
    run_agent: &str,
) -> Result<BTreeMap<String, AgentSpec>, SettingsError> {
    let mut out = BTreeMap::new();
    for name in tasks.iter().filter_map(|t| t.agent.as_deref()) {
        if name == run_agent || out.contains_key(name) {
            continue;
        }
        let mut spec =
            AgentSpec::resolve(name, &file.agents, origin, false).map_err(SettingsError::Agent)?;
        spec.prices = file.prices.clone();
        out.insert(name.to_owned(), spec);
    }
    Ok(out)
}

/// The numbers flags may override: worker count, budgets and timeouts (seconds).
struct Numbers {
    workers: u32,
    budget_per_worker: Option<f64>,
    timeout_per_worker: Option<f64>,
    inactivity_timeout: Option<f64>,
    budget_total: Option<f64>,
}

impl Numbers {
    fn resolve(file: &ConfigFile, flags: &PlanFlags) -> Result<Numbers, SettingsError> {
        let runs = &file.parallel_runs;
        let workers = match flags.workers {
            Some(w) if !(1..=MAX_WORKERS as u32).contains(&w) => {
                return Err(SettingsError::Workers(w));
            }
            Some(w) => w,
            None => runs.workers.0,
        };
        Ok(Numbers {
            workers,
            budget_per_worker: number(
                ("--budget-per-worker", flags.budget_per_worker),
                true,
                runs.budget_per_worker.map(|u| u.0),
            )?,
            timeout_per_worker: number(
                ("--timeout-per-worker", flags.timeout_per_worker),
                false,
                runs.timeout_per_worker.map(|s| s.0),
            )?,
            inactivity_timeout: number(
                ("--inactivity-timeout", flags.inactivity_timeout),
                false,
                runs.inactivity_timeout.map(|s| s.0),
            )?,
            budget_total: number(
                ("--budget-total", flags.budget_total),
                true,
                runs.budget_total.map(|u| u.0),
            )?,
        })
    }
}

/// A flag's value when given (finite, positive; zero too with `zero_ok`), else the
/// file's.
fn number(
    (flag, given): (&'static str, Option<f64>),
    zero_ok: bool,
    file: Option<f64>,
) -> Result<Option<f64>, SettingsError> {
    match given {
        Some(v) if !(v.is_finite() && (v > 0.0 || zero_ok && v == 0.0)) => {
            Err(SettingsError::Number { flag, value: v })
        }
        Some(v) => Ok(Some(v)),
        None => Ok(file),
    }
}

/// A `checks:` list (`origin` names it: `fanout.yml: checks`), each with a name and
/// a time limit.
fn checks(list: &[crate::config::CheckDef], origin: &str) -> Result<Vec<Check>, SettingsError> {
    list.iter()
        .enumerate()
        .map(|(i, c)| {
            let (run, name, timeout) = match c {
                crate::config::CheckDef::Command(r) => (r.clone(), None, None),
                crate::config::CheckDef::Detailed(d) => {
                    (d.run.clone(), d.name.clone(), d.timeout.map(|s| s.0))
                }
            };
            if run.trim().is_empty() {
                return Err(SettingsError::Check(format!(
                    "{origin}[{i}]: empty command"
                )));
            }
            Ok(Check {
                name: name.unwrap_or_else(|| run.trim().to_owned()),
                run,
                timeout: timeout.unwrap_or(600.0),
            })
        })
        .collect()
}

/// The branch prefix (`--branch-prefix`, `branch_prefix:`, else `fanout`), a valid
/// component of a git branch name.
fn branch_prefix(
    file: &ConfigFile,
    origin: &str,
    flags: &PlanFlags,
) -> Result<String, SettingsError> {
    let prefix = flags
        .branch_prefix
        .clone()
        .or_else(|| file.branch_prefix.clone())
        .unwrap_or_else(|| "fanout".to_owned());
    let probe = format!("refs/heads/{prefix}/x");
    if prefix.is_empty() || prefix.ends_with('/') || !git2::Reference::is_valid_name(&probe) {
        return Err(SettingsError::BranchPrefix {
            origin: if flags.branch_prefix.is_some() {
                "--branch-prefix".to_owned()
            } else {
                format!("{origin}: branch_prefix")
            },
            prefix,
        });
    }
    Ok(prefix)
}

/// The agent (`--agent`, else `parallel_runs.agent`), resolved, with the file's prices.
fn agent(file: &ConfigFile, origin: &str, flags: &PlanFlags) -> Result<AgentSpec, SettingsError> {
    if let Some(a) = &flags.agent {
        no_control("--agent", a, false)?;
    }
    let name = flags
        .agent
        .clone()
        .unwrap_or_else(|| file.parallel_runs.agent.clone());
    let mut agent = AgentSpec::resolve(&name, &file.agents, origin, flags.agent.is_some())
        .map_err(SettingsError::Agent)?;
    agent.prices = file.prices.clone();
    Ok(agent)
}

/// How the agent was chosen (`--agent`, the file, or not at all: the default), and
/// the names the file defines.
fn agent_choice(file: &ConfigFile, file_name: &Path, flags: &PlanFlags) -> (Choice, Vec<String>) {
    let choice = if flags.agent.is_some() {
        Choice::Flag
    } else if file.parallel_runs.agent != crate::config::ParallelRuns::default().agent {
        // Where it is written: preflight's refusal points at the line.
        Choice::File(crate::config::located(
            file_name,
            &["parallel_runs", "agent"],
        ))
    } else {
        Choice::Default
    };
    (choice, file.agents.keys().cloned().collect())
}

/// Paths never committed: fanout's and architect's state, the file's `exclude:`, and
/// what the CLI of any agent of the run writes (every worker's commit leaves out all of
/// them: one agent's state files are never a change another worker means to make).
fn exclude<'a>(file: &ConfigFile, agents: impl Iterator<Item = &'a AgentSpec>) -> Vec<String> {
    let mut exclude: Vec<String> = vec![".architect/".into(), ".fanout/".into()];
    let agents: Vec<&AgentSpec> = agents.collect();
    for e in file
        .exclude
        .iter()
        .chain(agents.iter().flat_map(|a| a.exclude.iter()))
    {
        let e = e.trim().to_owned();
        if !e.is_empty() && !exclude.contains(&e) {
            exclude.push(e);
        }
    }
    exclude
}

/// Split `["a, b", "c"]` into `["a", "b", "c"]`; an empty item is an error.
pub fn split_models(items: &[String], origin: &str) -> Result<Vec<String>, SettingsError> {
    let mut out = Vec::new();
    for item in items {
        for part in item.split(',') {
            let part = part.trim();
            no_control(origin, part, false)?;
            if part.is_empty() {
                return Err(SettingsError::EmptyModel {
                    origin: origin.to_owned(),
                    list: item.clone(),
                });
            }
            out.push(part.to_owned());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ConfigError {
        parse_config(text, Path::new("fanout.yml")).expect_err("should fail")
    }

    #[test]
    fn a_key_set_twice_and_result_keys_exit_code_does_not_read_are_named() {
        for (text, want) in [
            (
                "parallel_runs:\n  workers: 2\n  workers: 3\n",
                "fanout.yml:3:3: key `parallel_runs.workers`: `workers` is set twice; keep one",
            ),
            (
                "models: [a]\nmodels: [b]\n",
                "fanout.yml:2:1: key `models`: `models` is set twice; keep one",
            ),
            (
                "agents:\n  x:\n    command: [x]\n    result: {format: exit-code, cost: c}\n",
                "fanout.yml:4:33: key `agents.x.result.cost`: not read with `format: exit-code` (the exit code is the whole report); drop it, or have fanout read a report (`format: file`, `json` or `jsonl`)",
            ),
        ] {
            assert_eq!(err(text).to_string(), want, "{text}");
        }
    }

    #[test]
    fn a_tasks_file_of_lines_refuses_a_control_character_naming_its_line() {
        let file = ConfigFile::default();
        let e = tasks_file(
            &file,
            "t.txt",
            "# tasks\nfine\nfix \u{1b}]0;pwned\u{7} it\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--tasks-file t.txt, line 3") && e.contains("U+001B"),
            "{e}"
        );
        let ok = tasks_file(&file, "t.txt", "one\n\ntwo\n").unwrap();
        assert_eq!(ok.len(), 2);
    }

    #[test]
    fn agent_definitions_are_checked_with_line_column_and_key() {
        let cases = [
            (
                "agents:\n  bad:\n    command: [x, '{tsk}']\n",
                "fanout.yml:3:18: key `agents.bad.command[1]`: unknown placeholder {tsk} in \"{tsk}\"; known: {task}, {model}, {worker_id}, {branch}, {worktree}, {run_id}, {max_steps}, {budget}, {timeout}",
            ),
            (
                "tasks: [a]\nagents:\n  claude:\n    binary: /opt/claude\n    result: {format: json}\n",
                "fanout.yml:5:5: key `agents.claude.result`: only the command adapter reads a `result` spec; the claude adapter reads its CLI's own output",
            ),
            (
                "agents:\n  mine:\n    command: [x]\n    permission_mode: acceptEdits\n",
                "fanout.yml:4:5: key `agents.mine.permission_mode`: only used by the claude adapter",
            ),
            (
                "agents:\n  claude:\n    permission_mode: accept edits\n",
                "fanout.yml:3:22: key `agents.claude.permission_mode`: \"accept edits\" is not a permission mode (e.g. acceptEdits, bypassPermissions, plan)",
            ),
            (
                "agents:\n  codex:\n    command: [codex, exec]\n    adapter: codex\n",
                "fanout.yml:3:5: key `agents.codex.command`: not used by the codex adapter (use `binary` and `args`)",
            ),
            (
                "agents:\n  aider:\n    model_args: [--model, '{model}']\n",
                "fanout.yml:3:5: key `agents.aider.model_args`: for the command adapter; the aider adapter passes the model and budget itself",
            ),
            (
                "agents:\n  mine:\n    command: [x]\n    binary: /bin/y\n",
                "fanout.yml:4:5: key `agents.mine.binary`: not used by the command adapter: the program is command[0]",
            ),
            (
                "agents:\n  mine:\n    adapter: command\n",
                "fanout.yml:2:3: key `agents.mine.command`: the command adapter needs an argv list, e.g. [my-agent, \"{task}\"]",
            ),
            (
                "agents:\n  mine:\n    command: [x]\n    result:\n      format: jsonl\n      cost: usage..usd\n",
                "fanout.yml:6:13: key `agents.mine.result.cost`: \"usage..usd\" is not a dotted JSON path like `result.cost_usd`",
            ),
            (
                "agents:\n  'my agent':\n    command: [x]\n",
                "fanout.yml:2:3: key `agents.my agent`: agent name \"my agent\" may only hold letters, digits, '-', '_' and '.'",
            ),
            (
                "agents: {mine: {command: [x], env: {'A=B': c}}}\n",
                "fanout.yml:1:37: key `agents.mine.env.A=B`: \"A=B\" is not a valid variable name",
            ),
            (
                "prices:\n  gpt-x:\n    input: -1\n    output: 2\n",
                "fanout.yml:3:12: key `prices.gpt-x.input`: expected USD per million tokens, zero or more, found -1",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(err(text).to_string(), want, "{text}");
        }
        let e = err("agents:\n  mine:\n    command: [x]\n    writable: [~/ok, relative/dir]\n");
        assert!(
            e.to_string().starts_with(
                "fanout.yml:4:22: key `agents.mine.writable[1]`: \"relative/dir\": expected an absolute path"
            ),
            "{e}"
        );
        for bad in ["'~/../x'", "'/a/../b'", "''", "\"/tmp/a\\nb\""] {
            let text = format!("agents:\n  mine:\n    command: [x]\n    writable: [{bad}]\n");
            assert!(err(&text).to_string().contains("writable[0]"), "{bad}");
        }
        // The snippet points at the key.
        insta::assert_snapshot!(
            err("agents:\n  mine:\n    command: [x]\n    permission_mode: plan\n").snippet().unwrap(),
            @r"
          |
        4 |     permission_mode: plan
          |     ^
        "
        );
        // Every built-in accepts binary, args, env; claude a permission mode.
        let ok = parse_config(
            "agents:\n  claude: {binary: /x/claude, args: [--verbose], permission_mode: bypassPermissions}\n  codex: {binary: /x/codex, env: {CODEX_HOME: /h}}\n  aider: {args: [--map-tokens, '0']}\n  architect: {binary: /x/architect, agent: review}\n  mine: {command: [my-agent, '{task}'], result: {format: exit-code}}\n",
            Path::new("fanout.yml"),
        );
        assert!(ok.is_ok(), "{:?}", ok.err());
    }

    fn flags(tasks: &[&str]) -> PlanFlags {
        PlanFlags {
            tasks: tasks.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn resolve(file: &str, flags: &PlanFlags) -> Result<Settings, SettingsError> {
        let cfg = crate::config::parse(file, Path::new("fanout.yml")).unwrap();
        Settings::resolve(&cfg, Path::new("fanout.yml"), flags)
    }

    #[test]
    fn a_model_no_worker_runs_is_said() {
        let s = resolve(
            "parallel_runs: {workers: 2}\nmodels: [a, b]\ntasks: [x, {prompt: y, model: m}]\n",
            &PlanFlags::default(),
        )
        .unwrap();
        assert!(
            s.notes.iter().any(|n| n.contains("no worker runs b")),
            "{:?}",
            s.notes
        );
        let empty_ok = PlanFlags {
            allow_empty: true,
            ..PlanFlags::default()
        };
        for no_slot_taken in [
            "parallel_runs: {workers: 2}\nmodels: [a, b]\ntasks: [x, y]\n",
            "models: [a, b]\n",
        ] {
            let s = resolve(no_slot_taken, &empty_ok).unwrap();
            assert!(s.notes.is_empty(), "{no_slot_taken}: {:?}", s.notes);
        }
    }

    #[test]
    fn models_are_trimmed_and_split() {
        assert_eq!(
            split_models(&["a, b".into(), " c ".into()], "--models").unwrap(),
            vec!["a", "b", "c"]
        );
        assert_eq!(
            split_models(&["a,,b".into()], "--models").unwrap_err(),
            SettingsError::EmptyModel {
                origin: "--models".into(),
                list: "a,,b".into()
            }
        );
    }

    #[test]
    fn control_characters_are_refused_where_they_would_reach_git() {
        let msg = |text: &str| err(text).to_string();
        let m = msg("models:\n  - \"gpt-4o\\nSigned-off-by: M <m@example.invalid>\"\n");
        assert!(
            m.starts_with(
                "fanout.yml:2:5: key `models[0]`: a model name holds a control character (U+000A)"
            ),
            "{m}"
        );
        let m = msg("tasks:\n  - id: \"docs\\u001b[31m\"\n    prompt: Improve the docs\n");
        assert!(m.starts_with("fanout.yml:2:9: key `tasks[0].id`: the task's id holds a control character (U+001B)"), "{m}");
        let m = msg("tasks:\n  - \"ring \\a bell\"\n");
        assert!(
            m.contains("key `tasks[0]`: a prompt holds a control character (U+0007)"),
            "{m}"
        );
        // prompts may span lines
        assert!(
            parse_config(
                "tasks:\n  - |\n    line one\n    line two\n",
                Path::new("fanout.yml")
            )
            .is_ok()
        );

        let e = resolve(
            "",
            &PlanFlags {
                models: vec!["gpt-4o\n\nSigned-off-by: M".into()],
                ..flags(&["x"])
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(
                "--models: \"gpt-4o\\n\\nSigned-off-by: M\" holds a control character (U+000A)"
            ),
            "{e}"
        );
        let e = resolve("", &flags(&["fix \u{1b}[2J it"]))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--task: "), "{e}");
        let e = resolve(
            "",
            &PlanFlags {
                agent: Some("x\ny".into()),
                ..flags(&["x"])
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("--agent: "), "{e}");
        assert!(resolve("", &flags(&["two\nlines"])).is_ok());
    }

    #[test]
    fn flags_override_the_file() {
        let file = "parallel_runs:\n  workers: 4\n  max_steps: 9\n  timeout_per_worker: 60\ntasks: [from-file]\nmodels: [x]\n";
        let s = resolve(file, &PlanFlags::default()).unwrap();
        assert_eq!(s.workers, 4);
        assert_eq!(s.tasks[0].prompt, "from-file");
        assert_eq!(s.models, vec!["x"]);
        assert_eq!(s.timeout_per_worker, Some(Duration::from_secs(60)));
        let mut f = flags(&["from-flag"]);
        f.workers = Some(2);
        f.models = vec!["y, z".into()];
        f.timeout_per_worker = Some(5.0);
        let s = resolve(file, &f).unwrap();
        assert_eq!(s.workers, 2);
        assert_eq!(s.tasks.len(), 1);
        assert_eq!(s.tasks[0].prompt, "from-flag");
        assert_eq!(s.models, vec!["y", "z"]);
        assert_eq!(s.max_steps, 9);
        assert_eq!(s.timeout_per_worker, Some(Duration::from_secs(5)));
    }

    #[test]
    fn bad_flags_are_named() {
        let mut f = flags(&["t"]);
        f.workers = Some(0);
        assert_eq!(
            resolve("", &f).unwrap_err().to_string(),
            "--workers: expected an integer from 1 to 10, found 0"
        );
        assert_eq!(
            resolve("", &PlanFlags::default()).unwrap_err(),
            SettingsError::NoTasks
        );
        let s = resolve("", &flags(&["  "])).unwrap_err();
        assert_eq!(s.to_string(), "--task: task 1 is empty");
        let mut f = flags(&["t"]);
        f.branch_prefix = Some("bad..name".into());
        assert!(
            resolve("", &f)
                .unwrap_err()
                .to_string()
                .starts_with("--branch-prefix:")
        );
    }

    #[test]
    fn a_tasks_agent_must_be_defined_or_built_in() {
        let shown = |text: &str| {
            let e = err(text);
            format!("{e}\n{}", e.snippet().unwrap_or_default())
        };
        insta::assert_snapshot!(
            shown("tasks:\n  - id: review\n    prompt: review it\n    agent: codx\n"),
            @r"
        fanout.yml:4:12: key `tasks[0].agent`: no agent `codx` is defined under `agents:` or built in (claude, codex, aider, architect); did you mean `codex`? (for architect's own agent `codx`, define it: `agents: {codx: {agent: codx}}`)
          |
        4 |     agent: codx
          |            ^
        "
        );
        insta::assert_snapshot!(
            shown("agents:\n  writer: {command: [w, '{task}']}\ntasks:\n  - {prompt: fix it, agent: writr}\n"),
            @r"
        fanout.yml:4:29: key `tasks[0].agent`: no agent `writr` is defined under `agents:` or built in (claude, codex, aider, architect, writer); did you mean `writer`? (for architect's own agent `writr`, define it: `agents: {writr: {agent: writr}}`)
          |
        4 |   - {prompt: fix it, agent: writr}
          |                             ^
        "
        );
        let e = err("tasks:\n  - {prompt: x, agent: command}\n").to_string();
        assert!(
            e.starts_with(
                "fanout.yml:2:24: key `tasks[0].agent`: the `command` adapter needs a definition"
            ),
            "{e}"
        );
        let e = err("tasks:\n  - {prompt: x, agent: 'my agent'}\n").to_string();
        assert!(e.contains("may only hold letters"), "{e}");
        // Defined, built in, or one of architect's agents defined by name: fine.
        for ok in [
            "tasks:\n  - {prompt: x, agent: claude}\n",
            "agents: {review: {agent: review}}\ntasks:\n  - {prompt: x, agent: review}\n",
            "agents: {mine: {command: [m]}}\ntasks:\n  - {prompt: x, agent: mine}\n",
        ] {
            assert!(parse_config(ok, Path::new("fanout.yml")).is_ok(), "{ok}");
        }
    }

    const TWO_AGENTS: &str = "parallel_runs:\n  agent: writer\n  timeout_per_worker: 1h\n  budget_per_worker: 2\nagents:\n  writer: {command: [w, '{task}'], exclude: [.w/]}\n  reader: {command: [r, '{task}'], exclude: [.r/]}\nmodels: [m1, m2]\nchecks: [make test]\ntasks:\n  - {id: fix, prompt: fix it, timeout: 90s, checks: [make lint]}\n  - {id: review, prompt: review it, agent: reader, budget: 0.25, checks: [], output: findings, depends_on: [fix]}\n";

    #[test]
    fn a_tasks_own_settings_win_over_the_runs_and_the_flags() {
        let s = resolve(TWO_AGENTS, &PlanFlags::default()).unwrap();
        assert_eq!(s.agent.name, "writer");
        assert_eq!(s.task_agents.keys().collect::<Vec<_>>(), ["reader"]);
        assert_eq!(s.exclude, [".architect/", ".fanout/", ".w/", ".r/"]);
        let fix = &s.tasks[0];
        assert_eq!(
            (fix.agent.as_deref(), fix.timeout, fix.budget),
            (None, Some(90.0), None)
        );
        assert_eq!(fix.checks.as_ref().unwrap()[0].run, "make lint");
        let review = &s.tasks[1];
        assert_eq!(review.agent.as_deref(), Some("reader"));
        assert_eq!((review.timeout, review.budget), (None, Some(0.25)));
        assert_eq!(review.checks, Some(Vec::new()));
        // (m2's slot is the review's, on its own agent: said, not dropped.)
        assert_eq!(
            s.notes,
            [
                "models: no worker runs m2: the slot it would take runs a task with its own model or agent"
            ]
        );
        let agents: Vec<&str> = s
            .agents_used()
            .iter()
            .map(|(a, _)| a.name.as_str())
            .collect();
        assert_eq!(agents, ["writer", "reader"]);

        // Flags change the run's settings; a task's own stay, and a note says so.
        let f = PlanFlags {
            agent: Some("claude".into()),
            timeout_per_worker: Some(60.0),
            budget_per_worker: Some(1.0),
            ..PlanFlags::default()
        };
        let s = resolve(TWO_AGENTS, &f).unwrap();
        assert_eq!(s.agent.name, "claude");
        assert_eq!(s.task_agents.keys().collect::<Vec<_>>(), ["reader"]);
        assert_eq!(s.tasks[1].agent.as_deref(), Some("reader"));
        assert_eq!(s.timeout_per_worker, Some(Duration::from_secs(60)));
        assert_eq!(s.tasks[0].timeout, Some(90.0));
        assert_eq!(
            s.notes,
            [
                "--agent: not for task `review` — a task's own `agent:` wins over the flag",
                "--timeout-per-worker: not for task `fix` — a task's own `timeout:` wins over the flag",
                "--budget-per-worker: not for task `review` — a task's own `budget:` wins over the flag",
                "models: no worker runs m2: the slot it would take runs a task with its own model or agent",
            ]
        );
        // Command-line tasks replace the file's, their settings with them.
        let s = resolve(TWO_AGENTS, &flags(&["other"])).unwrap();
        assert!(s.task_agents.is_empty() && !s.tasks[0].overrides());
        assert!(s.notes.is_empty());
    }

    #[test]
    fn every_agent_a_task_runs_is_checked_before_the_run() {
        // Every task names its own agent: the run's (architect's `build`) is not needed.
        let s = resolve(
            "tasks:\n  - {prompt: a, agent: claude}\n  - {prompt: b, agent: codex}\n",
            &PlanFlags::default(),
        )
        .unwrap();
        let used: Vec<(&str, Choice)> = s
            .agents_used()
            .into_iter()
            .map(|(a, c)| (a.name.as_str(), c))
            .collect();
        assert_eq!(
            used,
            [
                ("claude", Choice::Task("`a`".into())),
                ("codex", Choice::Task("`b`".into()))
            ]
        );
        let e = crate::agent::preflight::check(
            s.agents_used()[1].0,
            &s.agents_used()[1].1,
            &[],
            Some(std::ffi::OsStr::new("/nonexistent")),
        )
        .unwrap_err();
        assert!(
            e.starts_with(
                "task `b`: agent codex: the agent's program `codex`, which is not on PATH"
            ),
            "{e}"
        );
    }

    #[test]
    fn an_empty_command_in_a_tasks_checks_is_named() {
        let e = resolve(
            "tasks:\n  - {prompt: a, checks: [' ']}\n",
            &PlanFlags::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "fanout.yml: tasks[0].checks[0]: empty command"
        );
    }

    #[test]
    fn excludes_always_hold_the_agents_state_dirs() {
        let s = resolve("exclude: [secrets.txt]\n", &flags(&["t"])).unwrap();
        assert_eq!(s.exclude, vec![".architect/", ".fanout/", "secrets.txt"]);
    }

    #[test]
    fn a_bad_entry_is_named_at_its_line() {
        let parse = |text: &str| {
            parse_config(text, Path::new("fanout.yml"))
                .map(drop)
                .map_err(|e| e.to_string())
        };
        let e = parse("tasks: [a]\nnetwork:\n  allow: [npm, npmm]\n").unwrap_err();
        assert!(
            e.starts_with("fanout.yml:3:16: key `network.allow[1]`: network allow-list entry \"npmm\": no such preset"),
            "{e}"
        );
        let e = parse("network:\n  allow:\n    - pypi\n    - \"bad host.com\"\n").unwrap_err();
        assert!(
            e.starts_with("fanout.yml:4:7: key `network.allow[1]`:")
                && e.contains("not a host name"),
            "{e}"
        );
        assert!(parse("network: {allow: [npm, \"*.corp.example\", \"10.0.0.2:8080\"]}\n").is_ok());
    }
}
