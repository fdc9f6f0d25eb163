//! The terminal tables of a run — its workers ([`table`]) and, after publishing, their
//! pull requests ([`pr_table`]) — and the cost and duration formats every report uses.

use crate::model::{CostSource, Operation, Totals, WorkerResult};
use crate::run::results::RunReport;

/// `$0.0123`, or `–` when unknown.
pub fn format_cost(c: Option<f64>) -> String {
    c.map_or("–".into(), |c| format!("${c:.4}"))
}

/// A worker's cost: [`format_cost`], marked `≈` when it was estimated from token
/// usage × the price table rather than reported by the agent.
pub fn format_worker_cost(r: &WorkerResult) -> String {
    match (r.cost, r.cost_source) {
        (Some(c), Some(CostSource::PriceTable)) => format!("≈${c:.4}"),
        (c, _) => format_cost(c),
    }
}

/// `3.2s`, `4m05s`, `1h02m`.
pub fn format_duration(secs: f64) -> String {
    let s = secs.max(0.0);
    if s < 60.0 {
        format!("{s:.1}s")
    } else if s < 3600.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!(
            "{}h{:02}m",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    }
}

/// The run's total cost: `$1.2300`; `unknown` when no worker's cost is known;
/// `$1.2300 (partial: 2 unknown)` when some are.
pub fn format_total_cost(t: &Totals) -> String {
    match (t.cost, t.cost_unknown) {
        (None, _) => "unknown".into(),
        (Some(c), 0) => format!("${c:.4}"),
        (Some(c), u) => format!("${c:.4} (partial: {u} unknown)"),
    }
}

/// Characters of a task shown in a table or a live line.
pub const TASK_CHARS: usize = 24;

/// The terminal table: one row per worker, then reasons.
pub fn table(results: &[WorkerResult]) -> String {
    let header = [
        "#", "STATUS", "TASK", "MODEL", "STEPS", "COST", "TIME", "FILES", "BRANCH",
    ];
    let with_agent = crate::model::several_agents(results);
    let rows: Vec<[String; 9]> = results
        .iter()
        .map(|r| {
            [
                r.worker_id.to_string(),
                r.status.to_string(),
                r.task_label(TASK_CHARS),
                r.model_cell(with_agent),
                r.steps.map_or("–".into(), |s| s.to_string()),
                format_worker_cost(r),
                format_duration(r.duration),
                r.files_modified.len().to_string(),
                r.branch.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let right = [true, false, false, false, true, true, true, true, false];
    let fmt_row = |cells: &[String]| -> String {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = widths[i].saturating_sub(cell.chars().count());
            if i == cells.len() - 1 {
                line.push_str(cell);
            } else if right[i] {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        line.trim_end().to_owned() + "\n"
    };
    let mut out = fmt_row(&header.map(str::to_owned));
    for row in &rows {
        out.push_str(&fmt_row(row));
    }
    out.push_str(&format!(
        "total cost: {}\n",
        format_total_cost(&Totals::of(results))
    ));
    let reasons: Vec<String> = results
        .iter()
        .filter(|r| !r.status.is_good())
        .map(|r| {
            format!(
                "  #{} {}: {}\n",
                r.worker_id,
                r.status,
                r.reason.as_deref().unwrap_or("no reason given")
            )
        })
        .collect();
    if !reasons.is_empty() {
        out.push('\n');
        out.extend(reasons);
    }
    out
}

/// The terminal table of publish operations.
pub fn pr_table(report: &RunReport) -> String {
    let mut out = String::new();
    for r in &report.results {
        let Some(p) = &r.publish else { continue };
        let what = match (p.operation, &p.url) {
            (
                Operation::Created
                | Operation::Updated
                | Operation::Unchanged
                | Operation::Closed
                | Operation::Posted,
                Some(url),
            ) => {
                format!("#{} {url}", p.number.unwrap_or_default())
            }
            _ => p.reason.clone().unwrap_or_default(),
        };
        out.push_str(&format!(
            "#{:<3} {:<9} {}  {}\n",
            r.worker_id,
            p.operation.as_str(),
            p.branch.as_deref().unwrap_or(&r.branch),
            what
        ));
        if let Some(link) = &p.compare_url {
            out.push_str(&format!("      open by hand: {link}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_costs() {
        assert_eq!(format_duration(3.24), "3.2s");
        assert_eq!(format_duration(245.0), "4m05s");
        assert_eq!(format_duration(3720.0), "1h02m");
        assert_eq!(format_cost(None), "–");
        assert_eq!(format_cost(Some(0.007)), "$0.0070");
        let t = |cost, cost_unknown| Totals {
            cost,
            cost_unknown,
            ..Totals::default()
        };
        assert_eq!(format_total_cost(&t(None, 3)), "unknown");
        assert_eq!(format_total_cost(&t(Some(0.5), 0)), "$0.5000");
        assert_eq!(
            format_total_cost(&t(Some(0.5), 2)),
            "$0.5000 (partial: 2 unknown)"
        );
    }
}
