//! Matrix mode's shape: a plan cut into matrix chunks (`{"include": [{id, model,
//! agent, task}, …]}`), one after another in the workflow. The limits are GitHub's —
//! at most 256 jobs in one matrix ([`MATRIX_LIMIT`]) — and the workflow's: `fanout
//! init --kind matrix` writes [`MATRIX_CHUNKS`] matrix jobs, run in order. A plan with
//! task dependencies is cut wave by wave: a wave's workers fill chunks of their own
//! (as many as it needs), after those of the waves before it, so every worker's
//! dependencies ran in an earlier chunk.
//!
//! An entry names its worker and, for the job's name and steps, its model and agent;
//! the worker job runs it from the plan file (`fanout worker --plan … --id N`), which
//! carries everything the worker runs with — its agent's definition, its task's own
//! timeout, budget and checks — so the entry never has to.

use serde_json::{Value, json};

use super::{Plan, PlannedWorker};

/// Most jobs in one matrix: GitHub's limit.
pub const MATRIX_LIMIT: usize = 256;
/// Matrix chunks the workflow template consumes (`work-1` … `work-4`).
pub const MATRIX_CHUNKS: usize = 4;

/// GitHub's limit, as a refusal names it.
const GITHUB_LIMIT: &str = "GitHub runs at most 256 jobs in one matrix";

/// The matrix chunks of a plan: `{"include": [{"id", "model", "agent", "task"}, …]}`
/// each, at most [`MATRIX_LIMIT`] entries per chunk; the workflow runs the chunks one
/// after another. A plan with task dependencies comes out wave by wave: each wave in
/// as many chunks as it needs, after the chunks of the waves before it. Errors, naming
/// the limits, when more than [`MATRIX_CHUNKS`] chunks would be needed.
pub fn matrix_chunks(plan: &Plan) -> Result<Vec<Value>, String> {
    let waves = plan.workers.iter().map(|w| w.wave).max().unwrap_or(0) as usize + 1;
    let mut chunks: Vec<Value> = Vec::new();
    let mut per_wave: Vec<(usize, usize)> = Vec::new();
    for wave in 0..waves {
        let entries: Vec<Value> = plan
            .workers
            .iter()
            .filter(|w| w.wave as usize == wave)
            .map(entry)
            .collect();
        let before = chunks.len();
        chunks.extend(
            entries
                .chunks(MATRIX_LIMIT)
                .map(|c| json!({ "include": c })),
        );
        per_wave.push((entries.len(), chunks.len() - before));
    }
    if chunks.len() <= MATRIX_CHUNKS {
        return Ok(chunks);
    }
    Err(too_many(plan, &per_wave))
}

/// A worker's matrix entry.
fn entry(w: &PlannedWorker) -> Value {
    let first = w.task.prompt.lines().next().unwrap_or("").trim();
    let task: String = if first.chars().count() > 60 {
        format!("{}…", first.chars().take(59).collect::<String>())
    } else {
        first.to_owned()
    };
    json!({"id": w.id, "model": w.model_label(), "agent": w.agent, "task": task})
}

/// Why a plan needing more than [`MATRIX_CHUNKS`] chunks is refused: the limits, and
/// what each wave needs.
fn too_many(plan: &Plan, per_wave: &[(usize, usize)]) -> String {
    let needed: usize = per_wave.iter().map(|(_, c)| c).sum();
    let shape = if per_wave.len() == 1 {
        format!("the plan has {} workers", plan.workers.len())
    } else {
        let waves: Vec<String> = per_wave
            .iter()
            .enumerate()
            .map(|(i, (n, c))| format!("wave {}: {n} workers in {c}", i + 1))
            .collect();
        format!(
            "the plan's dependencies make {} waves ({})",
            per_wave.len(),
            waves.join(", ")
        )
    };
    format!(
        "{shape}, which need {needed} matrices; {GITHUB_LIMIT}, and the matrix workflow runs {MATRIX_CHUNKS} matrices one after another (at most {} workers, each wave in matrices of its own): run fewer tasks, or fewer waves",
        MATRIX_LIMIT * MATRIX_CHUNKS
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(waves: &[usize]) -> Plan {
        let workers: Vec<Value> = waves
            .iter()
            .enumerate()
            .flat_map(|(wave, n)| std::iter::repeat_n(wave, *n))
            .enumerate()
            .map(|(i, wave)| {
                json!({"id": i + 1, "task": {"prompt": "x"}, "model": null, "agent": "a",
                       "branch": format!("fanout/r/w{}-x", i + 1), "wave": wave})
            })
            .collect();
        serde_json::from_value(json!({
            "schema_version": 1, "run_id": "r", "concurrency": 1,
            "base": {"requested": "HEAD", "branch": null, "commit": "0".repeat(40)},
            "agent": {"name": "a", "adapter": "command", "program": "a", "args": []},
            "limits": {"max_steps": 1, "budget_per_worker": null, "timeout_per_worker": null,
                       "kill_grace": 1.0},
            "exclude": [], "workers": workers,
        }))
        .unwrap()
    }

    fn sizes(chunks: &[Value]) -> Vec<usize> {
        chunks
            .iter()
            .map(|c| c["include"].as_array().unwrap().len())
            .collect()
    }

    #[test]
    fn a_wave_larger_than_a_matrix_is_split_and_waves_stay_in_order() {
        assert_eq!(
            sizes(&matrix_chunks(&plan(&[300, 1])).unwrap()),
            [256, 44, 1]
        );
        assert_eq!(sizes(&matrix_chunks(&plan(&[3, 2])).unwrap()), [3, 2]);
        assert_eq!(
            sizes(&matrix_chunks(&plan(&[600])).unwrap()),
            [256, 256, 88]
        );
        let chunks = matrix_chunks(&plan(&[300, 1])).unwrap();
        assert_eq!(chunks[2]["include"][0]["id"], 301);
        assert_eq!(chunks[1]["include"][43]["id"], 300);
    }

    #[test]
    fn refusals_name_githubs_limit_and_what_each_wave_needs() {
        let e = matrix_chunks(&plan(&[1025])).unwrap_err();
        assert!(e.starts_with("the plan has 1025 workers, which need 5 matrices; GitHub runs at most 256 jobs in one matrix"), "{e}");
        assert_eq!(
            sizes(&matrix_chunks(&plan(&[300, 300])).unwrap()),
            [256, 44, 256, 44]
        );
        let e = matrix_chunks(&plan(&[300, 300, 1])).unwrap_err();
        assert!(
            e.contains("3 waves (wave 1: 300 workers in 2, wave 2: 300 workers in 2, wave 3: 1 workers in 1), which need 5 matrices"),
            "{e}"
        );
        let e = matrix_chunks(&plan(&[1, 1, 1, 1, 1])).unwrap_err();
        assert!(e.contains("5 waves"), "{e}");
        assert!(
            e.contains("GitHub runs at most 256 jobs in one matrix"),
            "{e}"
        );
    }
}
