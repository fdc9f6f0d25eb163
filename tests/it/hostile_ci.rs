//! Hostile agents and the workflow around them (issue #28, the CI-side items): what a
//! misbehaving agent (a shell script, [`crate::hostile::Arena`]) can still do
//! through the GitHub Actions machinery around fanout, and what holds:
//! - item 1: a matrix job's artifacts carry data, never settings — publishing takes
//!   its settings from the digested plan, never from a checkout a job downloaded
//!   artifacts into, and in Actions the token goes only to `$GITHUB_SERVER_URL`'s host;
//! - item 8: agent text (logs, tasks, reasons) issues no workflow command, as the
//!   GitHub runner parses them ([`crate::runner_commands`]: leading whitespace
//!   trimmed, `##[` anywhere), on stdout and stderr;
//! - item 9: a GitHub App's installation token is asked for the one repository and
//!   the permissions publishing needs; a branch that changes workflows, actions or
//!   CODEOWNERS is not published unless allowed;
//! - item 10: the workflow templates.
//!
//! The same items under act (the generated workflows run end to end) are in
//! `tests/it/act.rs`.

use crate::fake_github::FakeGitHub;
use crate::hostile::{Arena, GitHttp, Sandbox, json, text};
use crate::runner_commands::Runner;

// Each scenario with the sandbox off and required, as in tests/it/hostile.rs.
both_modes!(
    agent_text_issues_no_workflow_command {
        off: ready,
        required: ready,
    },
    artifacts_carry_data_never_settings {
        off: ready,
        required: ready,
    },
    app_tokens_ask_for_little_and_ci_changes_wait {
        off: ready,
        required: ready,
    },
    worker_artifacts_carry_the_log_with_secrets_masked {
        off: ready,
        required: ready,
    },
);

/// The lines the agent prints, on stdout and on stderr: each would be a workflow
/// command to the runner if fanout echoed it as it is.
const FORGED: &str = r#"for line in '::add-mask::work' '   ::error::PWNED-indented' '##[error]PWNED-legacy' \
    'text then ##[warning]PWNED-midline' '::set-output name=pwned::PWNED-output' \
    '##[set-output name=pwned2;]PWNED-output' '::notice::PWNED-notice' '::stop-commands::guess' \
    '::endgroup::' '::guess::'; do
  echo "$line"; echo "$line" >&2
done
printf 'progress\r::error::PWNED-after-cr\n'
try "set an output through the step's file" sh -c 'echo pwned=1 >> "$GITHUB_OUTPUT"'
try "set the environment of later steps" sh -c 'echo BASH_ENV=/tmp/x >> "$GITHUB_ENV"'
if [ "$FANOUT_WORKER_ID" = 2 ]; then echo '::error::PWNED-last-words'; exit 3; fi
"#;

