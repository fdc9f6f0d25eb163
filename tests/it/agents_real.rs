//! The real agent CLIs end to end: `fanout run --agent claude|codex|aider|architect`
//! with two workers, each CLI talking to the loopback fake model server
//! (`tests/support/fake_model.py`), the whole run — fake server, fanout, agents —
//! inside a network namespace that has only loopback (`unshare -rn`), so nothing
//! can leave the machine.
//!
//! The CLIs are installed on first use by `.ci/install-agents.sh` (through
//! `tests/support/peers.rs`: once per process, under a lock), which writes their paths
//! to `${XDG_CACHE_HOME:-$HOME/.cache}/fanout-peers/agents/env.sh`. When they cannot
//! be had these tests fail with the script's message, unless
//! `FANOUT_SKIP_REAL_AGENTS=1` is set.
//!
//! Every run goes through fanout's gateway: the fake is the upstream of the user's own
//! base-URL variable, the key a distinctive string that only the fake may see; each
//! worker's result holds the gateway's cost, which must match what the fake charged.
//!
//! Each CLI is pointed at the fake by environment and by files in the scratch HOME
//! (never by extra flags), so the tests hold whatever command line the adapter builds.
//! Every fake response reports 1000 input and 100 output tokens; the expected cost of
//! a worker is (its responses in the fake's log) × (the price per response of its model).

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const FAKE_MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/fake_model.py");
const API_ERROR: &str = "fake-model: scripted API error";
/// The user's key, as each CLI's setup exports it to fanout.
const REAL_KEY: &str = "sk-real-key-7f3a9c1e-agents-real";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Cli {
    Claude,
    Codex,
    Aider,
    Architect,
}

