//! Assigning tasks and models to workers: [`build`] turns validated settings into a
//! [`Plan`], one [`PlannedWorker`] per worker run, with branch names.
//!
//! # Assignment rules
//!
//! With `T` tasks, `M` models and `W` workers (slots):
//!
//! * Without `--cross` there are `N = max(W, T, M)` worker runs. Run `i` (0-based) gets
//!   task `i mod T` (round-robin, so more workers than tasks repeats tasks starting with
//!   the first), and model `M[i mod S]` where `S = max(W, M)` is the number of model
//!   slots, or the agent's default model when that slot has no model (more workers than
//!   models: the extra workers use the default model). Nothing is dropped: more tasks
//!   than workers still runs every task, and `W` becomes the cap on how many run at once.
//! * With `--cross`, every task runs on every model (`N = T × max(M, 1)`).
//! * A task pinned to a model (`{prompt, model}`) always runs on that model; under
//!   `--cross` it runs once.
//! * A task that names its own agent (`{prompt, agent}`, another than the run's) and
//!   no model runs on that agent's default model: `models:` are models of the run's
//!   agent. Like a pinned task, it runs once under `--cross`.
//!
//! Each worker runs its task's agent, timeout, budget and checks when the task sets
//! them, else the run's ([`Plan::agent_of`], [`Plan::limits_of`], [`Plan::checks_of`]).
//!
//! Worker ids are 1-based and stable: they follow the order above.

use super::settings::Settings;
use super::slots::assign;
use super::{Base, Limits, PLAN_SCHEMA_VERSION, Plan, PlannedWorker, Task};

impl Task {
    /// The task's key, across runs: its `id`, else a slug of its prompt (its stable
    /// branch is `<prefix>/<key>`).
    pub fn key(&self) -> String {
        match &self.id {
            Some(id) => slug(id, 48),
            None => slug(&self.prompt, 48),
        }
    }
}

/// Build the plan for `settings`, starting from `base`, under `run_id`.
pub fn build(settings: &Settings, base: Base, run_id: &str) -> Plan {
    let assignments = assign(
        &settings.tasks,
        &settings.models,
        settings.workers,
        (settings.cross, &settings.agent.name),
    );
    let workers = assignments
        .into_iter()
        .enumerate()
        .map(|(i, (task, model))| {
            let id = i as u32 + 1;
            let branch = branch_name(&settings.branch_prefix, run_id, id, &task);
            PlannedWorker {
                id,
                agent: task
                    .agent
                    .clone()
                    .unwrap_or_else(|| settings.agent.name.clone()),
                task,
                model,
                branch,
                depends_on: Vec::new(),
                wave: 0,
            }
        })
        .collect();
    let workers = super::deps::link_dependencies(workers);
    let mut plan = Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        run_id: run_id.to_owned(),
        base,
        concurrency: settings.workers,
        agent: settings.agent.clone(),
        agents: settings.task_agents.clone(),
        limits: Limits {
            max_steps: settings.max_steps,
            budget_per_worker: settings.budget_per_worker,
            timeout_per_worker: settings.timeout_per_worker.map(|d| d.as_secs_f64()),
            kill_grace: settings.kill_grace.as_secs_f64(),
            inactivity_timeout: settings.inactivity_timeout.map(|d| d.as_secs_f64()),
            budget_total: settings.budget_total,
        },
        exclude: settings.exclude.clone(),
        workers,
        checks: settings.checks.clone(),
        setup: settings.setup.clone(),
        select: settings.select,
        sandbox: settings.sandbox,
        hidden: settings.hidden.clone(),
        network: settings.network.clone(),
        fail_on: settings.fail_on,
        settled: settings.settled.clone(),
        fanin: None,
    };
    plan.schema_version = plan.version_needed();
    plan
}

/// `prefix/run_id/wN-slug`: unique per run, readable in PR lists.
pub fn branch_name(prefix: &str, run_id: &str, id: u32, task: &Task) -> String {
    let source = task.id.as_deref().unwrap_or(&task.prompt);
    let slug = slug(source, 32);
    if slug.is_empty() {
        format!("{prefix}/{run_id}/w{id}")
    } else {
        format!("{prefix}/{run_id}/w{id}-{slug}")
    }
}

/// Lower-case ASCII words joined by `-`, at most `max` bytes, cut at a word boundary;
/// non-ASCII text is transliterated first (`añade` → `anade`, `日本` → `ri-ben`).
pub fn slug(text: &str, max: usize) -> String {
    let text = deunicode::deunicode(text);
    let mut out = String::new();
    for word in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_ascii_lowercase();
        let extra = if out.is_empty() {
            word.len()
        } else {
            word.len() + 1
        };
        if out.len() + extra > max {
            if out.is_empty() {
                out.push_str(&word[..max]);
            }
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word);
    }
    out
}

