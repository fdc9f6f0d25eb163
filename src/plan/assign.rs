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
//!
//! Worker ids are 1-based and stable: they follow the order above.

use super::settings::Settings;
use super::{Base, Limits, PLAN_SCHEMA_VERSION, Plan, PlannedWorker, Task};

/// Build the plan for `settings`, starting from `base`, under `run_id`.
pub fn build(settings: &Settings, base: Base, run_id: &str) -> Plan {
    let assignments = assign(
        &settings.tasks,
        &settings.models,
        settings.workers,
        settings.cross,
    );
    let workers = assignments
        .into_iter()
        .enumerate()
        .map(|(i, (task, model))| {
            let id = i as u32 + 1;
            let branch = branch_name(&settings.branch_prefix, run_id, id, &task);
            PlannedWorker {
                id,
                task,
                model,
                agent: settings.agent.name.clone(),
                branch,
                depends_on: Vec::new(),
                wave: 0,
            }
        })
        .collect();
    let workers = super::deps::link_dependencies(workers);
    Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        run_id: run_id.to_owned(),
        base,
        concurrency: settings.workers,
        agent: settings.agent.clone(),
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
        fail_on: settings.fail_on,
    }
}

/// The assignment rules (see the module docs): `(task, model)` per worker run.
pub fn assign(
    tasks: &[Task],
    models: &[String],
    workers: u32,
    cross: bool,
) -> Vec<(Task, Option<String>)> {
    if tasks.is_empty() {
        return Vec::new();
    }
    if cross {
        let mut out = Vec::new();
        for task in tasks {
            if let Some(m) = &task.model {
                out.push((task.clone(), Some(m.clone())));
            } else if models.is_empty() {
                out.push((task.clone(), None));
            } else {
                for m in models {
                    out.push((task.clone(), Some(m.clone())));
                }
            }
        }
        return out;
    }
    let w = workers.max(1) as usize;
    let slots = w.max(models.len());
    let n = slots.max(tasks.len());
    (0..n)
        .map(|i| {
            let task = tasks[i % tasks.len()].clone();
            let model = task
                .model
                .clone()
                .or_else(|| models.get(i % slots).cloned());
            (task, model)
        })
        .collect()
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
        let a = assign(&tasks(&["t"]), &models(&["a", "b"]), 3, false);
        assert_eq!(
            shape(&a),
            pairs(&[("t", "a"), ("t", "b"), ("t", "default")])
        );
    }

    #[test]
    fn more_workers_than_tasks_round_robins_from_the_first() {
        let a = assign(&tasks(&["x", "y"]), &[], 3, false);
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
            false,
        );
        assert_eq!(
            shape(&a),
            pairs(&[("1", "a"), ("2", "b"), ("3", "a"), ("4", "b")])
        );
    }

    #[test]
    fn more_models_than_workers_runs_every_model() {
        let a = assign(&tasks(&["t"]), &models(&["a", "b", "c"]), 2, false);
        assert_eq!(shape(&a), pairs(&[("t", "a"), ("t", "b"), ("t", "c")]));
    }

    #[test]
    fn cross_runs_every_pair_and_pinned_tasks_once() {
        let mut ts = tasks(&["x", "y"]);
        ts[1].model = Some("pinned".into());
        let a = assign(&ts, &models(&["a", "b"]), 1, true);
        assert_eq!(shape(&a), pairs(&[("x", "a"), ("x", "b"), ("y", "pinned")]));
        let a = assign(&tasks(&["x", "y"]), &[], 3, true);
        assert_eq!(shape(&a), pairs(&[("x", "default"), ("y", "default")]));
    }

    #[test]
    fn pinned_model_wins_over_the_list() {
        let mut ts = tasks(&["x"]);
        ts[0].model = Some("m".into());
        let a = assign(&ts, &models(&["a"]), 2, false);
        assert_eq!(shape(&a), pairs(&[("x", "m"), ("x", "m")]));
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