impl Cli {
    fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Aider => "aider",
            Cli::Architect => "architect",
        }
    }

    /// The two models the two workers get (`--models`).
    fn models(self) -> [&'static str; 2] {
        match self {
            Cli::Claude => ["claude-sonnet-4-5", "claude-haiku-4-5"],
            Cli::Codex => ["gpt-5", "gpt-5-mini"],
            Cli::Aider => ["openai/fake-a", "openai/fake-b"],
            Cli::Architect => ["gpt-4o", "gpt-4o-mini"],
        }
    }

    /// The model name as it reaches the server (litellm drops the provider prefix).
    fn wire_model(self, model: &str) -> String {
        model.trim_start_matches("openai/").to_owned()
    }

    /// USD per fake response (1000 input + 100 output tokens) for `model`, by the
    /// price table that this CLI's cost comes from.
    fn price_per_response(self, model: &str) -> f64 {
        let (input, output) = match (self, model) {
            // Claude Code's own table: $3/$15 and $1/$5 per million tokens
            (Cli::Claude, "claude-sonnet-4-5") => (3.0, 15.0),
            (Cli::Claude, "claude-haiku-4-5") => (1.0, 5.0),
            // fanout's codex price table (codex reports tokens only)
            (Cli::Codex, "gpt-5") => (1.25, 10.0),
            (Cli::Codex, "gpt-5-mini") => (0.25, 2.0),
            // the prices this test gives aider in $HOME/.aider.model.metadata.json
            (Cli::Aider, "openai/fake-a") => (1.0, 2.0),
            (Cli::Aider, "openai/fake-b") => (2.0, 4.0),
            // litellm's bundled table, which architect uses
            (Cli::Architect, "gpt-4o") => (2.5, 10.0),
            (Cli::Architect, "gpt-4o-mini") => (0.15, 0.6),
            _ => panic!("no price for {model} with {self:?}"),
        };
        (1000.0 * input + 100.0 * output) / 1e6
    }

    /// Shell lines sourced inside the namespace once `$FAKE_PORT` is known.
    fn setup(self) -> &'static str {
        match self {
            Cli::Claude => {
                r#"export ANTHROPIC_BASE_URL="http://127.0.0.1:$FAKE_PORT" ANTHROPIC_API_KEY=sk-real-key-7f3a9c1e-agents-real
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1
"#
            }
            // codex ignores OPENAI_BASE_URL: fanout gives it a provider of its own on
            // the command line, pointed at the gateway, whose upstream is the user's
            // OPENAI_BASE_URL. (The config's provider is what codex would use without
            // fanout.) Analytics off, or it waits 5 s at exit trying to export metrics.
            Cli::Codex => {
                r#"mkdir -p "$HOME/.codex"
cat >"$HOME/.codex/config.toml" <<EOF
model_provider = "fake"
[model_providers.fake]
name = "fake"
base_url = "http://127.0.0.1:$FAKE_PORT/v1"
env_key = "FAKE_KEY"
wire_api = "responses"
[analytics]
enabled = false
EOF
export FAKE_KEY=x OPENAI_BASE_URL="http://127.0.0.1:$FAKE_PORT/v1" OPENAI_API_KEY=sk-real-key-7f3a9c1e-agents-real
"#
            }
            Cli::Aider => {
                r#"export OPENAI_API_BASE="http://127.0.0.1:$FAKE_PORT/v1" OPENAI_API_KEY=sk-real-key-7f3a9c1e-agents-real LITELLM_LOCAL_MODEL_COST_MAP=True
# not streaming, aider takes the server's token usage instead of counting tokens itself
export AIDER_STREAM=false
"#
            }
            Cli::Architect => {
                r#"export ARCHITECT_API_BASE="http://127.0.0.1:$FAKE_PORT/v1" OPENAI_API_KEY=sk-real-key-7f3a9c1e-agents-real
export LITELLM_LOG=ERROR LITELLM_LOCAL_MODEL_COST_MAP=True
"#
            }
        }
    }

    /// What the built-in adapter declares writable under HOME (relative to it).
    fn writable_in_home(self) -> &'static [&'static str] {
        match self {
            Cli::Claude | Cli::Codex => &[],
            Cli::Aider => &[".aider/caches/"],
            Cli::Architect => &[".architect/cache/", ".architect/index_cache/"],
        }
    }

    /// Files the CLI needs in the scratch HOME before it runs.
    fn prepare_home(self, home: &Path) {
        if self == Cli::Aider {
            // aider downloads litellm's price list unless a copy is cached; the
            // metadata file prices the fake models.
            let caches = home.join(".aider/caches");
            std::fs::create_dir_all(&caches).unwrap();
            std::fs::write(caches.join("model_prices_and_context_window.json"), "{}\n").unwrap();
            let entry = |input: f64, output: f64| {
                json!({"max_tokens": 8192, "max_input_tokens": 128000, "max_output_tokens": 8192,
                       "input_cost_per_token": input / 1e6, "output_cost_per_token": output / 1e6,
                       "litellm_provider": "openai", "mode": "chat"})
            };
            let meta = json!({"openai/fake-a": entry(1.0, 2.0), "openai/fake-b": entry(2.0, 4.0)});
            std::fs::write(home.join(".aider.model.metadata.json"), meta.to_string()).unwrap();
        }
    }
}

/// Runs inside `unshare -rn`: loopback up, the fake model server on it, the CLI's
/// setup, then the command given (fanout).
const NETNS_SH: &str = r#"#!/bin/sh
set -u
ip link set lo up || { echo "agents_real: cannot bring loopback up in the network namespace" >&2; exit 97; }
rm -f "$FAKE_LOG.port"
python3 "$FAKE_MODEL" --log "$FAKE_LOG" --scenario "$FAKE_SCENARIO" --lifetime 300 >"$FAKE_LOG.port" 2>"$FAKE_LOG.stderr" &
server=$!
i=0
while [ ! -s "$FAKE_LOG.port" ]; do
    i=$((i + 1))
    if [ "$i" -gt 400 ]; then
        echo "agents_real: the fake model server did not start:" >&2
        cat "$FAKE_LOG.stderr" >&2
        kill "$server"
        exit 98
    fi
    sleep 0.05
done
FAKE_PORT=$(head -n 1 "$FAKE_LOG.port")
export FAKE_PORT
. "$FAKE_SETUP"
"$@"
code=$?
kill "$server" 2>/dev/null
exit "$code"
"#;

fn agents_root() -> PathBuf {
    if let Some(r) = std::env::var_os("FANOUT_AGENTS_ROOT") {
        return r.into();
    }
    crate::peers::cache().join("agents")
}

