//! A new user's first hour (issue #13): durations in one syntax, a closed pipe, YAML
//! scalars in tasks, slugs of non-ASCII tasks — all through the real binary.

use crate::common;

use crate::common::json;
use common::*;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn durations_take_one_syntax_on_flags_and_in_the_file() {
    let t = TestEnv::new();
    let plan = |args: &[&str]| json(&t.run_ok(&[&["plan", "--json", "-t", "x"], args].concat()));
    let limits = &plan(&[
        "--timeout-per-worker",
        "10m",
        "--inactivity-timeout",
        "1h30m",
    ])["limits"];
    assert_eq!(limits["timeout_per_worker"], 600.0);
    assert_eq!(limits["inactivity_timeout"], 5400.0);
    // A bare number on these flags is seconds, as the seed's `--timeout-per-worker S`.
    assert_eq!(
        plan(&["--timeout-per-worker", "90"])["limits"]["timeout_per_worker"],
        90.0
    );
    // The file takes the same syntax; a bare number there is seconds too.
    let cfg = t.config("parallel_runs:\n  timeout_per_worker: 1h30m\nkill_grace: 2\n");
    let limits = &plan(&["--config", cfg.to_str().unwrap()])["limits"];
    assert_eq!(limits["timeout_per_worker"], 5400.0);
    assert_eq!(limits["kill_grace"], 2.0);
    // A bad one names the flag and what was expected.
    let out = t
        .fanout(&["plan", "-t", "x", "--timeout-per-worker", "soon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("--timeout-per-worker")
            && err.contains("expected a duration like 90s, 10m, 1h30m or 2d, found \"soon\""),
        "{err}"
    );
}

/// A pipe whose reader is already gone: every write to it fails with EPIPE.
fn closed_pipe() -> std::process::Stdio {
    let (reader, writer) = nix::unistd::pipe().unwrap();
    drop(reader);
    std::process::Stdio::from(writer)
}

#[test]
fn a_closed_pipe_ends_fanout_quietly() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let cfg = cfg.to_str().unwrap();
    t.run_ok(&[
        "--config", cfg, "run", "-q", "-w", "2", "--run-id", "r1", "x",
    ]);
    let cases: &[&[&str]] = &[
        &["plan", "--json", "-t", "x"],
        &["plan", "-t", "x"],
        &["schema"],
        &["status"],
        &["status", "--json"],
        &["resume"],
        &["publish", "--run", "r1", "--json"],
        &[
            "--config", cfg, "run", "--json", "-w", "1", "--run-id", "r2", "y",
        ],
        &[
            "--config", cfg, "run", "-q", "-w", "1", "--run-id", "r3", "z",
        ],
    ];
    for args in cases {
        let out = t.fanout(args).stdout(closed_pipe()).output().unwrap();
        let err = stderr(&out);
        assert!(
            out.status.code() != Some(101) && !err.contains("panicked"),
            "fanout {args:?}: {:?}\n{err}",
            out.status
        );
        assert!(!err.contains("Broken pipe"), "fanout {args:?}: {err}");
    }
    // stdout and stderr both closed (`2>&1 | head -1`): the run still ends with its own
    // exit code and writes its results.
    let out = t
        .fanout(&["--config", cfg, "run", "-w", "1", "--run-id", "r4", "w"])
        .stdout(closed_pipe())
        .stderr(closed_pipe())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(t.results("r4")["totals"]["success"], 1);
    assert_eq!(t.results("r2")["totals"]["success"], 1);
}

