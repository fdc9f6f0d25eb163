//! Reporting a finished run: `results.json` in the run directory and the Markdown
//! summary (rendered from `templates/summary.md.j2` with minijinja in strict mode,
//! appended to `$GITHUB_STEP_SUMMARY` in Actions).

use std::io::Write;
use std::path::{Path, PathBuf};

use minijinja::value::Serde;
use minijinja::{Environment, UndefinedBehavior, Value};
use serde::Serialize;

use super::table::{format_duration, format_worker_cost};
use crate::model::{Cause, CostSource, Reason, SetupRecord, Status, WorkerResult, timed_out_after};
use crate::run::results::RunReport;
use crate::util::{short, write_atomic};

/// The summary template, embedded at build time.
pub const SUMMARY_TEMPLATE: &str = include_str!("../../templates/summary.md.j2");

/// GitHub drops a step summary over 1 MiB; stay well under it.
pub const STEP_SUMMARY_LIMIT: usize = 900 * 1024;

/// Where a run's report files are.
#[derive(Debug, Clone)]
pub struct ReportPaths {
    /// `results.json`.
    pub results: PathBuf,
    /// `summary.md`.
    pub summary: PathBuf,
}

/// Write `results.json` and `summary.md` into `run_dir`; append the summary to
/// `$GITHUB_STEP_SUMMARY` when `step_summary` is given.
pub fn write(
    report: &RunReport,
    run_dir: &Path,
    step_summary: Option<&Path>,
) -> std::io::Result<ReportPaths> {
    let results = run_dir.join("results.json");
    let summary = run_dir.join("summary.md");
    report.save_signed(&results)?;
    let md = render_summary(report, None);
    write_atomic(&summary, md.as_bytes())?;
    if let Some(path) = step_summary {
        let md = if md.len() > STEP_SUMMARY_LIMIT {
            render_summary(report, Some(STEP_SUMMARY_LIMIT))
        } else {
            md
        };
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        f.write_all(md.as_bytes())?;
        f.write_all(b"\n")?;
    }
    Ok(ReportPaths { results, summary })
}

#[derive(Serialize)]
struct Row {
    id: u32,
    icon: &'static str,
    status: &'static str,
    task: String,
    branch: String,
    model: String,
    steps: String,
    cost: String,
    duration: String,
    files: usize,
    pr: String,
}

#[derive(Serialize)]
struct FailedRow {
    id: u32,
    branch: String,
    status: &'static str,
    reason: String,
}

#[derive(Serialize)]
struct Findings {
    id: u32,
    /// The task, one line, shortened.
    task: String,
    /// A fence longer than any run of backticks in `text`.
    fence: String,
    text: String,
}

#[derive(Serialize)]
struct SetupLine {
    id: u32,
    /// `copied 2 files · `npm ci` 12.0s · ports 20000–20009`.
    text: String,
}

#[derive(Serialize)]
struct Pick {
    task: String,
    /// `#3 (9.8)` for each worker of the task, best first; the winner marked.
    ranking: String,
}

#[derive(Serialize)]
struct Pair {
    a: u32,
    b: u32,
    kind: &'static str,
    files: String,
}

#[derive(Serialize)]
struct Count {
    status: &'static str,
    count: usize,
}