/// `export KEY='value'` lines of env.sh, or why they cannot be had.
fn env_sh() -> &'static Result<BTreeMap<String, String>, String> {
    static ENV: OnceLock<Result<BTreeMap<String, String>, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        // Installed on first use (idempotent), unless the tests are skipped explicitly.
        if std::env::var("FANOUT_SKIP_REAL_AGENTS").as_deref() != Ok("1") {
            crate::peers::install("install-agents.sh")?;
        }
        let path = agents_root().join("env.sh");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim_matches('\'').to_owned()))
            .collect())
    })
}

/// Whether `unshare -rn` can make a loopback-only namespace here.
fn netns() -> &'static Result<(), String> {
    static NS: OnceLock<Result<(), String>> = OnceLock::new();
    NS.get_or_init(|| {
        let out = std::process::Command::new("unshare")
            .args(["-rn", "sh", "-c", "ip link set lo up"])
            .output()
            .map_err(|e| format!("cannot run unshare (util-linux): {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`unshare -rn sh -c 'ip link set lo up'` failed ({}): {}; these tests need user and network namespaces",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    })
}

/// The CLI's binary, or None when the tests are explicitly skipped; panics otherwise.
fn require(cli: Cli) -> Option<PathBuf> {
    let found = (|| {
        netns().clone()?;
        let env = env_sh().as_ref().map_err(|e| e.clone())?;
        let key = format!("FANOUT_{}_BIN", cli.name().to_uppercase());
        let bin = env.get(&key).ok_or_else(|| {
            format!(
                "{key} missing from {}",
                agents_root().join("env.sh").display()
            )
        })?;
        let bin = PathBuf::from(bin);
        if bin.is_file() {
            Ok(bin)
        } else {
            Err(format!("{} (from {key}) does not exist", bin.display()))
        }
    })();
    match found {
        Ok(bin) => Some(bin),
        Err(why) if std::env::var("FANOUT_SKIP_REAL_AGENTS").as_deref() == Ok("1") => {
            // straight to fd 2: the test harness would swallow eprintln! of a passing test
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "\n!!! SKIPPED the real {} test: {why}; FANOUT_SKIP_REAL_AGENTS=1 is set !!!\n",
                cli.name()
            );
            None
        }
        Err(why) => panic!(
            "the real {} CLI is needed: {why}\n(.ci/install-agents.sh installs the agent CLIs; \
             or set FANOUT_SKIP_REAL_AGENTS=1 to skip these tests explicitly.)",
            cli.name()
        ),
    }
}

struct Outcome {
    out: Output,
    report: Value,
    /// The fake server's request log.
    log: Vec<Value>,
}

impl Outcome {
    /// fanout's stderr, then the tail of every worker's agent log (for failures).
    fn stderr(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.out.stderr).into_owned();
        for r in self.report["results"].as_array().into_iter().flatten() {
            if let Some(log) = r["log_path"].as_str()
                && let Ok(text) = std::fs::read_to_string(log)
            {
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(40)..].join("\n");
                s.push_str(&format!(
                    "\n--- worker {} log (tail) ---\n{tail}\n",
                    r["worker_id"]
                ));
            }
        }
        s
    }

    fn result(&self, worker: usize) -> &Value {
        &self.report["results"][worker - 1]
    }

    /// Model requests the fake answered (or refused) for the worker whose prompt
    /// names `file`.
    fn requests(&self, file: &str) -> Vec<&Value> {
        self.log
            .iter()
            .filter(|e| e["file"] == file && e["kind"] != "meta")
            .collect()
    }
}

