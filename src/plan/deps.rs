//! Task dependencies (`depends_on`): the order tasks are planned in (every task after
//! the tasks it depends on), and each planned worker's dependencies and wave (0 for
//! workers without dependencies; one more than their latest dependency's otherwise).
//! Matrix mode runs one wave per matrix chunk.

use std::collections::BTreeMap;

use super::{PlannedWorker, Task};

/// Tasks reordered so every task comes after the tasks it depends on (otherwise in
/// file order). Unknown ids and cycles are errors naming the ids.
pub fn order_by_dependencies(tasks: Vec<Task>, origin: &str) -> Result<Vec<Task>, String> {
    if tasks.iter().all(|t| t.depends_on.is_empty()) {
        return Ok(tasks);
    }
    let index: std::collections::BTreeMap<&str, usize> = tasks
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.id.as_deref().map(|id| (id, i)))
        .collect();
    for (i, t) in tasks.iter().enumerate() {
        for d in &t.depends_on {
            if !index.contains_key(d.as_str()) {
                let known: Vec<&str> = index.keys().copied().collect();
                return Err(format!(
                    "{origin}: tasks[{i}].depends_on: no task has id {d:?} (ids: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ));
            }
            if t.id.as_deref() == Some(d.as_str()) {
                return Err(format!(
                    "{origin}: tasks[{i}].depends_on: task {d:?} depends on itself"
                ));
            }
        }
    }
    // Kahn's algorithm, always taking the earliest ready task in file order.
    let n = tasks.len();
    let deps: Vec<Vec<usize>> = tasks
        .iter()
        .map(|t| t.depends_on.iter().map(|d| index[d.as_str()]).collect())
        .collect();
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let next = (0..n).find(|&i| !done[i] && deps[i].iter().all(|&d| done[d]));
        match next {
            Some(i) => {
                done[i] = true;
                order.push(i);
            }
            None => {
                // Walk the dependencies of an unfinished task until one repeats.
                let start = (0..n).find(|&i| !done[i]).expect("some task is left");
                let mut path = vec![start];
                let mut cur = start;
                loop {
                    cur = *deps[cur]
                        .iter()
                        .find(|&&d| !done[d])
                        .expect("blocked on an unfinished task");
                    if let Some(pos) = path.iter().position(|&p| p == cur) {
                        let cycle: Vec<&str> = path[pos..]
                            .iter()
                            .chain(std::iter::once(&cur))
                            .map(|&i| tasks[i].id.as_deref().unwrap_or("?"))
                            .collect();
                        return Err(format!(
                            "{origin}: tasks: dependency cycle {}",
                            cycle.join(" → ")
                        ));
                    }
                    path.push(cur);
                }
            }
        }
    }
    let mut slots: Vec<Option<Task>> = tasks.into_iter().map(Some).collect();
    Ok(order
        .into_iter()
        .map(|i| slots[i].take().expect("each once"))
        .collect())
}

/// Fill each worker's `depends_on` (the workers of the tasks its task depends on) and
/// `wave`. Tasks come ordered with dependencies first (settings), so one pass works.
pub fn link_dependencies(mut workers: Vec<PlannedWorker>) -> Vec<PlannedWorker> {
    let by_task: BTreeMap<String, Vec<u32>> = workers.iter().fold(BTreeMap::new(), |mut m, w| {
        if let Some(id) = &w.task.id {
            m.entry(id.clone()).or_insert_with(Vec::new).push(w.id);
        }
        m
    });
    let mut waves: BTreeMap<u32, u32> = BTreeMap::new();
    for w in &mut workers {
        let mut deps: Vec<u32> = w
            .task
            .depends_on
            .iter()
            .flat_map(|d| by_task.get(d).cloned().unwrap_or_default())
            .collect();
        deps.sort_unstable();
        deps.dedup();
        w.wave = deps
            .iter()
            .filter_map(|d| waves.get(d))
            .map(|v| v + 1)
            .max()
            .unwrap_or(0);
        waves.insert(w.id, w.wave);
        w.depends_on = deps;
    }
    workers
}