/// Render the Markdown summary; with `limit`, drop table rows until it fits.
pub fn render_summary(report: &RunReport, limit: Option<usize>) -> String {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.add_template("summary.md", SUMMARY_TEMPLATE)
        .expect("summary template parses");
    let tmpl = env.get_template("summary.md").expect("template exists");
    let picks = picks(report);
    let pairs = pairs(report);
    let counts: Vec<Count> = Status::ALL
        .iter()
        .map(|s| Count {
            status: s.as_str(),
            count: report.totals.count(*s),
        })
        .collect();
    let mut keep = report.results.len();
    loop {
        let shown = &report.results[..keep];
        let ctx = minijinja::context! {
            run_id => &report.run_id,
            interrupted => report.interrupted,
            totals => Value::from(Serde(&report.totals)),
            counts => Value::from(Serde(&counts)),
            base_short => short(&report.plan.base.commit),
            base_branch => &report.plan.base.branch,
            agents => report.plan.agent_names().into_iter().map(str::to_owned).collect::<Vec<_>>(),
            duration => format_duration(report.duration),
            cost_total => super::table::format_total_cost(&report.totals),
            steps_total => super::table::format_total_steps(&report.totals),
            rows => Value::from(Serde(&rows(shown))),
            failures => Value::from(Serde(&failures(shown))),
            setups => Value::from(Serde(&setups(shown))),
            findings => Value::from(Serde(&findings(shown))),
            truncated => report.results.len() - keep,
            has_prs => report.results.iter().any(|r| r.publish.is_some()),
            picks => Value::from(Serde(&picks)),
            pairs => Value::from(Serde(&pairs)),
            integration => Value::from(Serde(&report.integration)),
            cost_notes => cost_notes(report),
            sandbox_line => sandbox_line(report),
        };
        let mut out = tmpl.render(ctx).expect("summary renders");
        out.truncate(out.trim_end().len());
        out.push('\n');
        match limit {
            Some(l) if out.len() > l && keep > 0 => keep = keep * 9 / 10,
            _ => return out,
        }
    }
}

/// The table: one row per worker.
fn rows(results: &[WorkerResult]) -> Vec<Row> {
    let with_agent = crate::model::several_agents(results);
    results
        .iter()
        .map(|r| Row {
            id: r.worker_id,
            icon: icon(r.status),
            status: r.status.as_str(),
            task: md_escape(&r.task_label(40)),
            branch: md_escape(&r.branch),
            model: md_escape(&r.model_cell(with_agent)),
            steps: r.steps.map_or("–".into(), |s| s.to_string()),
            cost: format_worker_cost(r),
            duration: format_duration(r.duration),
            files: r.files_modified.len(),
            pr: match &r.publish {
                Some(p) => match (&p.url, p.number) {
                    (Some(url), Some(n)) => format!("[#{n}]({url}) {}", p.operation.as_str()),
                    _ => p.operation.as_str().to_owned(),
                },
                None => "–".into(),
            },
        })
        .collect()
}

/// The workers that did not succeed, and why.
fn failures(results: &[WorkerResult]) -> Vec<FailedRow> {
    results
        .iter()
        .filter(|r| !r.status.is_good())
        .map(|r| FailedRow {
            id: r.worker_id,
            branch: md_escape(&r.branch),
            status: r.status.as_str(),
            reason: md_escape(r.reason.as_deref().unwrap_or("no reason given")),
        })
        .collect()
}

/// The findings of the workers that have some, each shown as text in a fenced block
/// (an agent's Markdown cannot break out of it).
fn findings(results: &[WorkerResult]) -> Vec<Findings> {
    results
        .iter()
        .filter_map(|r| {
            let text = r.findings.as_ref()?;
            Some(Findings {
                id: r.worker_id,
                task: md_escape(&first_line(r.task_id.as_deref().unwrap_or(&r.task), 80))
                    .replace(['<', '>'], ""),
                fence: fence(text),
                text: text.clone(),
            })
        })
        .collect()
}

/// A code fence for `text`: backticks, one more than its longest run of them (at
/// least three), so nothing in it can close the block.
pub fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// What worktree setup did, for the workers it did something for.
fn setups(results: &[WorkerResult]) -> Vec<SetupLine> {
    results
        .iter()
        .filter_map(|r| {
            let s = r.setup.as_ref()?;
            let did = s.copied > 0 || s.submodules.is_some() || !s.commands.is_empty();
            did.then(|| SetupLine {
                id: r.worker_id,
                text: setup_text(s),
            })
        })
        .collect()
}