/// `fanout --config C run --json --agent CLI ARGS…` in the namespace, with the fake
/// model server in `scenario`.
fn run(t: &TestEnv, cli: Cli, bin: &Path, scenario: &str, args: &[&str]) -> Outcome {
    let root = t.root();
    let bindir = root.join("agent-bin");
    std::fs::create_dir_all(&bindir).unwrap();
    let link = bindir.join(cli.name());
    if !link.exists() {
        std::os::unix::fs::symlink(bin, &link).unwrap();
    }
    let script = root.join("netns.sh");
    std::fs::write(&script, NETNS_SH).unwrap();
    let setup = root.join("setup.sh");
    std::fs::write(&setup, cli.setup()).unwrap();
    cli.prepare_home(&t.home);
    let log = root.join("model-requests.jsonl");
    let _ = std::fs::remove_file(&log);
    // `required`: these runs never pass unconfined
    // (the prices of aider's fake models, for the gateway: those of its metadata file)
    let cfg = t.config(&format!(
        "worktree_dir: '{}'\nsandbox: required\nprices:\n  fake-a: {{input: 1.0, output: 2.0}}\n  fake-b: {{input: 2.0, output: 4.0}}\n",
        t.worktrees.display()
    ));
    let stdout = root.join("fanout.stdout");
    let stderr = root.join("fanout.stderr");

    let mut c = t.command("unshare", &t.repo);
    c.args(["-rn", "sh"])
        .arg(&script)
        .arg(FANOUT)
        .arg("--config")
        .arg(&cfg)
        .args(["run", "--json", "--agent", cli.name()])
        .args(args)
        .env(
            "PATH",
            format!(
                "{}:{}",
                bindir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("FAKE_MODEL", FAKE_MODEL)
        .env("FAKE_LOG", &log)
        .env("FAKE_SCENARIO", scenario)
        .env("FAKE_SETUP", &setup)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap());
    let mut child = c.spawn().expect("unshare runs");
    let status = wait_child(&mut child, Duration::from_secs(240));
    let out = Output {
        status,
        stdout: std::fs::read(&stdout).unwrap(),
        stderr: std::fs::read(&stderr).unwrap(),
    };
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "fanout --agent {} printed no JSON report ({e}; {:?}):\n{}\n{}\nfake server: {}",
            cli.name(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(root.join("model-requests.jsonl.stderr")).unwrap_or_default()
        )
    });
    let log = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Outcome { out, report, log }
}

fn assert_cost(r: &Value, expected: f64, what: &str) {
    let got = r["cost"]
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: no cost in {r}"));
    assert!(
        (got - expected).abs() <= 1e-9 + expected * 1e-6,
        "{what}: cost {got}, the fake charged {expected}: {r}"
    );
}

