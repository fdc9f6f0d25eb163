//! Matrix mode's shape: a plan cut into matrix chunks (`{"include": [{id, model,
//! agent, task}, …]}`), one after another in the workflow, within the platform's limit
//! of 256 jobs per matrix. A plan with task dependencies is cut into waves instead.
//!
//! An entry names its worker and, for the job's name and steps, its model and agent;
//! the worker job runs it from the plan file (`fanout worker --plan … --id N`), which
//! carries everything the worker runs with — its agent's definition, its task's own
//! timeout, budget and checks — so the entry never has to.

use serde_json::{Value, json};

use super::{Plan, PlannedWorker};

/// Most jobs in one matrix.
pub const MATRIX_LIMIT: usize = 256;
/// Matrix chunks the workflow template consumes (`work-1` … `work-4`).
pub const MATRIX_CHUNKS: usize = 4;

/// The matrix chunks of a plan: `{"include": [{"id", "model", "agent", "task"}, …]}` each, at most
/// [`MATRIX_LIMIT`] entries per chunk; the workflow runs the chunks one after another.
/// A plan with task dependencies comes out in waves instead: chunk N holds the workers
/// of wave N−1, so every worker's dependencies ran in an earlier chunk. Errors when more
/// than [`MATRIX_CHUNKS`] chunks would be needed.
pub fn matrix_chunks(plan: &Plan) -> Result<Vec<Value>, String> {
    let entry = |w: &PlannedWorker| {
        let first = w.task.prompt.lines().next().unwrap_or("").trim();
        let task: String = if first.chars().count() > 60 {
            format!("{}…", first.chars().take(59).collect::<String>())
        } else {
            first.to_owned()
        };
        json!({"id": w.id, "model": w.model_label(), "agent": w.agent, "task": task})
    };
    if plan.workers.iter().any(|w| w.wave > 0) {
        let waves = plan.workers.iter().map(|w| w.wave).max().unwrap_or(0) as usize + 1;
        if waves > MATRIX_CHUNKS {
            return Err(format!(
                "the plan's dependencies make {waves} waves; a matrix workflow runs at most {MATRIX_CHUNKS}"
            ));
        }
        let mut chunks = Vec::new();
        for wave in 0..waves {
            let entries: Vec<Value> = plan
                .workers
                .iter()
                .filter(|w| w.wave as usize == wave)
                .map(entry)
                .collect();
            if entries.len() > MATRIX_LIMIT {
                return Err(format!(
                    "wave {} of the plan has {} workers; a matrix chunk holds at most {MATRIX_LIMIT}",
                    wave + 1,
                    entries.len()
                ));
            }
            chunks.push(json!({ "include": entries }));
        }
        return Ok(chunks);
    }
    let entries: Vec<Value> = plan.workers.iter().map(entry).collect();
    let chunks: Vec<Value> = entries
        .chunks(MATRIX_LIMIT)
        .map(|c| json!({ "include": c }))
        .collect();
    if chunks.len() > MATRIX_CHUNKS {
        return Err(format!(
            "the plan has {} workers; a matrix workflow runs at most {} ({} chunks of {})",
            plan.workers.len(),
            MATRIX_LIMIT * MATRIX_CHUNKS,
            MATRIX_CHUNKS,
            MATRIX_LIMIT
        ));
    }
    Ok(chunks)
}