#[test]
fn yaml_scalars_in_tasks_are_text_and_bad_entries_say_what_was_expected() {
    let t = TestEnv::new();
    let cfg = t.config("tasks:\n  - yes\n  - 1\n  - {id: on, prompt: no}\n");
    let plan = json(&t.run_ok(&["--config", cfg.to_str().unwrap(), "plan", "--json"]));
    let tasks: Vec<_> = plan["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["task"]["id"].clone(), w["task"]["prompt"].clone()))
        .collect();
    assert_eq!(
        tasks,
        [
            (serde_json::Value::Null, "yes".into()),
            (serde_json::Value::Null, "1".into()),
            ("on".into(), "no".into()),
        ]
    );
    let cfg = t.config("tasks:\n  - fix it\n  - [a, b]\n");
    let out = t
        .fanout(&["--config", cfg.to_str().unwrap(), "plan"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(
            "fanout.yml:3:5: key `tasks[1]`: invalid type: sequence, expected a task: a prompt, or {id: ID, prompt: PROMPT, model: MODEL, agent: AGENT, depends_on: [ID, …], output: findings, timeout: DURATION, budget: USD, checks: [COMMAND, …], findings: comment|review, review_of: ID}"
        ),
        "{err}"
    );
    assert!(!err.contains("untagged"), "{err}");
}

#[test]
fn branch_slugs_transliterate_non_ascii_tasks() {
    let t = TestEnv::new();
    let plan = json(&t.run_ok(&[
        "plan",
        "--json",
        "-w",
        "1",
        "--run-id",
        "r",
        "añade un botón",
    ]));
    assert_eq!(plan["workers"][0]["branch"], "fanout/r/w1-anade-un-boton");
}

#[test]
fn copy_globs_follow_gitignore_syntax_and_a_pattern_matching_nothing_is_a_warning() {
    let t = TestEnv::new();
    t.write("a.env", "A=1\n");
    t.write("c.env", "C=1\n");
    t.write(".worktreeinclude", "# local settings\nlocal/*.toml\n");
    let cfg = t.fake_config(&[], "copy: ['[ab].env', 'nothing-here-*.txt']\n");
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            "2",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let want = [
        "copy: `nothing-here-*.txt` matches no file of the checkout that git ignores or does not track; nothing copied for it",
        ".worktreeinclude:2: `local/*.toml` matches no file of the checkout that git ignores or does not track; nothing copied for it",
    ];
    for r in json(&out)["results"].as_array().unwrap() {
        let wt = std::path::PathBuf::from(r["worktree_path"].as_str().unwrap());
        assert!(wt.join("a.env").is_file(), "{r:#}");
        assert!(!wt.join("c.env").exists(), "{r:#}");
        assert_eq!(r["setup"]["copied"], 1);
        assert_eq!(r["setup"]["warnings"], serde_json::json!(want), "{r:#}");
    }
    // On stderr once each, however many workers share it.
    let err = stderr(&out);
    for w in want {
        assert_eq!(err.matches(w).count(), 1, "{err}");
    }
}

/// A directory of stand-in executables named `names`, and a PATH of it plus the
/// system's own directories (no agent CLI there).
fn path_with(t: &TestEnv, names: &[&str]) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = t.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in names {
        let p = bin.join(name);
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    format!("{}:/usr/bin:/bin", bin.display())
}

/// Nothing of a run exists: no run directory, no branch but main, no worktree.
fn nothing_created(t: &TestEnv) {
    assert_eq!(t.runs(), Vec::<String>::new());
    assert_eq!(t.branches(), ["main"]);
    assert_eq!(t.git(&["worktree", "list"]).lines().count(), 1);
}

#[test]
fn with_nothing_configured_and_no_architect_run_says_which_agents_are_there() {
    let t = TestEnv::new();
    let path = path_with(&t, &["claude", "codex"]);
    let out = t
        .fanout(&["run", "fix the bug"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("no agent is chosen, and fanout's default, architect's `build` agent, needs `architect`, which is not on PATH")
            && err.contains("agent CLIs found on PATH: claude, codex")
            && err.contains("choose one: `fanout run --agent claude …`"),
        "{err}"
    );
    nothing_created(&t);
}

#[test]
fn an_agent_name_typo_is_refused_before_anything_is_created_with_a_suggestion() {
    let t = TestEnv::new();
    let path = path_with(&t, &["claude"]);
    let out = t
        .fanout(&["run", "--agent", "claud", "fix the bug"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("--agent claud: no agent of that name is defined under `agents:` or built in")
            && err.contains("did you mean `claude`?"),
        "{err}"
    );
    nothing_created(&t);
    // A defined agent whose program is missing: exit 2, nothing created either.
    let cfg = t.config("agents:\n  mine:\n    command: [/nonexistent/agent, '{task}']\n");
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--agent",
            "mine",
            "x",
        ])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "--agent mine: the agent's program `/nonexistent/agent`, which does not exist"
        ),
        "{}",
        stderr(&out)
    );
    nothing_created(&t);
}

