//! Which task and model each worker of a plan runs (the assignment rules of
//! [`super::assign`]'s module docs): a pure function of the tasks, the models and the
//! number of workers, read by the plan's builder and by the settings (which say what
//! it leaves out).

use super::Task;

/// The model a task runs on whatever `models` says: `Some(model)` when it is pinned
/// to one, `Some(None)` (its agent's default) when it names an agent other than the
/// run's `run_agent` and no model; `None` when it takes its model from the list.
fn own_model(task: &Task, run_agent: &str) -> Option<Option<String>> {
    match (&task.model, &task.agent) {
        (Some(m), _) => Some(Some(m.clone())),
        (None, Some(a)) if a != run_agent => Some(None),
        _ => None,
    }
}

/// The assignment rules ([`super::assign`]'s module docs): `(task, model)` per worker run;
/// `(cross, run_agent)`: `--cross`, and the name of the run's agent.
pub fn assign(
    tasks: &[Task],
    models: &[String],
    workers: u32,
    (cross, run_agent): (bool, &str),
) -> Vec<(Task, Option<String>)> {
    if tasks.is_empty() {
        return Vec::new();
    }
    if cross {
        let mut out = Vec::new();
        for task in tasks {
            if let Some(m) = own_model(task, run_agent) {
                out.push((task.clone(), m));
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
            let model =
                own_model(&task, run_agent).unwrap_or_else(|| models.get(i % slots).cloned());
            (task, model)
        })
        .collect()
}
