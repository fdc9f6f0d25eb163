//! Findings between tasks and on GitHub (issue #12, item 3): a findings task succeeds
//! without changing a file, its message is in results.json and the summary, and a task
//! depending on it gets it in its prompt (`{findings.<id>}`) and as a file in
//! `$FANOUT_FINDINGS_DIR` — in run mode and through `fanout worker` (matrix mode) —
//! never re-expanded, never committed. Published, findings are posted as a comment on
//! the task's tracking issue or as a review of another task's pull request, against a
//! loopback fake GitHub checked against GitHub's OpenAPI description.
//!
//! The agent is a real shell command: it records the prompt it received (and what it
//! found in `$FANOUT_FINDINGS_DIR`) in `$REC`, then either prints findings (tasks
//! saying SCAN or REVIEW) or writes a file.

use crate::common;
use crate::fake_github;

use std::path::{Path, PathBuf};

use common::*;
use fake_github::{FakeGitHub, Fault, FaultKind};
use serde_json::Value;

const TOKEN: &str = "test-token-findings-7e2a";

const AGENT: &str = r#"[sh, -c, 'printf %s "$FANOUT_TASK" > "$REC/task-$FANOUT_WORKER_ID"; if [ -n "$FANOUT_FINDINGS_DIR" ]; then ls "$FANOUT_FINDINGS_DIR" > "$REC/dir-$FANOUT_WORKER_ID"; cat "$FANOUT_FINDINGS_DIR/scan.md" > "$REC/scan-$FANOUT_WORKER_ID"; fi; case "$FANOUT_TASK" in *SCAN*|*REVIEW*) cat "$REC/findings.md";; *) echo "$FANOUT_WORKER_ID" > "out-$FANOUT_WORKER_ID.txt";; esac']"#;

/// What the scan "finds": a control sequence, a token, and text that looks like
/// placeholders.
const FINDINGS: &str = "Flaky: tests/net.rs\n\x1b[31mred\x1b[0m token ghp_abcdefghijklmnop1234\nliteral {findings.scan} and {task} stay\n";

/// Where the agent records what it was given.
fn rec(t: &TestEnv) -> PathBuf {
    let d = t.root().join("rec");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config(t: &TestEnv, tasks: &str, extra: &str) -> PathBuf {
    t.config(&format!(
        "parallel_runs:\n  agent: sh\n  workers: 3\nworktree_dir: '{}'\nagents:\n  sh:\n    command: {AGENT}\n    writable: ['{}']\ntasks:\n{tasks}{extra}",
        t.worktrees.display(),
        rec(t).display()
    ))
}

const SCAN_THEN_FIX: &str = "  - {id: scan, prompt: 'SCAN the flaky tests', output: findings}\n  - {id: fix, prompt: 'Fix these: {findings.scan} (end)', depends_on: [scan]}\n";

fn run(t: &TestEnv, cfg: &Path, dir: &Path) -> (Option<i32>, Value) {
    let out = t
        .command(FANOUT, dir)
        .args(["--config", cfg.to_str().unwrap(), "run", "--json"])
        .env("REC", rec(t))
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), v)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_dependent_gets_the_findings_in_its_prompt_and_in_a_file_never_committed() {
    let t = TestEnv::new();
    std::fs::write(rec(&t).join("findings.md"), FINDINGS).unwrap();
    let cfg = config(&t, SCAN_THEN_FIX, "");
    let (code, r) = run(&t, &cfg, &t.repo);
    assert_eq!(code, Some(0), "{r:#}");
    // The findings task succeeded without a change; its text is kept, made safe.
    let scan = &r["results"][0];
    assert_eq!(
        (&scan["task_id"], &scan["status"]),
        (&"scan".into(), &"success".into()),
        "{scan:#}"
    );
    assert_eq!(scan["files_modified"], serde_json::json!([]));
    let kept = scan["findings"].as_str().unwrap();
    assert!(kept.starts_with("Flaky: tests/net.rs\n"), "{kept:?}");
    assert!(!kept.contains('\x1b') && !kept.contains("ghp_"), "{kept:?}");
    assert!(kept.contains("token ***"), "{kept:?}");
    assert!(
        kept.ends_with("literal {findings.scan} and {task} stay"),
        "{kept:?}"
    );
    // In results.json and the summary.
    let run_id = r["run_id"].as_str().unwrap();
    assert_eq!(t.results(run_id)["results"][0]["findings"], kept);
    let md = read(&t.run_dir(run_id).join("summary.md"));
    assert!(
        md.contains("literal {findings.scan} and {task} stay"),
        "{md}"
    );
    // The dependent's prompt, as its agent received it: the findings put in once,
    // what they hold never expanded again.
    let fix = &r["results"][1];
    assert_eq!(fix["status"], "success", "{fix:#}");
    let id = fix["worker_id"].as_u64().unwrap();
    let prompt = read(&rec(&t).join(format!("task-{id}")));
    assert_eq!(prompt, format!("Fix these: {kept} (end)"));
    // results.json keeps the prompt as written.
    assert_eq!(fix["task"], "Fix these: {findings.scan} (end)");
    // The file, outside the worktree: the same text; nothing of it on the branch.
    assert_eq!(read(&rec(&t).join(format!("dir-{id}"))), "scan.md\n");
    assert_eq!(read(&rec(&t).join(format!("scan-{id}"))), kept);
    assert_eq!(
        fix["files_modified"],
        serde_json::json!([format!("out-{id}.txt")])
    );
    let tree = t.git(&[
        "ls-tree",
        "-r",
        "--name-only",
        fix["commit"].as_str().unwrap(),
    ]);
    assert!(
        !tree.contains("scan.md") && !tree.contains("findings"),
        "{tree}"
    );
    // The scan had no findings task before it: no findings directory.
    let scan_id = scan["worker_id"].as_u64().unwrap();
    assert!(!rec(&t).join(format!("dir-{scan_id}")).exists());
}