#[test]
fn run_prints_the_plans_shape_before_starting() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let out = t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "-q",
        "-w",
        "3",
        "x",
    ]);
    let err = stderr(&out);
    let shape = err
        .lines()
        .find(|l| l.contains("3 workers: 1 task × 3 attempts, 3 at a time"))
        .unwrap_or_else(|| panic!("no shape line:\n{err}"));
    let first_start = err.find("started in").expect("a worker started");
    assert!(err.find(shape).unwrap() < first_start, "{err}");
    let out = t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "plan",
        "-w",
        "2",
        "-t",
        "a",
        "-t",
        "b",
        "-t",
        "c",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("3 workers: 3 tasks × 1 attempt, 2 at a time"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn init_scaffolds_fanout_yml_and_a_workflow_for_the_agent_on_path() {
    let t = TestEnv::new();
    let path = path_with(&t, &["codex"]);
    let init = |args: &[&str]| t.fanout(args).env("PATH", &path).output().unwrap();
    let out = init(&["init", "--kind", "nightly"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let cfg = std::fs::read_to_string(t.repo.join("fanout.yml")).unwrap();
    assert!(cfg.starts_with("# yaml-language-server: $schema="), "{cfg}");
    assert!(cfg.contains("\n  agent: codex\n"), "{cfg}");
    assert!(
        cfg.contains("Agent CLIs found on PATH when this was written: codex."),
        "{cfg}"
    );
    assert!(
        cfg.contains("# tasks:") && cfg.contains("# copy: [.env]"),
        "{cfg}"
    );
    let wf = std::fs::read_to_string(t.repo.join(".github/workflows/fanout-nightly.yml")).unwrap();
    assert!(wf.contains("run: npm install -g @openai/codex"), "{wf}");
    assert!(
        wf.contains("OPENAI_API_KEY") && !wf.contains("ANTHROPIC_API_KEY"),
        "{wf}"
    );
    assert!(
        wf.contains("allow-empty: true") && !wf.contains("config: fanout.yml"),
        "{wf}"
    );
    // What is left to do on GitHub.
    let err = stderr(&out);
    assert!(
        err.contains("wrote fanout.yml (agent: codex; agent CLIs on PATH: codex)")
            && err.contains("OPENAI_API_KEY")
            && err.contains("\"Allow GitHub Actions to create and approve pull requests\""),
        "{err}"
    );
    // The scaffold is a valid config, and --check compares with it.
    t.run_ok(&["plan", "--allow-empty", "--json"]);
    let out = init(&["init", "--kind", "nightly", "--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A second init keeps the user's fanout.yml.
    std::fs::write(
        t.repo.join("fanout.yml"),
        "parallel_runs: {agent: claude}\n",
    )
    .unwrap();
    let out = init(&["init", "--kind", "local"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(t.repo.join("fanout.yml")).unwrap(),
        "parallel_runs: {agent: claude}\n"
    );
    let wf = std::fs::read_to_string(t.repo.join(".github/workflows/fanout-local.yml")).unwrap();
    assert!(
        wf.contains("run: npm install -g @anthropic-ai/claude-code"),
        "{wf}"
    );
}

#[test]
fn the_nightly_run_with_no_tasks_or_no_fanout_yml_succeeds_doing_nothing() {
    let t = TestEnv::new();
    // What the nightly workflow runs (the action's run mode with allow-empty).
    for cfg in [None, Some("parallel_runs: {agent: codex}\n")] {
        if let Some(text) = cfg {
            t.write("fanout.yml", text);
        }
        let out = t
            .fanout(&["run", "--quiet", "--allow-empty"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stderr(&out).contains("no task to run"), "{}", stderr(&out));
        assert_eq!(t.runs(), Vec::<String>::new());
    }
}

/// `10M` is months to humantime: refused, saying what to write (issue #29 item 5).
#[test]
fn a_capital_m_duration_is_refused_saying_minutes_are_m() {
    let t = TestEnv::new();
    let out = t
        .fanout(&["cleanup", "--older-than", "10M"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "\"10M\" is ambiguous: `M` means months, not minutes; write \"10m\" for minutes or \"10months\" for months"
        ),
        "{}",
        stderr(&out)
    );
}

/// `run --help` names the built-in agents (issue #29 item 5).
#[test]
fn run_help_names_the_built_in_agents() {
    let t = TestEnv::new();
    let help = String::from_utf8(t.run_ok(&["run", "--help"]).stdout).unwrap();
    assert!(
        help.contains("Agent: a built-in CLI (`claude`, `codex`, `aider`), a name under `agents:` in the config"),
        "{help}"
    );
}

/// Bare `cleanup` says every way to pick runs, not only `--run` (issue #29 item 5).
#[test]
fn bare_cleanup_shows_every_way_to_pick_runs() {
    let t = TestEnv::new();
    let out = t.fanout(&["cleanup"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("Usage: fanout cleanup <--run <ID>|--all|--older-than <AGE>|--keep <N>>"),
        "{err}"
    );
}

/// clap's errors open like fanout's own; help and version do not (issue #29 item 5).
#[test]
fn argument_errors_carry_the_fanout_prefix() {
    let t = TestEnv::new();
    let out = t.fanout(&["run", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("fanout: error: unexpected argument '--no-such-flag'"),
        "{}",
        stderr(&out)
    );
    let version = t.run_ok(&["--version"]);
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("fanout "));
    assert!(version.stderr.is_empty());
}

/// A typo in `parallel_runs.agent` is refused at preflight with its line and column
/// (issue #29 item 5).
#[test]
fn a_parallel_runs_agent_typo_names_its_line_and_column() {
    let t = TestEnv::new();
    let path = path_with(&t, &["claude"]);
    let cfg = t.config("parallel_runs:\n  workers: 2\n  agent: claud\n");
    let out = t
        .fanout(&["--config", cfg.to_str().unwrap(), "run", "fix the bug"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let want = format!(
        "fanout: error: {}:3:10: parallel_runs.agent claud: no agent of that name is defined under `agents:` or built in",
        cfg.display()
    );
    assert!(stderr(&out).starts_with(&want), "{}", stderr(&out));
    assert!(stderr(&out).contains("did you mean `claude`?"));
    nothing_created(&t);
}

/// `plan` and `status` print a header row over their tables (issue #29 item 5).
#[test]
fn plan_and_status_tables_have_a_header_row() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let plan = t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "plan",
        "-w",
        "2",
        "-t",
        "fix it",
    ]);
    let plan = String::from_utf8(plan.stdout).unwrap();
    let lines: Vec<&str> = plan.lines().collect();
    let branch = lines[2].split_whitespace().nth(2).unwrap();
    assert_eq!(
        lines[1],
        format!(
            "  #    MODEL            {:<w$}  TASK",
            "BRANCH",
            w = branch.len()
        ),
        "{plan}"
    );
    assert!(lines[2].ends_with(&format!("{branch}  fix it")), "{plan}");
    t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "-q",
        "-w",
        "1",
        "fix it",
    ]);
    let status = String::from_utf8(t.run_ok(&["status"]).stdout).unwrap();
    let lines: Vec<&str> = status.lines().collect();
    assert_eq!(
        lines[1..3],
        [
            "  #    STATUS   GIT                DISK  BRANCH",
            "        WORKTREE"
        ],
        "{status}"
    );
    assert!(lines[3].starts_with("  #1   success  clean"), "{status}");
}

#[test]
fn demo_leaves_nothing_in_tmp_and_names_a_fanout_the_user_can_run() {
    let t = TestEnv::new();
    let tmp = t.root().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let quiet = |args: &[&str]| {
        let mut c = t.fanout(args);
        c.env("TMPDIR", &tmp);
        succeeded(&mut c)
    };
    // The test binary's fanout is not on PATH (as under `cargo run`): the lines name
    // its path, which the user can run.
    let out = quiet(&["demo", "--quiet"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("\n  {FANOUT} demo --dir fanout-demo\n")),
        "{stdout}"
    );
    assert!(!stdout.contains("  fanout "), "{stdout}");
    // Without --dir: its temporary directory is gone once it ends. (What stays is the
    // user's machine-wide port-lock directory, `fanout-<uid>`, shared by every run.)
    let left: Vec<String> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !n.strip_prefix("fanout-")
                .is_some_and(|uid| uid.chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // With --dir: kept, and the what-next lines point into it.
    let dir = t.root().join("kept");
    let out = quiet(&["demo", "--quiet", "--dir", dir.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(dir.join("repo/.git").is_dir());
    assert!(
        stdout.contains(&format!("{FANOUT} -C {}", dir.join("repo").display())),
        "{stdout}"
    );
}

/// A `command` agent whose argv uses `{model}` (not `model_args:`) with a worker on
/// the default model: `fanout plan` and `fanout run` refuse it up front (exit 2,
/// naming the agent, the worker and the placeholder), instead of every worker
/// failing at start; with a model for every worker it plans.
#[test]
fn a_placeholder_without_a_value_for_a_worker_is_refused_when_planning() {
    let t = TestEnv::new();
    let cfg = t.config(
        "parallel_runs:\n  agent: mine\nagents:\n  mine:\n    command: [true, --model, '{model}', '{task}']\n",
    );
    let cfg = cfg.to_str().unwrap();
    for cmd in ["plan", "run"] {
        let out = t
            .fanout(&["--config", cfg, cmd, "-w", "1", "-t", "x"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("agents.mine: worker 1 (task `x`, model default) could not start: {model} has no value for this worker"),
            "{cmd}: {err}"
        );
    }
    assert!(t.runs().is_empty(), "nothing was run");
    t.run_ok(&[
        "--config", cfg, "plan", "-w", "1", "-t", "x", "--models", "m1",
    ]);
}

/// libgit2's internals (`class=…; code=…`, `(-3)`) never reach the user: outside a
/// repository, in one without a commit, and with a base that names nothing, the
/// message says what is wrong in a sentence naming the flag.
#[test]
fn git_errors_are_sentences_without_libgit2_codes() {
    let t = TestEnv::new();
    let outside = t.root().join("not-a-repo");
    std::fs::create_dir_all(&outside).unwrap();
    let out = t
        .command(FANOUT, &outside)
        .args(["run", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "fanout: error: {}: not inside a git repository; run fanout in a checkout of your project (`git init` and a first commit make one)\n",
            outside.display()
        )
    );
    let empty = t.root().join("empty");
    t.git_in(t.root(), &["init", "-q", empty.to_str().unwrap()]);
    let out = t
        .command(FANOUT, &empty)
        .args(["run", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "fanout: error: --base \"HEAD\": the repository has no commit yet; commit first (every worker starts from a commit)\n"
    );
    let out = t.fanout(&["run", "--base", "nope", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "fanout: error: --base \"nope\": no branch, tag or commit of this repository is called \"nope\" (see `git branch -a`)\n"
    );
}