/// Two workers, two tasks, two models: each worker's file is committed on its branch,
/// status success, steps and cost as the fake charged, each model reached the server.
fn two_workers_write_and_commit(cli: Cli) {
    let Some(bin) = require(cli) else { return };
    let t = TestEnv::new();
    let config_before = std::fs::read(t.repo.join(".git/config")).unwrap();
    cli.prepare_home(&t.home);
    // credentials the sandbox hides: the CLI works without reading them (its own
    // login too: the gateway holds the key, and the worker's copy has no login)
    for rel in [
        ".ssh/id_ed25519",
        ".git-credentials",
        ".netrc",
        ".claude/.credentials.json",
        ".codex/auth.json",
    ] {
        let p = t.home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "SECRET\n").unwrap();
    }
    let home_before = files_under(&t.home);
    let [m1, m2] = cli.models();
    let models = format!("{m1},{m2}");
    let base = t.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let o = run(
        &t,
        cli,
        &bin,
        r#"{"mode":"write"}"#,
        &[
            "-w",
            "2",
            "--models",
            &models,
            "--timeout-per-worker",
            "120",
            "-t",
            "create file hello-1.txt containing hi from 1",
            "-t",
            "create file hello-2.txt containing hi from 2",
        ],
    );
    assert_eq!(o.out.status.code(), Some(0), "{}\n{}", o.report, o.stderr());
    assert_eq!(o.report["totals"]["success"], 2, "{}", o.report);
    for (id, model) in [(1usize, m1), (2, m2)] {
        let r = o.result(id);
        let file = format!("hello-{id}.txt");
        let what = format!("{} worker {id}", cli.name());
        assert_eq!(r["status"], "success", "{what}: {r}\n{}", o.stderr());
        assert_eq!(r["model"], model, "{what}: {r}");
        // the file, and only it, is committed on the worker's branch
        let branch = r["branch"].as_str().unwrap();
        assert_eq!(
            t.git(&["show", &format!("{branch}:{file}")]),
            format!("hi from {id}\n"),
            "{what}"
        );
        let diff = t.git(&["diff", "--name-only", &format!("{base}..{branch}")]);
        assert_eq!(
            diff.trim(),
            file,
            "{what}: the branch holds more than the file"
        );
        assert_eq!(r["files_modified"], json!([file]), "{what}: {r}");
        // every request of this worker was for its model, and the cost is what the
        // fake charged for them
        let reqs = o.requests(&file);
        assert!(
            !reqs.is_empty(),
            "{what}: the fake saw no request: {:?}",
            o.log
        );
        for q in &reqs {
            assert_eq!(q["model"], cli.wire_model(model), "{what}: {q}");
        }
        let charged = reqs.iter().filter(|q| !q["usage"].is_null()).count();
        assert_cost(r, charged as f64 * cli.price_per_response(model), &what);
        // Through the gateway: it measured the same cost from the wire, and the fake
        // got the real key, which the worker never had.
        let g = &r["gateway"];
        assert_cost(g, charged as f64 * cli.price_per_response(model), &what);
        assert_eq!(g["cost_mismatch"], false, "{what}: {r}");
        for q in &reqs {
            assert_eq!(q["key"], REAL_KEY, "{what}: {q}");
            // At each request the agent was waiting for its answer: /proc showed it,
            // and no worker process held the real key in its environment or arguments.
            assert!(q["workers_seen"].as_u64() >= Some(1), "{what}: {q}");
            assert_eq!(q["workers_holding_key"], json!([]), "{what}: {q}");
        }
        let main = reqs.iter().filter(|q| q["kind"] == "main").count();
        assert_eq!(r["steps"], expected_steps(cli, main), "{what}: {r}");
    }
    // In the sandbox, HOME is as it was but for the caches the adapter declares
    // writable: Claude Code's and Codex's state went to private copies of their
    // configuration, dropped with the workers.
    let changed: Vec<String> = changed_files(&home_before, &files_under(&t.home))
        .into_iter()
        .filter(|p| !cli.writable_in_home().iter().any(|w| p.starts_with(w)))
        // (written by this test's setup inside the namespace, before fanout runs)
        .filter(|p| !(cli == Cli::Codex && p == ".codex/config.toml"))
        // (fanout's own record key, made by fanout before any agent starts)
        .filter(|p| p != ".local/state/fanout/record.key")
        .collect();
    assert!(
        changed.is_empty(),
        "{}: the agent changed HOME outside its declared writable paths: {changed:?}",
        cli.name()
    );
    for id in [1, 2] {
        assert_eq!(o.result(id)["sandboxed"], true, "{}", o.result(id));
    }
    // The real key is in no file a worker could write or fanout recorded: worktrees,
    // the repository and the run's records, HOME.
    for dir in [&t.worktrees, &t.repo, &t.home] {
        let holding = files_holding(dir, REAL_KEY);
        assert!(
            holding.is_empty(),
            "{}: the real key is in {holding:?}",
            cli.name()
        );
    }
    // The user's repository config is untouched (aider would write an identity there).
    assert_eq!(
        String::from_utf8_lossy(&std::fs::read(t.repo.join(".git/config")).unwrap()),
        String::from_utf8_lossy(&config_before),
        "{}: the agent changed .git/config",
        cli.name()
    );
}

/// Every file under `dir` (relative path → bytes).
fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    out
}

