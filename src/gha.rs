//! GitHub Actions plumbing: step outputs (`$GITHUB_OUTPUT`), the matrix shape, and
//! the limits of the platform (256 jobs per matrix, 1 MB of outputs per job).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::plan::Plan;

/// Most jobs in one matrix.
pub const MATRIX_LIMIT: usize = 256;
/// Matrix chunks the workflow template consumes (`work-1` … `work-4`).
pub const MATRIX_CHUNKS: usize = 4;
/// Keep any one output well under the 1 MB per-job limit.
pub const OUTPUT_LIMIT: usize = 700 * 1024;

/// Whether fanout runs inside GitHub Actions.
pub fn in_actions() -> bool {
    std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true")
}

/// `$GITHUB_OUTPUT`, when set.
pub fn output_file() -> Option<PathBuf> {
    std::env::var_os("GITHUB_OUTPUT")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Append `name=value` to an outputs file, in the multi-line form when needed.
pub fn write_output(file: &Path, name: &str, value: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)?;
    if value.contains('\n') || value.contains('\r') {
        let mut delimiter = format!("FANOUT_EOF_{}", crate::repo::fnv1a(value.as_bytes()));
        while value.contains(&delimiter) {
            delimiter.push('_');
        }
        writeln!(f, "{name}<<{delimiter}\n{value}\n{delimiter}")
    } else {
        writeln!(f, "{name}={value}")
    }
}

/// The matrix chunks of a plan: `{"include": [{"id", "model", "task"}, …]}` each, at most
/// [`MATRIX_LIMIT`] entries per chunk; the workflow runs the chunks one after another.
/// A plan with task dependencies comes out in waves instead: chunk N holds the workers
/// of wave N−1, so every worker's dependencies ran in an earlier chunk. Errors when more
/// than [`MATRIX_CHUNKS`] chunks would be needed.
pub fn matrix_chunks(plan: &Plan) -> Result<Vec<Value>, String> {
    let entry = |w: &crate::plan::PlannedWorker| {
        let first = w.task.prompt.lines().next().unwrap_or("").trim();
        let task: String = if first.chars().count() > 60 {
            format!("{}…", first.chars().take(59).collect::<String>())
        } else {
            first.to_owned()
        };
        json!({"id": w.id, "model": w.model_label(), "task": task})
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

/// Write the plan's matrix outputs: `count`, `chunks`, `matrix`, `matrix-1..4`,
/// `count-1..4`. Empty chunks get `count-N=0` and an empty (never used) matrix.
pub fn write_matrix_outputs(file: &Path, plan: &Plan) -> Result<(), String> {
    let chunks = matrix_chunks(plan)?;
    let io = |e: std::io::Error| format!("{}: {e}", file.display());
    write_output(file, "count", &plan.workers.len().to_string()).map_err(io)?;
    write_output(file, "chunks", &chunks.len().to_string()).map_err(io)?;
    let empty = json!({"include": []});
    write_output(
        file,
        "matrix",
        &chunks.first().unwrap_or(&empty).to_string(),
    )
    .map_err(io)?;
    for i in 0..MATRIX_CHUNKS {
        let chunk = chunks.get(i).unwrap_or(&empty);
        let n = chunk["include"].as_array().map_or(0, Vec::len);
        write_output(file, &format!("matrix-{}", i + 1), &chunk.to_string()).map_err(io)?;
        write_output(file, &format!("count-{}", i + 1), &n.to_string()).map_err(io)?;
    }
    Ok(())
}

/// The `results` output: the report without its plan, compact; reduced to totals when
/// too large for a job output.
pub fn results_output(report: &crate::result::RunReport) -> String {
    let full = json!({
        "run_id": report.run_id,
        "exit_code": report.exit_code,
        "interrupted": report.interrupted,
        "totals": report.totals,
        "results": report.results,
    })
    .to_string();
    if full.len() <= OUTPUT_LIMIT {
        return full;
    }
    json!({
        "run_id": report.run_id,
        "exit_code": report.exit_code,
        "interrupted": report.interrupted,
        "totals": report.totals,
        "truncated": true,
    })
    .to_string()
}

/// Write the outputs of a finished run: `count`, `results` (JSON), and the paths of
/// the full report (`report`, results.json) and of the Markdown `summary`.
pub fn write_run_outputs(
    file: &Path,
    report: &crate::result::RunReport,
    paths: &crate::report::ReportPaths,
) -> std::io::Result<()> {
    write_output(file, "count", &report.results.len().to_string())?;
    write_output(file, "results", &results_output(report))?;
    write_output(file, "report", &paths.results.display().to_string())?;
    write_output(file, "summary", &paths.summary.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_line_outputs_use_a_delimiter() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("out");
        write_output(&f, "a", "one").unwrap();
        write_output(&f, "b", "x\ny").unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("a=one"));
        let head = lines.next().unwrap();
        let delim = head.strip_prefix("b<<").unwrap();
        assert_eq!(lines.next(), Some("x"));
        assert_eq!(lines.next(), Some("y"));
        assert_eq!(lines.next(), Some(delim));
    }
}