/// Best-of-N: each shared task's workers, best first, the winner marked.
fn picks(report: &RunReport) -> Vec<Pick> {
    let mut tasks: Vec<&str> = Vec::new();
    for r in &report.results {
        if let Some(sel) = &r.selection
            && !tasks.contains(&sel.task.as_str())
        {
            tasks.push(&sel.task);
        }
    }
    let mut picks = Vec::new();
    for task in tasks {
        let mut group: Vec<&WorkerResult> = report
            .results
            .iter()
            .filter(|r| r.selection.as_ref().is_some_and(|s| s.task == task))
            .collect();
        group.sort_by_key(|r| r.selection.as_ref().map_or(u32::MAX, |s| s.rank));
        let ranking = group
            .iter()
            .map(|r| {
                let sel = r.selection.as_ref().expect("filtered");
                let mark = if sel.winner { " **winner**" } else { "" };
                format!(
                    "#{} ({}, {}){mark}",
                    r.worker_id,
                    sel.score,
                    r.status.as_str()
                )
            })
            .collect::<Vec<_>>()
            .join(" · ");
        picks.push(Pick {
            task: md_escape(&first_line(task, 80)),
            ranking,
        });
    }
    picks
}

/// The conflict map's pairs: overlapping files, or the conflicting ones.
fn pairs(report: &RunReport) -> Vec<Pair> {
    report
        .conflicts
        .iter()
        .flat_map(|m| m.overlaps.iter())
        .map(|o| Pair {
            a: o.a,
            b: o.b,
            kind: if o.conflicting() {
                "conflict"
            } else {
                "overlap"
            },
            files: md_escape(
                &if o.conflicting() {
                    &o.conflicts
                } else {
                    &o.files
                }
                .join(", "),
            ),
        })
        .collect()
}

/// One worker's setup in a line: files copied, each step and how it went, the ports.
fn setup_text(s: &SetupRecord) -> String {
    let mut parts = Vec::new();
    if s.copied > 0 {
        let plural = if s.copied == 1 { "" } else { "s" };
        parts.push(format!("copied {} file{plural}", s.copied));
    }
    for step in s.submodules.iter().chain(&s.commands) {
        let how = match (step.timed_out, step.exit_code) {
            (true, _) => timed_out_after(&format_duration(step.duration)),
            (false, Some(0)) => format_duration(step.duration),
            (false, Some(c)) => format!("exited {c}"),
            (false, None) => "killed".to_owned(),
        };
        // A code span shows its text as is; only a backtick could end it early.
        let label = crate::run::setup::short(&step.run).replace('`', "'");
        parts.push(format!("`{label}` {how}"));
    }
    if let Some(p) = s.ports {
        parts.push(format!("ports {}–{}", p.first, p.last));
    }
    parts.join(" · ")
}

fn icon(s: Status) -> &'static str {
    match s {
        Status::Success => "✅",
        Status::Unchanged => "⚪",
        Status::Partial => "🟡",
        Status::Failed => "❌",
        Status::Timeout => "⏱️",
        Status::Skipped => "⏭️",
    }
}