/// Paths added, removed or changed between two [`files_under`].
fn changed_files(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    a.keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Steps the adapter reports for a successful write, from the fake's main requests
/// (one that calls the write tool, one that says done; aider's single answer is
/// the edit).
fn expected_steps(cli: Cli, main_requests: usize) -> Value {
    match cli {
        // Claude Code's num_turns, codex's actions and replies, aider's exchanges:
        // one per model request
        Cli::Claude | Cli::Codex | Cli::Aider => json!(main_requests),
        // architect counts the steps that used tools
        Cli::Architect => json!(main_requests - 1),
    }
}

/// Worker 1 is told to keep calling tools (max steps 2) → partial, with the file it
/// wrote committed (aider, which has no step limit of its own, stops after its lint
/// reflections on the file, a Python file that does not parse); worker 2 gets an
/// HTTP 400 → failed, with the API's message in the reason.
fn max_steps_and_api_error(cli: Cli) {
    let Some(bin) = require(cli) else { return };
    let t = TestEnv::new();
    let o = run(
        &t,
        cli,
        &bin,
        r#"{"mode":"write"}"#,
        &[
            "-w",
            "2",
            "--max-steps",
            "2",
            "--timeout-per-worker",
            "120",
            "-t",
            "create file turns-1.py containing def ( fake-scenario=max_turns",
            "-t",
            "create file err-2.txt containing never fake-scenario=api_error",
        ],
    );
    let (r1, r2) = (o.result(1), o.result(2));
    let what = cli.name();
    assert_eq!(r1["status"], "partial", "{what}: {r1}\n{}", o.stderr());
    assert!(
        o.requests("turns-1.py")
            .iter()
            .all(|q| q["action"] != "error"),
        "{what}: {:?}",
        o.log
    );
    // what it wrote before the limit is kept, committed on its branch (aider stops
    // after its reflections on the file's lint errors)
    assert_eq!(r1["files_modified"], json!(["turns-1.py"]), "{what}: {r1}");
    assert_eq!(r2["status"], "failed", "{what}: {r2}\n{}", o.stderr());
    let reason = r2["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(API_ERROR), "{what}: reason {reason:?}");
    assert_ne!(o.out.status.code(), Some(0), "{what}");
}

/// The model never answers: the inactivity timeout stops the agent → timeout.
fn hang_is_an_inactivity_timeout(cli: Cli) {
    let Some(bin) = require(cli) else { return };
    // Long enough for the CLI to start (aider and architect import for seconds,
    // silently) and reach the model. On a loaded machine the start alone can take
    // longer: an attempt where the silence ran out before the agent reached the
    // model proves nothing either way, so it is repeated with twice the allowance.
    let mut idle: u64 = match cli {
        Cli::Claude | Cli::Codex => 5,
        Cli::Aider | Cli::Architect => 20,
    };
    let what = cli.name();
    for attempt in 1..=3 {
        let t = TestEnv::new();
        let idle_arg = idle.to_string();
        let o = run(
            &t,
            cli,
            &bin,
            r#"{"mode":"hang"}"#,
            &[
                "-w",
                "1",
                "--inactivity-timeout",
                &idle_arg,
                "--timeout-per-worker",
                "300",
                "create file hang-1.txt containing never",
            ],
        );
        let reached = o
            .requests("hang-1.txt")
            .iter()
            .any(|q| q["action"] == "hang");
        if !reached && attempt < 3 {
            eprintln!(
                "{what}: attempt {attempt}: stopped before reaching the model (start slower than {idle}s); retrying"
            );
            idle *= 2;
            continue;
        }
        assert!(
            reached,
            "{what}: the agent never reached the model: {:?}\n{}",
            o.log,
            o.stderr()
        );
        let r = o.result(1);
        assert_eq!(r["status"], "timeout", "{what}: {r}\n{}", o.stderr());
        let reason = r["reason"].as_str().unwrap_or_default();
        // "no output for 5s; stopped"
        assert!(
            reason.contains(&format!("{idle}s"))
                && (reason.contains("no output") || reason.contains("inactiv")),
            "{what}: reason {reason:?}"
        );
        return;
    }
}

#[test]
fn claude_two_workers_write_and_commit() {
    two_workers_write_and_commit(Cli::Claude);
}

#[test]
fn claude_max_turns_and_api_error() {
    max_steps_and_api_error(Cli::Claude);
}

#[test]
fn claude_hang_is_an_inactivity_timeout() {
    hang_is_an_inactivity_timeout(Cli::Claude);
}

#[test]
fn codex_two_workers_write_and_commit() {
    two_workers_write_and_commit(Cli::Codex);
}

#[test]
fn codex_max_turns_and_api_error() {
    max_steps_and_api_error(Cli::Codex);
}

#[test]
fn codex_hang_is_an_inactivity_timeout() {
    hang_is_an_inactivity_timeout(Cli::Codex);
}

#[test]
fn aider_two_workers_write_and_commit() {
    two_workers_write_and_commit(Cli::Aider);
}

#[test]
fn aider_max_turns_and_api_error() {
    max_steps_and_api_error(Cli::Aider);
}

#[test]
fn aider_hang_is_an_inactivity_timeout() {
    hang_is_an_inactivity_timeout(Cli::Aider);
}

#[test]
fn architect_two_workers_write_and_commit() {
    two_workers_write_and_commit(Cli::Architect);
}

#[test]
fn architect_max_turns_and_api_error() {
    max_steps_and_api_error(Cli::Architect);
}

#[test]
fn architect_hang_is_an_inactivity_timeout() {
    hang_is_an_inactivity_timeout(Cli::Architect);
}