#[test]
fn a_findings_task_without_a_message_gives_a_placeholder_and_bad_links_are_config_errors() {
    let t = TestEnv::new();
    std::fs::write(rec(&t).join("findings.md"), "").unwrap();
    let cfg = config(&t, SCAN_THEN_FIX, "");
    let (code, r) = run(&t, &cfg, &t.repo);
    assert_eq!(code, Some(0), "{r:#}");
    assert!(r["results"][0].get("findings").is_none(), "{r:#}");
    let id = r["results"][1]["worker_id"].as_u64().unwrap();
    assert_eq!(
        read(&rec(&t).join(format!("task-{id}"))),
        "Fix these: (task scan reported no findings) (end)"
    );

    // A placeholder for a task this one does not depend on: `fanout plan` says where.
    let plan_error = |tasks: &str| {
        let cfg = config(&t, tasks, "");
        let out = t
            .fanout(&["--config", cfg.to_str().unwrap(), "plan"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = plan_error(
        "  - {id: scan, prompt: 'SCAN', output: findings}\n  - {id: fix, prompt: 'Fix {findings.scan}'}\n",
    );
    assert!(
        err.contains("fanout.yml:11:23: key `tasks[1].prompt`: {findings.scan}: add scan to this task's depends_on"),
        "{err}"
    );
    let err = plan_error("  - {id: fix, prompt: 'Fix {findings.nope}'}\n");
    assert!(
        err.contains("key `tasks[0].prompt`: {findings.nope}: no task has id \"nope\""),
        "{err}"
    );
    let err = plan_error("  - {id: a, prompt: a, findings: comment}\n");
    assert!(
        err.contains("key `tasks[0].findings`: posting findings needs `output: findings`"),
        "{err}"
    );
    assert!(t.runs().len() == 1, "a refused plan made a run");
}

#[test]
fn matrix_mode_hands_the_findings_over_in_the_artifact_bounded_again() {
    let t = TestEnv::new();
    let remote = t.bare_origin();
    std::fs::write(rec(&t).join("findings.md"), FINDINGS).unwrap();
    let cfg = config(&t, SCAN_THEN_FIX, "");
    let cfg = cfg.to_str().unwrap();
    let plan = t.root().join("plan.json");
    t.run_ok(&[
        "--config",
        cfg,
        "plan",
        "--plan-file",
        plan.to_str().unwrap(),
    ]);
    let results = t.root().join("results");
    // Each job in a fresh clone, as a runner's checkout would be.
    let job = |id: u32, deps: bool| {
        let dir = t.root().join(format!("job-{id}"));
        t.git_in(
            t.root(),
            &[
                "clone",
                "-q",
                remote.to_str().unwrap(),
                dir.to_str().unwrap(),
            ],
        );
        let id_s = id.to_string();
        let mut args = vec![
            "--config",
            cfg,
            "worker",
            "--plan",
            plan.to_str().unwrap(),
            "--id",
            &id_s,
            "--out",
            results.to_str().unwrap(),
            "-q",
        ];
        if deps {
            args.extend(["--deps-from", results.to_str().unwrap()]);
        }
        let out = t
            .command(FANOUT, &dir)
            .args(&args)
            .env("REC", rec(&t))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "job {id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // (3 workers for 2 tasks: workers 1 and 3 scan, worker 2 fixes.)
    job(1, false);
    job(3, false);
    // The scan job's result.json is the job's word: a hostile one adds a control
    // character and a token to its findings.
    let path = results.join("fanout-result-1/result.json");
    let mut art: Value = serde_json::from_str(&read(&path)).unwrap();
    assert_eq!(art["result"]["status"], "success");
    assert!(
        art["bundle"].is_null(),
        "a findings task leaves no bundle: {art:#}"
    );
    art["result"]["findings"] = "planted \u{7} ghp_abcdefghijklmnop1234 {findings.scan}".into();
    std::fs::write(&path, serde_json::to_vec(&art).unwrap()).unwrap();
    job(2, true);
    assert_eq!(
        read(&rec(&t).join("task-2")),
        "Fix these: planted  *** {findings.scan} (end)"
    );
    assert_eq!(
        read(&rec(&t).join("scan-2")),
        "planted  *** {findings.scan}"
    );

    // The aggregate keeps the findings task a success (no bundle is its normal
    // outcome) with its findings.
    let agg = t.root().join("agg");
    t.git_in(
        t.root(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            agg.to_str().unwrap(),
        ],
    );
    let out = t
        .command(FANOUT, &agg)
        .args([
            "--config",
            cfg,
            "aggregate",
            "--json",
            "--plan",
            plan.to_str().unwrap(),
            "--from",
            results.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let st: Vec<&str> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["status"].as_str().unwrap())
        .collect();
    assert_eq!(st, ["success", "success", "success"], "{r:#}");
    assert_eq!(r["results"][0]["findings"], "planted  *** {findings.scan}");
    assert!(
        r["results"][2]["findings"]
            .as_str()
            .unwrap()
            .contains("token ***")
    );
    assert_eq!(out.status.code(), Some(0));
}

/// A repository with an `origin`, a config with a writer, a surveyor posting comments
/// and a reviewer of the writer's pull request, and a fake GitHub.
struct Published {
    t: TestEnv,
    gh: FakeGitHub,
    cfg: PathBuf,
}

impl Published {
    fn new() -> Published {
        let t = TestEnv::new();
        t.bare_origin();
        std::fs::write(rec(&t).join("findings.md"), FINDINGS).unwrap();
        let cfg = config(
            &t,
            "  - {id: docs, prompt: 'write the docs'}\n  - {id: survey, prompt: 'SCAN the flaky tests', output: findings, findings: comment}\n  - {id: rev, prompt: 'REVIEW the docs change', output: findings, findings: review, review_of: docs}\n",
            "",
        );
        let gh = FakeGitHub::start("octo", "demo");
        gh.set_token(TOKEN);
        Published { t, gh, cfg }
    }

    fn run(&self) -> String {
        let (code, r) = run(&self.t, &self.cfg, &self.t.repo);
        assert_eq!(code, Some(0), "{r:#}");
        r["run_id"].as_str().unwrap().to_owned()
    }

    fn publish(&self, run_id: &str) -> (Option<i32>, Value) {
        let url = self.gh.url();
        let out = self
            .t
            .fanout(&[
                "--config",
                self.cfg.to_str().unwrap(),
                "publish",
                "--json",
                "--run",
                run_id,
                "--repo",
                "octo/demo",
                "--api-url",
                &url,
                "--pace-ms",
                "0",
            ])
            .env("GITHUB_TOKEN", TOKEN)
            .output()
            .unwrap();
        let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "publish printed no JSON ({e}):\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code(), v)
    }
}

impl Published {
    /// `fanout publish --dry-run` of `run_id` (with `token` in `$GITHUB_TOKEN`, none
    /// when empty), after checking that it exits 0 and writes nothing: no write
    /// request reaches GitHub, no branch of `origin` moves.
    fn dry_run(&self, run_id: &str, token: &str) -> String {
        let url = self.gh.url();
        let origin = self.t.root().join("remote.git");
        let refs = || {
            self.t.git_in(
                self.t.root(),
                &["--git-dir", origin.to_str().unwrap(), "for-each-ref"],
            )
        };
        let (asked, before) = (self.gh.requests().len(), refs());
        let cfg = self.cfg.to_str().unwrap();
        let out = self
            .t
            .fanout(&["--config", cfg, "publish", "--dry-run", "--run", run_id])
            .args(["--repo", "octo/demo", "--api-url", &url])
            .env("GITHUB_TOKEN", token)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert_eq!(self.gh.writes_since(asked), Vec::<String>::new());
        assert_eq!(refs(), before, "no branch moved");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// The `findings:` line of each worker's block in a dry run's text, as
/// `(worker, line)`.
fn findings_lines(text: &str) -> Vec<(u32, String)> {
    let mut worker = 0;
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("worker ") {
            worker = rest.split(' ').next().unwrap().parse().unwrap();
        } else if let Some(f) = line.strip_prefix("  findings: ") {
            out.push((worker, f.to_owned()));
        }
    }
    out
}

/// `publish --dry-run` says what each findings task would post — the tracking issue
/// it would open or comment on, the pull request it would review, or nothing and why
/// — from reads alone (issue #29).
#[test]
fn the_dry_run_says_what_findings_would_be_posted_and_writes_nothing() {
    let p = Published::new();
    let night1 = p.run();
    let owned = |v: Vec<(u32, &str)>| -> Vec<(u32, String)> {
        v.into_iter().map(|(w, l)| (w, l.to_owned())).collect()
    };
    // Without a token: what GitHub decides is undecided.
    assert_eq!(
        findings_lines(&p.dry_run(&night1, "")),
        owned(vec![
            (
                2,
                "undecided: the issues on GitHub are read only with a token ($GITHUB_TOKEN or $GH_TOKEN)"
            ),
            (
                3,
                "undecided: it reviews the pull request of task docs, itself undecided"
            ),
        ])
    );
    let text = p.dry_run(&night1, TOKEN);
    assert_eq!(
        findings_lines(&text),
        owned(vec![
            (
                2,
                "open the tracking issue \"fanout findings: survey\" (label fanout-findings) and comment on it"
            ),
            (3, "review the pull request task docs would open"),
        ]),
        "{text}"
    );
    assert!(p.gh.issues().is_empty() && p.gh.reviews().is_empty());

    let (code, r) = p.publish(&night1);
    assert_eq!(code, Some(0), "{r:#}");
    let (issue, pr) = (
        outcome(&r, "survey")["number"].as_u64().unwrap(),
        outcome(&r, "docs")["number"].as_u64().unwrap(),
    );
    // The same run again: nothing would be posted twice, and why.
    let text = p.dry_run(&night1, TOKEN);
    assert_eq!(
        findings_lines(&text),
        vec![
            (
                2,
                format!("none: this run's findings are already on #{issue}")
            ),
            (
                3,
                format!(
                    "none: not posted: task docs would open or update no pull request in this publish (worker #1: leave #{pr}: it already says this)"
                )
            ),
        ],
        "{text}"
    );
    // Retitled on GitHub: the publish would update it, and the review follows it.
    p.gh.set_pull_title(pr, "retitled");
    let text = p.dry_run(&night1, TOKEN);
    assert_eq!(
        findings_lines(&text)[1],
        (3, format!("review #{pr}, task docs's pull request")),
        "{text}"
    );
    // The next night: a comment on the same issue.
    let night2 = p.run();
    let text = p.dry_run(&night2, TOKEN);
    assert_eq!(
        findings_lines(&text),
        owned(vec![
            (
                2,
                &format!("comment on #{issue}, the tracking issue of `survey`")
            ),
            (3, "review the pull request task docs would open"),
        ]),
        "{text}"
    );
    p.gh.assert_no_violations();
}

fn outcome<'a>(report: &'a Value, task: &str) -> &'a Value {
    &report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["task_id"] == task)
        .unwrap_or_else(|| panic!("no {task}: {report:#}"))["publish"]
}

#[test]
fn findings_are_posted_on_a_tracking_issue_and_as_a_review_of_the_writers_pull_request() {
    let p = Published::new();
    let night1 = p.run();
    let (code, r) = p.publish(&night1);
    assert_eq!(code, Some(0), "{r:#}");
    // The writer's pull request, and the reviewer's review of it.
    let docs = outcome(&r, "docs");
    assert_eq!(docs["operation"], "created", "{r:#}");
    let pr = docs["number"].as_u64().unwrap();
    let rev = outcome(&r, "rev");
    assert_eq!(
        (&rev["operation"], &rev["number"]),
        (&"posted".into(), &pr.into()),
        "{rev:#}"
    );
    let reviews = p.gh.reviews();
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(
        (reviews[0].pull_number, reviews[0].event.as_str()),
        (pr, "COMMENT")
    );
    let body = &reviews[0].body;
    assert!(
        body.contains("literal {findings.scan} and {task} stay"),
        "{body}"
    );
    assert!(
        body.contains("token ***") && !body.contains("ghp_") && !body.contains('\x1b'),
        "{body}"
    );
    assert!(body.contains(&format!("run `{night1}`")), "{body}");
    // The survey's findings: a comment on its tracking issue, opened for it.
    let survey = outcome(&r, "survey");
    assert_eq!(survey["operation"], "posted", "{survey:#}");
    let issues = p.gh.issues();
    assert_eq!(issues.len(), 1, "{issues:?}");
    let issue = &issues[0];
    assert_eq!(survey["number"], issue.number);
    assert_eq!(issue.labels, ["fanout-findings"]);
    assert_eq!(issue.title, "fanout findings: survey");
    let comments: Vec<String> =
        p.gh.comments()
            .into_iter()
            .filter(|c| c.number == issue.number)
            .map(|c| c.body)
            .collect();
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(
        comments[0].contains("token ***") && !comments[0].contains("ghp_"),
        "{}",
        comments[0]
    );
    assert!(
        comments[0].contains("```\nFlaky: tests/net.rs\n"),
        "{}",
        comments[0]
    );
    // No PR for a findings task.
    assert_eq!(p.gh.pulls().len(), 1);

    // The same run published again: nothing posted twice.
    let (code, again) = p.publish(&night1);
    assert_eq!(code, Some(0), "{again:#}");
    assert_eq!(
        outcome(&again, "survey")["operation"],
        "unchanged",
        "{again:#}"
    );
    let rev = outcome(&again, "rev");
    assert_eq!(rev["operation"], "skipped", "{rev:#}");
    assert!(
        rev["reason"]
            .as_str()
            .unwrap()
            .contains("task docs opened or updated no pull request in this publish"),
        "{rev:#}"
    );
    assert_eq!(p.gh.reviews().len(), 1);
    assert_eq!(
        p.gh.comments()
            .iter()
            .filter(|c| c.number == issue.number)
            .count(),
        1
    );

    // The next night: a comment on the same issue, no second issue.
    let night2 = p.run();
    let (code, r2) = p.publish(&night2);
    assert_eq!(code, Some(0), "{r2:#}");
    assert_eq!(outcome(&r2, "survey")["number"], issue.number);
    assert_eq!(p.gh.issues().len(), 1);
    let comments: Vec<String> =
        p.gh.comments()
            .into_iter()
            .filter(|c| c.number == issue.number)
            .map(|c| c.body)
            .collect();
    assert_eq!(comments.len(), 2);
    assert!(
        comments[1].contains(&format!("run `{night2}`")),
        "{}",
        comments[1]
    );
    // (Per-run branches: night 2's writer opened a second pull request, reviewed too.)
    assert_eq!(p.gh.reviews().len(), 2);
    p.gh.assert_no_violations();
}

#[test]
fn a_token_that_may_not_write_issues_skips_the_findings_and_publishes_the_rest() {
    let p = Published::new();
    let night = p.run();
    p.gh.inject(Fault::new("POST", "/issues", FaultKind::Status(403)).times(10));
    p.gh.inject(Fault::new("POST", "/reviews", FaultKind::Status(403)));
    let (code, r) = p.publish(&night);
    assert_eq!(code, Some(0), "{r:#}");
    assert_eq!(outcome(&r, "docs")["operation"], "created", "{r:#}");
    for task in ["survey", "rev"] {
        let o = outcome(&r, task);
        assert_eq!(o["operation"], "skipped", "{o:#}");
        assert!(o["reason"].as_str().unwrap().contains("403"), "{o:#}");
        assert!(
            o["reason"].as_str().unwrap().contains("issues: write"),
            "{o:#}"
        );
    }
    assert!(p.gh.issues().is_empty() && p.gh.reviews().is_empty());
}