/// Escape text for a Markdown table cell or list item.
pub fn md_escape(s: &str) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let mut out = String::with_capacity(one_line.len());
    for c in one_line.chars() {
        if matches!(c, '|' | '<' | '>' | '`' | '*' | '_' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `s` cut to `max` characters, with `…` when cut.
pub fn truncate_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// The first non-blank line of `task`, at most `max` characters.
pub fn first_line(task: &str, max: usize) -> String {
    truncate_chars(
        task.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim(),
        max,
    )
}

/// The "Pull requests" section of a summary, after publishing.
pub fn render_pull_requests(report: &RunReport) -> String {
    let mut out = format!("\n### Pull requests (run `{}`)\n\n", report.run_id);
    out.push_str("| # | Operation | Pull request | Branch | Note |\n|--:|-----------|--------------|--------|------|\n");
    for r in &report.results {
        let Some(p) = &r.publish else { continue };
        let link = match (&p.url, &p.compare_url) {
            (Some(url), _) => format!("[#{}]({url})", p.number.unwrap_or_default()),
            (None, Some(cmp)) => format!("[open by hand]({cmp})"),
            _ => "–".into(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | `{}` | {} |\n",
            r.worker_id,
            p.operation.as_str(),
            link,
            md_escape(p.branch.as_deref().unwrap_or(&r.branch)),
            md_escape(p.reason.as_deref().unwrap_or(""))
        ));
    }
    out
}

/// How the workers that ran were confined: the notice of a run whose workers ran
/// without the sandbox (or with a low Landlock ABI), else one line saying so.
fn sandbox_line(report: &RunReport) -> Option<String> {
    if let Some(n) = &report.sandbox_notice {
        return Some(format!("⚠️ **{}**", md_escape(n)));
    }
    let ran: Vec<&WorkerResult> = report
        .results
        .iter()
        .filter(|r| r.worktree_path.is_some())
        .collect();
    let confined: Vec<&WorkerResult> = ran.iter().copied().filter(|r| r.sandboxed).collect();
    let abis: std::collections::BTreeSet<String> = confined
        .iter()
        .filter_map(|r| r.sandbox_abi.map(|a| a.to_string()))
        .collect();
    let abi = abis.into_iter().collect::<Vec<_>>().join(", ");
    match (ran.len(), confined.len()) {
        (0, _) => None,
        (n, c) if n == c => Some(format!(
            "🔒 Sandbox: every worker ran confined (Landlock ABI {abi})."
        )),
        (_, 0) => Some(format!(
            "Sandbox: off (`sandbox: {}`).",
            report.plan.sandbox.as_str()
        )),
        (n, c) => Some(format!(
            "⚠️ Sandbox: {c} of {n} workers ran confined (Landlock ABI {abi}); the others ran without it."
        )),
    }
}

/// The summary's notes on costs: estimated ones, and workers the run's budget kept
/// from starting.
fn cost_notes(report: &RunReport) -> Vec<String> {
    let mut notes = Vec::new();
    let estimated = report
        .results
        .iter()
        .filter(|r| r.cost.is_some() && r.cost_source == Some(CostSource::PriceTable))
        .count();
    if estimated > 0 {
        notes.push(format!(
            "≈ {estimated} {} estimated from token usage × the price table (the agent reports no cost).",
            if estimated == 1 { "cost is" } else { "costs are" }
        ));
    }
    let not_started = report
        .results
        .iter()
        .filter(|r| r.reason.as_ref().map(Reason::cause) == Some(Cause::BudgetSpent))
        .count();
    notes.extend(gateway_note(&report.results));
    if not_started > 0 {
        let budget = report
            .plan
            .limits
            .budget_total
            .map_or_else(|| "budget".to_owned(), |b| format!("budget of ${b:.4}"));
        notes.push(format!(
            "**{not_started} {} not started: the run's {budget} was spent.**",
            if not_started == 1 {
                "worker was"
            } else {
                "workers were"
            }
        ));
    }
    notes
}

/// What the run's gateway measured per worker: cost and model calls, time waited on
/// rate limits, connections denied, a claim that did not match (none when no worker
/// reached it).
fn gateway_note(results: &[WorkerResult]) -> Option<String> {
    let parts: Vec<String> = results
        .iter()
        .filter_map(|r| Some((r.worker_id, r.cost, r.gateway.as_ref()?)))
        .map(|(id, claimed, g)| {
            let mut s = format!(
                "#{id} ${:.4} in {} call{}, {} waiting on rate limits",
                g.cost,
                g.requests,
                if g.requests == 1 { "" } else { "s" },
                format_duration(g.rate_limit_wait)
            );
            if g.cost_mismatch
                && let Some(c) = claimed
            {
                s.push_str(&format!(" (**the agent claimed ${c:.4}**)"));
            }
            if g.denied_total > 0 {
                let targets: Vec<String> = g
                    .denied
                    .iter()
                    .take(3)
                    .map(|d| md_escape(&truncate_chars(&d.target, 60)))
                    .collect();
                s.push_str(&format!(
                    ", **{} denied** ({})",
                    g.denied_total,
                    targets.join(", ")
                ));
            }
            s
        })
        .collect();
    (!parts.is_empty()).then(|| format!("Gateway, measured on the wire: {}.", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_cells_cannot_break_the_table() {
        assert_eq!(md_escape("a|b\nc <script>"), "a\\|b c \\<script\\>");
    }
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;
    use crate::agent::AgentSpec;
    use crate::model::{Totals, WorkerResult};
    use crate::plan::{Base, Limits, Plan};
    use crate::report::table::table;
    use crate::run::results::RunReport;

    fn result(id: u32, status: Status, cost: Option<f64>, reason: Option<&str>) -> WorkerResult {
        let branch = format!("fanout/r1/w{id}-fix-it");
        WorkerResult {
            model: (id == 1).then(|| "gpt-4o".to_owned()),
            steps: cost.map(|_| 3 * id),
            cost,
            duration: 61.5 * f64::from(id),
            files_modified: (0..id).map(|i| format!("f{i}.rs")).collect(),
            reason: reason.map(Reason::from),
            committed_by_fanout: true,
            exit_code: Some(0),
            ..WorkerResult::new(id, &branch, "fix it", "build", status)
        }
    }

    fn report() -> RunReport {
        let results = vec![
            result(1, Status::Success, Some(0.0123), None),
            result(2, Status::Failed, None, Some("exit code 1: bad | pipe")),
            result(3, Status::Timeout, Some(0.5), Some("timed out after 300s")),
        ];
        RunReport {
            schema_version: 1,
            run_id: "r1".into(),
            started_at: "2026-11-23T00:00:00Z".into(),
            finished_at: "2026-11-23T00:05:00Z".into(),
            duration: 300.0,
            interrupted: false,
            plan: Plan {
                schema_version: 1,
                run_id: "r1".into(),
                base: Base {
                    requested: "HEAD".into(),
                    branch: Some("main".into()),
                    commit: "0123456789abcdef0123456789abcdef01234567".into(),
                },
                concurrency: 3,
                agent: AgentSpec::resolve("build", &Default::default(), "f", false).unwrap(),
                agents: Default::default(),
                limits: Limits {
                    max_steps: 50,
                    inactivity_timeout: None,
                    budget_total: None,
                    budget_per_worker: None,
                    timeout_per_worker: Some(300.0),
                    kill_grace: 10.0,
                },
                exclude: vec![],
                workers: vec![],
                checks: vec![],
                select: Default::default(),
                setup: Default::default(),
                sandbox: Default::default(),
                hidden: Vec::new(),
                network: Default::default(),
                fail_on: Default::default(),
                settled: Vec::new(),
                fanin: None,
            },
            totals: Totals::of(&results),
            results,
            exit_code: 1,
            conflicts: None,
            integration: None,
            sandbox_notice: None,
        }
    }

    #[test]
    fn summary_markdown() {
        insta::assert_snapshot!(render_summary(&report(), None), @r"
        ## fanout run `r1`

        **1 of 3 workers succeeded** · 1 failed · 1 timeout · base `0123456` (main) · agent `build` · 5m00s · cost $0.5123 (partial: 1 unknown)

        | # | Status | Task | Branch | Model | Steps | Cost | Duration | Files |
        |--:|--------|------|--------|-------|------:|-----:|---------:|------:|
        | 1 | ✅ success | fix it | `fanout/r1/w1-fix-it` | gpt-4o | 3 | $0.0123 | 1m01s | 1 |
        | 2 | ❌ failed | fix it | `fanout/r1/w2-fix-it` | default | – | – | 2m03s | 2 |
        | 3 | ⏱️ timeout | fix it | `fanout/r1/w3-fix-it` | default | 9 | $0.5000 | 3m04s | 3 |
        | | **total** | | | | 12 (partial: 1 unknown) | $0.5123 (partial: 1 unknown) | 5m00s | 3 |

        ### Not successful

        - **#2** `fanout/r1/w2-fix-it` — failed: exit code 1: bad \| pipe
        - **#3** `fanout/r1/w3-fix-it` — timeout: timed out after 300s
        ");
    }

    #[test]
    fn summary_shows_what_the_gateway_measured() {
        use crate::model::{DeniedTarget, GatewayRecord};
        let mut r = report();
        r.results[0].gateway = Some(GatewayRecord {
            requests: 4,
            cost: 0.02,
            rate_limit_wait: 2.0,
            denied_total: 2,
            denied: vec![DeniedTarget {
                kind: "host".into(),
                target: "evil|x.com:443".into(),
                count: 2,
            }],
            cost_mismatch: true,
            ..GatewayRecord::default()
        });
        let md = render_summary(&r, None);
        assert!(
            md.contains("Gateway, measured on the wire: #1 $0.0200 in 4 calls, 2.0s waiting on rate limits (**the agent claimed $0.0123**), **2 denied** (evil\\|x.com:443)."),
            "{md}"
        );
        assert!(!render_summary(&report(), None).contains("Gateway"));
    }

    #[test]
    fn summary_shows_worktree_setup() {
        use crate::model::{PortRange, SetupRecord, SetupStep};
        let step = |run: &str, exit_code: Option<i32>, timed_out: bool| SetupStep {
            run: run.into(),
            exit_code,
            timed_out,
            duration: 2.5,
        };
        let mut r = report();
        r.results[0].setup = Some(SetupRecord {
            copied: 2,
            submodules: Some(step(
                "git submodule update --init --recursive",
                Some(0),
                false,
            )),
            commands: vec![step("npm ci", Some(0), false)],
            ports: Some(PortRange {
                first: 20000,
                last: 20009,
            }),
            warnings: Vec::new(),
        });
        r.results[1].setup = Some(SetupRecord {
            copied: 1,
            submodules: None,
            commands: vec![step("make `db`\nmore", Some(1), false)],
            ports: Some(PortRange {
                first: 20010,
                last: 20019,
            }),
            warnings: Vec::new(),
        });
        r.results[1].reason = Some("setup failed: `make 'db'` exited 1: no database".into());
        r.results[2].setup = Some(SetupRecord {
            copied: 0,
            submodules: None,
            commands: vec![],
            ports: Some(PortRange {
                first: 20020,
                last: 20029,
            }),
            warnings: Vec::new(),
        });
        insta::assert_snapshot!(render_summary(&r, None), @r"
        ## fanout run `r1`

        **1 of 3 workers succeeded** · 1 failed · 1 timeout · base `0123456` (main) · agent `build` · 5m00s · cost $0.5123 (partial: 1 unknown)

        | # | Status | Task | Branch | Model | Steps | Cost | Duration | Files |
        |--:|--------|------|--------|-------|------:|-----:|---------:|------:|
        | 1 | ✅ success | fix it | `fanout/r1/w1-fix-it` | gpt-4o | 3 | $0.0123 | 1m01s | 1 |
        | 2 | ❌ failed | fix it | `fanout/r1/w2-fix-it` | default | – | – | 2m03s | 2 |
        | 3 | ⏱️ timeout | fix it | `fanout/r1/w3-fix-it` | default | 9 | $0.5000 | 3m04s | 3 |
        | | **total** | | | | 12 (partial: 1 unknown) | $0.5123 (partial: 1 unknown) | 5m00s | 3 |

        ### Not successful

        - **#2** `fanout/r1/w2-fix-it` — failed: setup failed: \`make 'db'\` exited 1: no database
        - **#3** `fanout/r1/w3-fix-it` — timeout: timed out after 300s

        ### Worktree setup

        - #1: copied 2 files · `git submodule update --init --recursive` 2.5s · `npm ci` 2.5s · ports 20000–20009
        - #2: copied 1 file · `make 'db' …` exited 1 · ports 20010–20019
        ");
    }

    #[test]
    fn estimated_costs_and_workers_the_run_budget_kept_from_starting() {
        let mut r = report();
        r.plan.limits.budget_total = Some(0.5);
        r.results[0].cost_source = Some(CostSource::PriceTable);
        r.results[1].reason = Some(Reason::budget_spent(0.5, 0.5123));
        r.results[2].cost_source = Some(CostSource::Agent);
        insta::assert_snapshot!(render_summary(&r, None), @r"
        ## fanout run `r1`

        **1 of 3 workers succeeded** · 1 failed · 1 timeout · base `0123456` (main) · agent `build` · 5m00s · cost $0.5123 (partial: 1 unknown)

        | # | Status | Task | Branch | Model | Steps | Cost | Duration | Files |
        |--:|--------|------|--------|-------|------:|-----:|---------:|------:|
        | 1 | ✅ success | fix it | `fanout/r1/w1-fix-it` | gpt-4o | 3 | ≈$0.0123 | 1m01s | 1 |
        | 2 | ❌ failed | fix it | `fanout/r1/w2-fix-it` | default | – | – | 2m03s | 2 |
        | 3 | ⏱️ timeout | fix it | `fanout/r1/w3-fix-it` | default | 9 | $0.5000 | 3m04s | 3 |
        | | **total** | | | | 12 (partial: 1 unknown) | $0.5123 (partial: 1 unknown) | 5m00s | 3 |

        ≈ 1 cost is estimated from token usage × the price table (the agent reports no cost).

        **1 worker was not started: the run's budget of $0.5000 was spent.**

        ### Not successful

        - **#2** `fanout/r1/w2-fix-it` — failed: not started: the run's budget of $0.5000 was spent ($0.5123)
        - **#3** `fanout/r1/w3-fix-it` — timeout: timed out after 300s
        ");
        insta::assert_snapshot!(table(&r.results), @r"
        #  STATUS   TASK    MODEL    STEPS      COST   TIME  FILES  BRANCH
        1  success  fix it  gpt-4o       3  ≈$0.0123  1m01s      1  fanout/r1/w1-fix-it
        2  failed   fix it  default      –         –  2m03s      2  fanout/r1/w2-fix-it
        3  timeout  fix it  default      9   $0.5000  3m04s      3  fanout/r1/w3-fix-it
        total cost: $0.5123 (partial: 1 unknown)

          #2 failed: not started: the run's budget of $0.5000 was spent ($0.5123)
          #3 timeout: timed out after 300s
        ");
    }

    #[test]
    fn terminal_table() {
        insta::assert_snapshot!(table(&report().results), @r"
        #  STATUS   TASK    MODEL    STEPS     COST   TIME  FILES  BRANCH
        1  success  fix it  gpt-4o       3  $0.0123  1m01s      1  fanout/r1/w1-fix-it
        2  failed   fix it  default      –        –  2m03s      2  fanout/r1/w2-fix-it
        3  timeout  fix it  default      9  $0.5000  3m04s      3  fanout/r1/w3-fix-it
        total cost: $0.5123 (partial: 1 unknown)

          #2 failed: exit code 1: bad | pipe
          #3 timeout: timed out after 300s
        ");
    }

    #[test]
    fn totals_unknown_are_said_unknown_never_zero() {
        let mut r = report();
        for w in &mut r.results {
            w.steps = None;
            w.cost = None;
        }
        r.totals = Totals::of(&r.results);
        let md = render_summary(&r, None);
        assert!(
            md.contains("| | **total** | | | | unknown | unknown | 5m00s | 3 |"),
            "{md}"
        );
        assert!(md.contains("· cost unknown\n"), "{md}");
        let json = serde_json::to_value(&r.totals).unwrap();
        assert_eq!(json["steps"], serde_json::Value::Null);
        assert_eq!(json["steps_unknown"], 3);
        // Workers that never ran: nothing was counted, and nothing is unknown.
        for w in &mut r.results {
            w.status = Status::Skipped;
        }
        let t = Totals::of(&r.results);
        assert_eq!((t.steps, t.steps_unknown), (Some(0), 0));
    }

    #[test]
    fn oversized_summaries_drop_rows_and_say_so() {
        let mut r = report();
        r.results = (1..=500)
            .map(|i| result(i, Status::Success, Some(0.01), None))
            .collect();
        r.totals = Totals::of(&r.results);
        let full = render_summary(&r, None);
        let cut = render_summary(&r, Some(full.len() / 2));
        assert!(cut.len() <= full.len() / 2);
        assert!(cut.contains("more rows are in `results.json`"), "{cut}");
    }
}