/// Item 8: under a GitHub Actions runner (`GITHUB_ACTIONS=true`), an agent's log
/// lines (shown in the worker's group), its failing worker's reason and tasks whose
/// text looks like commands are all printed, and the runner acts on none of them:
/// stderr, read as the runner reads it, issues only fanout's own groups and its one
/// annotation for the failed worker; stdout issues nothing at all (so no interleaving
/// of the two streams can matter). The agent cannot reach the step's command files
/// either. `fanout plan --json` under the runner stays JSON that issues nothing.
fn agent_text_issues_no_workflow_command(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup(FORGED, "", "");
    let outputs = a.root().join("github-output");
    let env_file = a.root().join("github-env");
    for f in [&outputs, &env_file] {
        std::fs::write(f, "").unwrap();
    }
    let task_one = "Improve ##[set-output name=task;]x the docs";
    let task_two = "::add-mask::task two";
    let mut c = a.fanout(&cfg, &["run", "-w", "2", "-t", task_one, "-t", task_two]);
    c.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", &outputs)
        .env("GITHUB_ENV", &env_file);
    let out = c.output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");

    let mut err = Runner::default();
    err.feed(&stderr);
    let acted: Vec<String> = err
        .acted()
        .iter()
        .map(|c| format!("{} {:?} {}", c.name, c.props, c.data))
        .collect();
    let names: Vec<&str> = err.acted().iter().map(|c| c.name.as_str()).collect();
    let count = |n: &str| names.iter().filter(|x| **x == n).count();
    assert_eq!(
        (count("group"), count("endgroup"), count("error")),
        (2, 2, 1),
        "{acted:#?}\n{stderr}"
    );
    assert!(
        names
            .iter()
            .all(|n| ["group", "endgroup", "error", "warning"].contains(n)),
        "a command fanout did not mean: {acted:#?}\n{stderr}"
    );
    let error = err.acted().into_iter().find(|c| c.name == "error").unwrap();
    assert_eq!(error.props["title"], "fanout worker 2", "{acted:#?}");
    assert!(!err.stopped(), "stderr leaves commands stopped:\n{stderr}");
    // The agent's text was shown, not dropped.
    for shown in [
        "##[error]PWNED-legacy",
        "::add-mask::work",
        "PWNED-after-cr",
    ] {
        assert!(stderr.contains(shown), "{shown:?} not shown:\n{stderr}");
    }
    let mut std_out = Runner::default();
    std_out.feed(&stdout);
    assert_eq!(std_out.processed, [], "stdout issues commands:\n{stdout}");

    let written = std::fs::read_to_string(&outputs).unwrap();
    assert!(!written.contains("pwned"), "{written}");
    assert!(written.contains("run-id="), "{written}");
    assert_eq!(std::fs::read_to_string(&env_file).unwrap(), "");
    assert!(
        stderr.contains("DENIED set an output through the step's file")
            && stderr.contains("DENIED set the environment of later steps"),
        "{stderr}"
    );

    // JSON on stdout stays JSON, and issues nothing.
    let mut c = a.fanout(&cfg, &["plan", "--json", "-t", task_one, "-t", task_two]);
    c.env("GITHUB_ACTIONS", "true");
    let out = c.output().unwrap();
    let plan = json(&out);
    assert_eq!(plan["workers"][0]["task"]["prompt"], task_one);
    let mut r = Runner::default();
    r.feed(&text(&out.stdout));
    r.feed(&text(&out.stderr));
    assert_eq!(r.processed, [], "{}", text(&out.stdout));
}

/// A matrix run as its jobs run it, in one checkout: the plan job writes the plan
/// (with `cfg`) and its digest, worker 1's job runs and leaves its artifact.
struct Matrix {
    plan: std::path::PathBuf,
    sha: String,
    results: std::path::PathBuf,
}

