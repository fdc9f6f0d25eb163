//! Step outputs (`$GITHUB_OUTPUT`) of `fanout plan` (the matrix chunks of
//! [`crate::plan::matrix`]) and of a finished run (counts, results, report paths),
//! within the platform's limit of 1 MB of outputs per job.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::plan::Plan;
use crate::plan::matrix::{MATRIX_CHUNKS, matrix_chunks};
use crate::report::summary::ReportPaths;
use crate::run::results::RunReport;

/// Keep any one output well under the 1 MB per-job limit.
pub const OUTPUT_LIMIT: usize = 700 * 1024;

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

/// Write the plan's matrix outputs: `count`, `chunks`, `matrix`, `matrix-1..4`,
/// `count-1..4`, and `max-parallel` (the plan's `workers`: how many worker jobs may run
/// at once, for each matrix's `strategy.max-parallel`). Empty chunks get `count-N=0`
/// and an empty (never used) matrix.
pub fn write_matrix_outputs(file: &Path, plan: &Plan) -> Result<(), String> {
    let chunks = matrix_chunks(plan)?;
    let io = |e: std::io::Error| format!("{}: {e}", file.display());
    write_output(file, "count", &plan.workers.len().to_string()).map_err(io)?;
    write_output(file, "max-parallel", &plan.concurrency.max(1).to_string()).map_err(io)?;
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

/// The `results` output's shape: the report's fields but its plan.
#[derive(serde::Serialize)]
struct ResultsOutput<'a> {
    exit_code: i32,
    interrupted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    results: Option<&'a [crate::model::WorkerResult]>,
    run_id: &'a str,
    totals: &'a crate::model::Totals,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
}

/// The `results` output: the report without its plan, compact; reduced to totals when
/// too large for a job output.
pub fn results_output(report: &RunReport) -> String {
    let mut out = ResultsOutput {
        exit_code: report.exit_code,
        interrupted: report.interrupted,
        results: Some(&report.results),
        run_id: &report.run_id,
        totals: &report.totals,
        truncated: false,
    };
    let text = |o: &ResultsOutput| json!(o).to_string();
    let full = text(&out);
    if full.len() <= OUTPUT_LIMIT {
        return full;
    }
    (out.results, out.truncated) = (None, true);
    text(&out)
}

/// Write the outputs of a finished run: `run-id`, `count`, `results` (JSON), and the
/// paths of the full report (`report`, results.json) and of the Markdown `summary`.
pub fn write_run_outputs(
    file: &Path,
    report: &RunReport,
    paths: &ReportPaths,
) -> std::io::Result<()> {
    write_output(file, "run-id", &report.run_id)?;
    write_output(file, "count", &report.results.len().to_string())?;
    write_output(file, "results", &results_output(report))?;
    write_output(file, "report", &paths.results.display().to_string())?;
    write_output(file, "summary", &paths.summary.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        let file = crate::config::parse(
            "parallel_runs: {workers: 2}\ntasks: [a, b, c, d, e]\n",
            Path::new("fanout.yml"),
        )
        .unwrap();
        let settings = crate::plan::settings::Settings::resolve(
            &file,
            Path::new("fanout.yml"),
            &Default::default(),
        )
        .unwrap();
        let base = crate::plan::Base {
            requested: "HEAD".into(),
            branch: None,
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
        };
        crate::plan::assign::build(&settings, base, "r1")
    }

    #[test]
    fn plan_outputs_carry_max_parallel_the_plans_workers() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("out");
        write_matrix_outputs(&f, &plan()).unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"count=5"), "{text}");
        assert!(lines.contains(&"max-parallel=2"), "{text}");
    }

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

    #[test]
    fn the_results_output_is_the_report_less_its_plan_or_its_totals_when_too_big() {
        let result = |task: &str| crate::model::WorkerResult {
            reason: Some("x".into()),
            ..crate::model::WorkerResult::new(1, "b", task, "a", crate::model::Status::Failed)
        };
        let at = std::time::SystemTime::UNIX_EPOCH;
        let mut report = RunReport::new(plan(), vec![result("t")], None, at, 1.0, true);
        let expected = json!({
            "run_id": "r1", "exit_code": report.exit_code, "interrupted": true,
            "totals": report.totals, "results": report.results,
        });
        assert_eq!(results_output(&report), expected.to_string());
        report.results = vec![result(&"t".repeat(OUTPUT_LIMIT))];
        let out = results_output(&report);
        let expected = json!({
            "run_id": "r1", "exit_code": report.exit_code, "interrupted": true,
            "totals": report.totals, "truncated": true,
        });
        assert_eq!(out, expected.to_string());
    }
}