/// The plan of `fanout.yml` text `yml` with `flags`, at base commit `0…0` and run id
/// `r` (for unit tests of later stages).
#[cfg(test)]
pub(crate) fn of_text(yml: &str, flags: &super::settings::PlanFlags) -> Plan {
    let path = std::path::Path::new("fanout.yml");
    let cfg = crate::config::parse(yml, path).unwrap();
    let settings = Settings::resolve(&cfg, path, flags).unwrap();
    let base = Base {
        requested: "HEAD".into(),
        branch: None,
        commit: "0".repeat(40),
    };
    build(&settings, base, "r")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_transliterate_non_ascii() {
        assert_eq!(slug("Añade un botón", 32), "anade-un-boton");
        assert_eq!(slug("Straße über Köln", 32), "strasse-uber-koln");
        assert_eq!(slug("日本語", 32), "ri-ben-yu");
        assert_eq!(slug("ÆØÅ!!", 2), "ae");
    }

    fn tasks(names: &[&str]) -> Vec<Task> {
        names
            .iter()
            .map(|p| Task {
                prompt: p.to_string(),
                ..Task::default()
            })
            .collect()
    }
    fn models(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }
    fn shape(a: &[(Task, Option<String>)]) -> Vec<(String, String)> {
        a.iter()
            .map(|(t, m)| (t.prompt.clone(), m.clone().unwrap_or("default".into())))
            .collect()
    }
    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn one_task_three_workers_two_models() {
        let a = assign(&tasks(&["t"]), &models(&["a", "b"]), 3, (false, "a"));
        assert_eq!(
            shape(&a),
            pairs(&[("t", "a"), ("t", "b"), ("t", "default")])
        );
    }

    #[test]
    fn more_workers_than_tasks_round_robins_from_the_first() {
        let a = assign(&tasks(&["x", "y"]), &[], 3, (false, "a"));
        assert_eq!(
            shape(&a),
            pairs(&[("x", "default"), ("y", "default"), ("x", "default")])
        );
    }

    #[test]
    fn more_tasks_than_workers_drops_nothing() {
        let a = assign(
            &tasks(&["1", "2", "3", "4"]),
            &models(&["a", "b"]),
            2,
            (false, "a"),
        );
        assert_eq!(
            shape(&a),
            pairs(&[("1", "a"), ("2", "b"), ("3", "a"), ("4", "b")])
        );
    }

    #[test]
    fn more_models_than_workers_runs_every_model() {
        let a = assign(&tasks(&["t"]), &models(&["a", "b", "c"]), 2, (false, "a"));
        assert_eq!(shape(&a), pairs(&[("t", "a"), ("t", "b"), ("t", "c")]));
    }

    #[test]
    fn cross_runs_every_pair_and_pinned_tasks_once() {
        let mut ts = tasks(&["x", "y"]);
        ts[1].model = Some("pinned".into());
        let a = assign(&ts, &models(&["a", "b"]), 1, (true, "a"));
        assert_eq!(shape(&a), pairs(&[("x", "a"), ("x", "b"), ("y", "pinned")]));
        let a = assign(&tasks(&["x", "y"]), &[], 3, (true, "a"));
        assert_eq!(shape(&a), pairs(&[("x", "default"), ("y", "default")]));
    }

    #[test]
    fn pinned_model_wins_over_the_list() {
        let mut ts = tasks(&["x"]);
        ts[0].model = Some("m".into());
        let a = assign(&ts, &models(&["a"]), 2, (false, "a"));
        assert_eq!(shape(&a), pairs(&[("x", "m"), ("x", "m")]));
    }

    #[test]
    fn a_task_with_its_own_agent_runs_its_default_model_unless_pinned() {
        let mut ts = tasks(&["x", "y", "z"]);
        ts[1].agent = Some("b".into());
        ts[2].agent = Some("a".into()); // the run's agent: the list applies
        let a = assign(&ts, &models(&["m1", "m2", "m3"]), 3, (false, "a"));
        assert_eq!(
            shape(&a),
            pairs(&[("x", "m1"), ("y", "default"), ("z", "m3")])
        );
        let a = assign(&ts, &models(&["m1", "m2"]), 1, (true, "a"));
        assert_eq!(
            shape(&a),
            pairs(&[
                ("x", "m1"),
                ("x", "m2"),
                ("y", "default"),
                ("z", "m1"),
                ("z", "m2")
            ])
        );
        ts[1].model = Some("pinned".into());
        let a = assign(&ts, &models(&["m1"]), 1, (true, "a"));
        assert_eq!(shape(&a)[1], ("y".to_owned(), "pinned".to_owned()));
    }

    fn two_agent_plan() -> Plan {
        let file = crate::config::parse(
            "parallel_runs:\n  agent: writer\n  workers: 2\n  timeout_per_worker: 1h\n  budget_per_worker: 2\nagents:\n  writer: {command: [w, '{task}']}\n  reader: {command: [r, '{task}'], allow_github_token: true}\nchecks: [make test]\ntasks:\n  - {id: fix, prompt: fix it, timeout: 90s, checks: [make lint]}\n  - {id: review, prompt: review it, agent: reader, budget: 0.25, checks: [], output: findings, depends_on: [fix]}\n  - {id: docs, prompt: write docs}\n",
            std::path::Path::new("fanout.yml"),
        )
        .unwrap();
        let settings = Settings::resolve(
            &file,
            std::path::Path::new("fanout.yml"),
            &Default::default(),
        )
        .unwrap();
        let base = Base {
            requested: "HEAD".into(),
            branch: None,
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
        };
        build(&settings, base, "r1")
    }

    #[test]
    fn each_worker_carries_its_tasks_agent_limits_and_checks() {
        let plan = two_agent_plan();
        let by_task = |id: &str| {
            plan.workers
                .iter()
                .find(|w| w.task.id.as_deref() == Some(id))
                .unwrap()
        };
        let (fix, review, docs) = (by_task("fix"), by_task("review"), by_task("docs"));
        assert_eq!(
            [&fix.agent, &review.agent, &docs.agent],
            ["writer", "reader", "writer"]
        );
        assert_eq!(plan.agent_of(review).program, "r");
        assert_eq!(plan.agent_of(fix).program, "w");
        assert!(plan.agent_of(review).allow_github_token && !plan.agent_of(fix).allow_github_token);
        let limits = |w| {
            let l = plan.limits_of(w);
            (l.timeout, l.budget)
        };
        assert_eq!(limits(fix), (Some(90.0), Some(2.0)));
        assert_eq!(limits(review), (Some(3600.0), Some(0.25)));
        assert_eq!(limits(docs), (Some(3600.0), Some(2.0)));
        let checks =
            |w| -> Vec<&str> { plan.checks_of(w).iter().map(|c| c.run.as_str()).collect() };
        assert_eq!(checks(fix), ["make lint"]);
        assert!(checks(review).is_empty());
        assert_eq!(checks(docs), ["make test"]);
        assert_eq!(plan.agents_label(), "agents writer, reader");
        assert_eq!(review.model_cell(plan.several_agents()), "default (reader)");

        // Written as version 2 (a fanout that would ignore the overrides refuses it),
        // read back whole.
        assert_eq!(plan.schema_version, crate::plan::PLAN_OVERRIDES_VERSION);
        let json = serde_json::to_vec(&plan).unwrap();
        assert_eq!(Plan::parse(&json).unwrap(), plan);
        let mut v9: serde_json::Value = serde_json::from_slice(&json).unwrap();
        v9["schema_version"] = 9.into();
        let e = Plan::parse(v9.to_string().as_bytes()).unwrap_err();
        assert!(e.contains("plan version 9 is not supported"), "{e}");

        // The matrix names each worker's agent (the review in the second wave, after the
        // fix it depends on); the worker job takes the rest from the plan.
        let chunks = crate::plan::matrix::matrix_chunks(&plan).unwrap();
        let agents: Vec<(u64, &str)> = chunks
            .iter()
            .flat_map(|c| c["include"].as_array().unwrap())
            .map(|e| (e["id"].as_u64().unwrap(), e["agent"].as_str().unwrap()))
            .collect();
        assert_eq!(agents, [(1, "writer"), (3, "writer"), (2, "reader")]);
    }

    #[test]
    fn a_plan_without_overrides_stays_version_1() {
        let mut plan = two_agent_plan();
        for w in &mut plan.workers {
            w.task.agent = None;
            w.task.timeout = None;
            w.task.budget = None;
            w.task.checks = None;
        }
        plan.agents.clear();
        assert_eq!(plan.version_needed(), crate::plan::PLAN_SCHEMA_VERSION);
    }

    #[test]
    fn branch_names_are_scoped_and_valid() {
        let t = Task {
            id: None,
            prompt: "Fix the *login* bug in auth.rs — quickly, please!".into(),
            ..Task::default()
        };
        let b = branch_name("fanout", "20261123-014512-3fa2", 3, &t);
        assert_eq!(
            b,
            "fanout/20261123-014512-3fa2/w3-fix-the-login-bug-in-auth-rs"
        );
        assert!(git2::Reference::is_valid_name(&format!("refs/heads/{b}")));
        let t = Task {
            id: Some("docs".into()),
            prompt: "whatever".into(),
            ..Task::default()
        };
        assert_eq!(branch_name("p", "r", 1, &t), "p/r/w1-docs");
        let t = Task {
            id: None,
            prompt: "日本語".into(),
            ..Task::default()
        };
        assert_eq!(branch_name("p", "r", 2, &t), "p/r/w2-ri-ben-yu");
        let t = Task {
            prompt: "!!! ???".into(),
            ..t
        };
        assert_eq!(branch_name("p", "r", 2, &t), "p/r/w2");
    }
}