impl Matrix {
    /// The plan job, then worker 1's job (with `env` added to its environment).
    fn run(a: &Arena, cfg: &str, env: &[(&str, &str)]) -> Matrix {
        let dir = a.root().join("runner-temp");
        std::fs::create_dir_all(&dir).unwrap();
        let plan = dir.join("fanout-plan.json");
        let out = a.output(
            cfg,
            &[
                "plan",
                "-w",
                "1",
                "-t",
                "Improve the docs",
                "--plan-file",
                plan.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let sha = sha256_hex(&std::fs::read(&plan).unwrap());
        let results = dir.join("fanout-results");
        let mut c = a.fanout(
            cfg,
            &[
                "worker",
                "--plan",
                plan.to_str().unwrap(),
                "--plan-sha256",
                &sha,
                "--id",
                "1",
                "--out",
                results.to_str().unwrap(),
            ],
        );
        let out = c.envs(env.iter().copied()).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        Matrix { plan, sha, results }
    }

    /// `fanout aggregate` of this run as the action runs it in Actions (no `--config`),
    /// against the fake GitHub `gh`; with `--plan-sha256` when `digest`.
    fn aggregate(&self, a: &Arena, gh: &FakeGitHub, digest: bool) -> std::process::Output {
        let mut args = vec![
            "aggregate",
            "--plan",
            self.plan.to_str().unwrap(),
            "--from",
            self.results.to_str().unwrap(),
            "--publish",
            "--pace-ms",
            "0",
        ];
        if digest {
            args.extend(["--plan-sha256", &self.sha]);
        }
        let mut c = a.t.fanout(&args);
        c.env("GITHUB_TOKEN", &a.token)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_REPOSITORY", "octo/demo")
            .env("GITHUB_API_URL", gh.url())
            .env("GITHUB_SERVER_URL", "https://github.com");
        c.output().unwrap()
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Item 1: the aggregate job's checkout holds a `fanout.yml` that came with a
/// replaced `fanout-plan` artifact (the old templates downloaded it into the
/// checkout's root), naming the attacker's server as the remote and its own labels.
/// The aggregate publishes with the settings the plan job put in the digested plan:
/// the pull request has the plan's label, the branch goes to `origin`, and nothing
/// reaches the attacker's server. Without `--plan-sha256`, `aggregate --publish` in
/// Actions refuses to start (exit 2), and a config naming another host for the token
/// is refused in Actions by `run --publish` too.
fn artifacts_carry_data_never_settings(mode: Sandbox) {
    let a = Arena::new(mode);
    let trap_root = a.root().join("trap");
    std::fs::create_dir_all(&trap_root).unwrap();
    a.t.git_in(&trap_root, &["init", "-q", "--bare", "-b", "main", "x.git"]);
    let trap = GitHttp::start(&a.t, &trap_root);
    let evil = format!("http://127.0.0.1:{}/x.git", trap.port);
    let cfg = a.setup("", "", "publish:\n  labels: [from-plan]\n");
    let m = Matrix::run(&a, &cfg, &[]);
    a.t.write(
        "fanout.yml",
        &format!("publish:\n  remote: '{evil}'\n  labels: [attacker]\n"),
    );
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(&a.token);
    let remote_before = a.remote_refs();

    let refused = m.aggregate(&a, &gh, false);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    assert!(
        text(&refused.stderr).contains("--plan-sha256"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(a.remote_refs(), remote_before);
    assert!(gh.requests().is_empty());

    let out = m.aggregate(&a, &gh, true);
    let said = format!("{}\n{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(
        trap.credentials(),
        "",
        "the token went to the artifact's remote:\n{said}"
    );
    assert_eq!(out.status.code(), Some(0), "{said}");
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1, "{said}");
    assert!(
        pulls[0].labels.contains(&"from-plan".to_owned()),
        "{:?}",
        pulls[0]
    );
    assert!(
        !pulls[0].labels.contains(&"attacker".to_owned()),
        "{:?}",
        pulls[0]
    );
    let pushed = a.remote_refs();
    assert!(
        pushed.contains_key(&format!("refs/heads/{}", pulls[0].head_ref)),
        "not pushed to origin: {pushed:?}"
    );
    gh.assert_no_violations();

    // A config (here the run's own) naming another host: refused before anything runs.
    std::fs::remove_file(a.t.repo.join("fanout.yml")).unwrap();
    let cfg_text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        cfg_text.replace("publish:\n", &format!("publish:\n  remote: '{evil}'\n")),
    )
    .unwrap();
    let runs = a.t.runs();
    let mut c = a.fanout(
        &cfg,
        &[
            "run",
            "-w",
            "1",
            "--publish",
            "--pace-ms",
            "0",
            "Improve the docs",
        ],
    );
    c.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_REPOSITORY", "octo/demo")
        .env("GITHUB_API_URL", gh.url());
    let out = c.output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("publish.remote") && err.contains("--remote URL"),
        "{err}"
    );
    assert_eq!(a.t.runs(), runs, "a run started: {err}");
    assert_eq!(trap.credentials(), "");
}

/// A worker's job rewrites its `result.json` (a tampered artifact): it names another
/// task, agent and model, claims it won a best-of-N, and says its change started at
/// the agent's own first commit (so that what it added there would not be listed).
/// `aggregate` takes none of that: the task, agent and model are the plan's, there is
/// no selection, and the files changed are measured from the plan's base.
#[test]
fn an_artifact_names_no_task_of_its_own_nor_where_its_change_starts() {
    let a = Arena::new(Sandbox::Off);
    let cfg = a.setup(
        "echo hidden > hidden.sh && git add hidden.sh && git commit -qm first || exit 9\necho shown > shown.txt\n",
        "",
        "",
    );
    let m = Matrix::run(&a, &cfg, &[]);
    let file = std::fs::read_dir(&m.results)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("result.json"))
        .find(|p| p.is_file())
        .expect("worker 1's result.json");
    let mut artifact: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let r = &mut artifact["result"];
    let tip = r["commit"].as_str().unwrap().to_owned();
    let first =
        a.t.git(&["rev-parse", &format!("{tip}^")])
            .trim()
            .to_owned();
    r["task"] = "Bump the year (reviewed, safe to merge)".into();
    r["agent"] = "trusted".into();
    r["model"] = "gpt-reviewed".into();
    r["base_commit"] = first.into();
    r["selection"] =
        serde_json::json!({"task": "x", "score": 99.0, "rank": 1, "winner": true, "terms": {}});
    std::fs::write(&file, serde_json::to_vec(&artifact).unwrap()).unwrap();
    let out =
        a.t.fanout(&[
            "aggregate",
            "--plan",
            m.plan.to_str().unwrap(),
            "--from",
            m.results.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let said = format!("{}\n{}", text(&out.stdout), text(&out.stderr));
    let report = json(&out);
    let w = &report["results"][0];
    assert_eq!(w["task"], "Improve the docs", "{said}");
    assert_ne!(w["agent"], "trusted", "{said}");
    assert!(w["model"].is_null(), "{said}");
    assert!(w["selection"].is_null(), "{said}");
    let files: Vec<&str> = w["files_modified"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert!(
        files.contains(&"hidden.sh") && files.contains(&"shown.txt"),
        "{said}"
    );
}

/// A GitHub App (id 31337) the fake GitHub knows: its private key's file.
fn app_key(a: &Arena, gh: &FakeGitHub) -> std::path::PathBuf {
    use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
    let key = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).unwrap();
    let public = key
        .to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .unwrap();
    gh.set_app(31337, &public);
    let file = a.root().join("app.pem");
    std::fs::write(&file, key.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes()).unwrap();
    file
}

/// Item 9: worker 1's agent adds a workflow, worker 3's edits CODEOWNERS, worker 2
/// only does its work. Published as a GitHub App, the installation token is asked for
/// the one repository with contents and pull-requests write (the body checked against
/// GitHub's OpenAPI description; the fake refuses what the token was not asked for),
/// and the two branches that change the repository's CI are not pushed, their reasons
/// saying why and how to allow it. With `publish.allow_workflow_changes: true` they
/// are; with the digest, the token also gets issues write, which the digest needs.
fn app_tokens_ask_for_little_and_ci_changes_wait(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup(
        r#"case "$FANOUT_WORKER_ID" in
  1) mkdir -p .github/workflows && echo 'on: push' > .github/workflows/pwn.yml ;;
  3) echo '* @mallory' > CODEOWNERS ;;
esac
"#,
        "",
        "",
    );
    let (out, report) = a.run(&cfg, &["-w", "3", "-t", "one", "-t", "two", "-t", "three"]);
    assert_eq!(out.status.code(), Some(0), "{}", a.logs(&report));
    let run = crate::hostile::run_id(&report);
    let gh = FakeGitHub::start("octo", "demo");
    let key = app_key(&a, &gh);
    let url = gh.url();
    let publish = |extra: &[&str]| {
        let mut args = vec![
            "publish",
            "--json",
            "--run",
            &run,
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
            "--app-id",
            "31337",
            "--app-private-key",
            key.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = a.output(&cfg, &args);
        (json(&out), text(&out.stderr))
    };
    let token_requests = || -> Vec<serde_json::Value> {
        gh.requests()
            .into_iter()
            .filter(|r| r.operation_id.as_deref() == Some("apps/create-installation-access-token"))
            .map(|r| r.body)
            .collect()
    };
    let remote_before = a.remote_refs();

    let (published, err) = publish(&[]);
    let ops = |p: &serde_json::Value| -> Vec<(String, String)> {
        p["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["publish"]["operation"].as_str().unwrap_or("-").to_owned(),
                    r["publish"]["reason"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    };
    let got = ops(&published);
    assert_eq!(
        got.iter().map(|(o, _)| o.as_str()).collect::<Vec<_>>(),
        ["failed", "created", "failed"],
        "{got:#?}\n{err}"
    );
    assert!(
        got[0].1.contains(".github/workflows/pwn.yml"),
        "{}",
        got[0].1
    );
    assert!(got[2].1.contains("CODEOWNERS"), "{}", got[2].1);
    for (_, why) in [&got[0], &got[2]] {
        assert!(
            why.contains("publish.allow_workflow_changes: true"),
            "{why}"
        );
    }
    assert_eq!(
        token_requests(),
        [serde_json::json!({"repositories": ["demo"],
            "permissions": {"contents": "write", "pull_requests": "write"}})]
    );
    let pushed: Vec<String> = a
        .remote_refs()
        .into_keys()
        .filter(|r| !remote_before.contains_key(r))
        .collect();
    let w2 = published["results"][1]["branch"].as_str().unwrap();
    assert_eq!(pushed, [format!("refs/heads/{w2}")]);

    // Allowed, and with the digest: the token may write issues, and the digest is kept.
    let cfg_text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{cfg_text}publish:\n  allow_workflow_changes: true\n"),
    )
    .unwrap();
    let (published, err) = publish(&["--digest", "issue"]);
    let got = ops(&published);
    assert_eq!(
        got.iter().map(|(o, _)| o.as_str()).collect::<Vec<_>>(),
        ["created", "unchanged", "created"],
        "{got:#?}\n{err}"
    );
    // (The fake refuses an issue to a token not asked for `issues: write`.)
    assert_eq!(gh.issues().len(), 1, "no digest issue:\n{err}");
    assert_eq!(
        token_requests()[1]["permissions"],
        serde_json::json!({"contents": "write", "pull_requests": "write", "issues": "write"})
    );
    gh.assert_no_violations();
}

/// Item 10, the workflows `fanout init` writes (for Claude Code, so that they install
/// an agent CLI): no job or step that starts agents or publishes runs after the run
/// was cancelled (`!cancelled()`, never `always()`; a report upload may); every job
/// that installs or runs an agent stops Docker and locks its socket first (unless the
/// repository variable FANOUT_KEEP_DOCKER says `true`); agents run with
/// `sandbox: required`; artifacts are downloaded under `runner.temp`, the plan by the
/// id its job recorded; every upload is kept 7 days unless configured. (The same
/// workflows run under act in tests/it/act.rs.)
#[test]
fn the_workflow_templates_stop_on_cancel_lock_docker_and_confine_agents() {
    let t = crate::common::TestEnv::new();
    for kind in ["matrix", "local", "nightly"] {
        let out = format!(".github/workflows/{kind}.yml");
        t.run_ok(&[
            "init", "--kind", kind, "--agent", "claude", "--output", &out,
        ]);
        let text = std::fs::read_to_string(t.repo.join(&out)).unwrap();
        let wf: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        for (name, job) in wf["jobs"].as_object().unwrap() {
            let at = format!("{kind}: job {name}");
            let steps = job["steps"].as_array().unwrap();
            let runs_agents = steps.iter().any(|s| {
                let mode = s["with"]["mode"].as_str().unwrap_or_default();
                mode == "run" || mode == "worker"
            });
            let cond = job["if"].as_str().unwrap_or_default();
            assert!(!cond.contains("always()"), "{at}: if: {cond}");
            if job["needs"].is_array() {
                assert!(
                    cond.contains("!cancelled()"),
                    "{at} runs after a cancel: {cond}"
                );
            }
            for s in steps {
                let step_if = s["if"].as_str().unwrap_or_default();
                let uploads_report = s["with"]["name"] == "fanout-report";
                assert!(
                    uploads_report || !step_if.contains("always()"),
                    "{at}: step {s}"
                );
                if s["uses"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("actions/upload-artifact@")
                {
                    assert_eq!(
                        s["with"]["retention-days"], "${{ vars.FANOUT_RETENTION_DAYS || 7 }}",
                        "{at}: {s}"
                    );
                }
                if s["uses"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("actions/download-artifact@")
                {
                    let path = s["with"]["path"].as_str().unwrap_or_default();
                    assert!(path.starts_with("${{ runner.temp }}/"), "{at}: {s}");
                    if s["with"]["pattern"].is_null() {
                        assert_eq!(
                            s["with"]["artifact-ids"], "${{ needs.plan.outputs.plan-artifact-id }}",
                            "{at}: {s}"
                        );
                    }
                }
                let mode = s["with"]["mode"].as_str().unwrap_or_default();
                if mode == "run" || mode == "plan" {
                    assert_eq!(s["with"]["sandbox"], "required", "{at}: {s}");
                }
            }
            if !runs_agents {
                continue;
            }
            let first_agent_step = steps
                .iter()
                .position(|s| {
                    s["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("Install "))
                        || s["with"]["mode"].is_string()
                })
                .unwrap();
            let lock = steps.iter().position(|s| {
                s["run"]
                    .as_str()
                    .is_some_and(|r| r.contains("systemctl stop docker.socket docker.service"))
            });
            let lock = lock.unwrap_or_else(|| panic!("{at}: Docker is never stopped"));
            assert!(
                lock < first_agent_step,
                "{at}: Docker stopped after an agent step"
            );
            assert_eq!(
                steps[lock]["if"], "runner.os == 'Linux' && vars.FANOUT_KEEP_DOCKER != 'true'",
                "{at}"
            );
            let script = steps[lock]["run"].as_str().unwrap();
            assert!(
                script.contains("chmod 0600") && script.contains("docker version"),
                "{at}: {script}"
            );
        }
    }
}

/// Item 8, artifacts: a worker job's artifact carries its agent's log (kept for days,
/// and the runner masks nothing in an artifact). The agent prints the model key in its
/// environment (none: the job's gateway holds it) and a GitHub token it found: the log
/// in the artifact has neither.
fn worker_artifacts_carry_the_log_with_secrets_masked(mode: Sandbox) {
    let a = Arena::new(mode);
    let key = "correct-horse-battery-staple-42";
    let found = "ghs_0123456789abcdefghijABCDEFGHIJ";
    let cfg = a.setup(
        &format!("echo \"my key is $ANTHROPIC_API_KEY\"\necho 'found {found} lying around' >&2\n"),
        "",
        "",
    );
    let m = Matrix::run(&a, &cfg, &[("ANTHROPIC_API_KEY", key)]);
    let log = std::fs::read_to_string(m.results.join("fanout-result-1/log.txt")).unwrap();
    assert!(log.contains("my key is \n"), "{log}");
    assert!(log.contains("found *** lying around"), "{log}");
    assert!(!log.contains(key) && !log.contains(found), "{log}");
}
