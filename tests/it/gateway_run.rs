//! Runs through the gateway, end to end: `fanout run` with a `command` agent (a Python
//! script calling Chat Completions at `$MY_URL` with `$MY_KEY`, declared with
//! `gateway: {base_url_env, key_env}`) against the loopback fake provider
//! (tests/support/fake_provider.rs), which fanout reaches through the user's own
//! `OPENAI_BASE_URL`, holding the real key (`OPENAI_API_KEY`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;
use crate::fake_provider::{CACHED, FakeProvider, INPUT, OUTPUT, Refuse};

/// The user's real key: distinctive, so that it can be looked for anywhere.
const REAL_KEY: &str = "sk-real-key-7f3a9c1e-never-in-a-worker";

/// USD per million tokens (input, output, cached input) of the agent's model.
const PRICE: (f64, f64, f64) = (2.0, 8.0, 0.5);

/// The cost of one of the fake's answers, by hand.
fn one_answer() -> f64 {
    (INPUT as f64 * PRICE.0 + OUTPUT as f64 * PRICE.1 + CACHED as f64 * PRICE.2) / 1e6
}

/// The agent: dumps its environment (`/proc/self/environ`) into `env-w<N>.txt` in its
/// worktree, then calls the model `calls` times (0: until it is stopped), a refusal
/// or error noted and the next call made 0.1 s later; it fails when any call failed.
const AGENT: &str = r#"
import json, os, sys, time, urllib.request, urllib.error
calls = int(sys.argv[1])
me = os.environ["FANOUT_WORKER_ID"]
open(f"env-w{me}.txt", "wb").write(open("/proc/self/environ", "rb").read())
failed, n = 0, 0
while calls == 0 or n < calls:
    n += 1
    req = urllib.request.Request(
        os.environ["MY_URL"] + "/chat/completions",
        data=json.dumps({"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Authorization": "Bearer " + os.environ["MY_KEY"], "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()
    except urllib.error.HTTPError as e:
        failed += 1
        print(f"call {n}: {e.code}", flush=True)
        time.sleep(0.1)
sys.exit(1 if failed else 0)
"#;

struct Setup {
    t: TestEnv,
    fake: FakeProvider,
    _rt: tokio::runtime::Runtime,
}

fn setup(refuse_every: Option<u64>) -> Setup {
    setup_refusing(refuse_every.map(Refuse::Every))
}

fn setup_refusing(refuse: Option<Refuse>) -> Setup {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fake = FakeProvider::refusing(rt.handle(), refuse);
    let t = TestEnv::new();
    std::fs::write(t.root().join("agent.py"), AGENT).unwrap();
    Setup { t, fake, _rt: rt }
}

/// A config whose agent makes `calls` calls; through the gateway (`gateway:`), or
/// straight at `direct` (the fake's base URL, with the real key in its `env:`).
fn config(s: &Setup, calls: u32, direct: Option<&str>, extra: &str) -> PathBuf {
    let script = s.t.root().join("agent.py");
    let door = match direct {
        None => "    gateway: {base_url_env: MY_URL, key_env: MY_KEY}\n".to_owned(),
        Some(url) => format!("    env: {{MY_URL: '{url}', MY_KEY: '{REAL_KEY}'}}\n"),
    };
    s.t.config(&format!(
        "parallel_runs:\n  agent: caller\nworktree_dir: '{}'\nagents:\n  caller:\n    command: ['/usr/bin/python3', '{}', '{calls}']\n{door}prices:\n  fake-gpt: {{input: {}, output: {}, cached_input: {}}}\n{extra}",
        s.t.worktrees.display(),
        script.display(),
        PRICE.0,
        PRICE.1,
        PRICE.2,
    ))
}

/// `fanout <args>` with the real key and the fake as the user's `OPENAI_*`.
fn fanout(s: &Setup, args: &[&str]) -> std::process::Command {
    let mut c = s.t.fanout(args);
    c.env("OPENAI_API_KEY", REAL_KEY)
        .env("OPENAI_BASE_URL", format!("{}/v1", s.fake.url()));
    c
}

/// `fanout run` with `cfg` and `args`, the real key and the fake as the user's
/// `OPENAI_*`; results.json.
fn run(s: &Setup, cfg: &Path, args: &[&str]) -> Value {
    let before = s.t.runs();
    let mut all = vec![
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "-q",
        "--fail-on",
        "never",
    ];
    all.extend(args);
    succeeded(&mut fanout(s, &all));
    let id =
        s.t.runs()
            .into_iter()
            .find(|r| !before.contains(r))
            .expect("a new run");
    s.t.results(&id)
}

#[test]
fn an_agent_that_ignores_its_budget_is_refused_at_the_call_that_crosses_it_and_never_sees_the_key()
{
    let s = setup(None);
    let cfg = config(
        &s,
        0,
        None,
        "setup:\n  - tr '\\0' '\\n' < /proc/self/environ > setup-env.txt\n",
    );
    // Four answers cross $0.02 (three do not).
    let budget = 0.02;
    let crossing = (budget / one_answer()).ceil() as usize;
    assert_eq!(crossing, 4);
    let r = run(
        &s,
        &cfg,
        &[
            "-w",
            "1",
            "-t",
            "call",
            "--budget-per-worker",
            "0.02",
            "--timeout-per-worker",
            "60s",
        ],
    );
    let w = &r["results"][0];
    // The fake saw the calls up to the one that crossed the budget, none after.
    let seen = s.fake.seen();
    assert_eq!(seen.len(), crossing, "{w}");
    let g = &w["gateway"];
    assert_eq!(g["requests"], crossing as u64, "{w}");
    assert_eq!(g["input_tokens"], INPUT * crossing as u64, "{w}");
    assert_eq!(g["output_tokens"], OUTPUT * crossing as u64, "{w}");
    assert_eq!(g["cache_read_tokens"], CACHED * crossing as u64, "{w}");
    let cost = g["cost"].as_f64().unwrap();
    assert!((cost - one_answer() * crossing as f64).abs() < 1e-9, "{w}");
    // fanout stopped it, saying why by the gateway's measure.
    assert_eq!(w["status"], "partial", "{w}");
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("stopped: by the gateway's measure of its model calls, the worker's budget of $0.0200 is reached"),
        "{w}"
    );
    // The real key went upstream, and nowhere a worker could see it.
    assert!(seen.iter().all(|q| {
        q.headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == &format!("Bearer {REAL_KEY}"))
    }));
    let wt = PathBuf::from(w["worktree_path"].as_str().unwrap());
    let env = std::fs::read_to_string(wt.join("env-w1.txt")).unwrap();
    assert!(env.contains("MY_KEY=fanout-gateway-w1-"), "{env}");
    assert!(env.contains("HTTPS_PROXY=http://127.0.0.1:"), "{env}");
    let setup_env = std::fs::read_to_string(wt.join("setup-env.txt")).unwrap();
    assert!(
        setup_env.contains("HTTPS_PROXY=http://127.0.0.1:"),
        "{setup_env}"
    );
    // Not in the agent's or the setup command's environment, the worktree, the run's
    // records (results, journal, logs), nor anywhere else under the test's directory.
    let holding = files_holding(s.t.root(), REAL_KEY);
    assert!(holding.is_empty(), "the real key is in {holding:?}");
}

#[test]
fn a_run_at_its_budget_total_stops_every_worker_within_the_responses_in_flight() {
    let s = setup(None);
    let cfg = config(&s, 0, None, "");
    let cap = 0.03;
    let crossing = (cap / one_answer()).ceil() as usize;
    let r = run(
        &s,
        &cfg,
        &[
            "-w",
            "3",
            "-t",
            "call",
            "--budget-total",
            "0.03",
            "--timeout-per-worker",
            "60s",
        ],
    );
    let results = r["results"].as_array().unwrap();
    // The fake saw the calls up to the cap and at most one in flight per other worker.
    let seen = s.fake.seen().len();
    assert!(
        (crossing..crossing + 2 + 1).contains(&seen),
        "{seen} calls for a cap of {crossing}: {r}"
    );
    let measured: f64 = results
        .iter()
        .map(|w| w["gateway"]["cost"].as_f64().unwrap())
        .sum();
    assert!((measured - one_answer() * seen as f64).abs() < 1e-9, "{r}");
    for w in results {
        assert_eq!(w["status"], "partial", "{w}");
        let reason = w["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("stopped: by the gateway's measure of its model calls, the run's budget_total of $0.0300 is reached"),
            "{w}"
        );
    }
}

#[test]
fn eight_workers_ride_out_a_provider_that_refuses_every_third_call() {
    let s = setup(Some(3));
    let cfg = config(&s, 3, None, "");
    let r = run(
        &s,
        &cfg,
        &["-w", "8", "-t", "call", "--timeout-per-worker", "120s"],
    );
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 8);
    let (mut waited, mut retries) = (0.0, 0);
    for w in results {
        assert_eq!(w["status"], "success", "{w}");
        assert_eq!(w["gateway"]["requests"], 3, "{w}");
        waited += w["gateway"]["rate_limit_wait"].as_f64().unwrap();
        retries += w["gateway"]["retries"].as_u64().unwrap();
    }
    // 24 calls answered; every refusal (a third of what the fake got) sent again.
    let seen = s.fake.seen().len() as u64;
    assert_eq!(seen, 24 + retries, "{r}");
    assert_eq!(retries, seen / 3, "{r}");
    assert!(waited >= 1.0, "{r}");
}

/// The same agents pointed straight at the provider (`network: open`, so that the
/// sandbox lets them connect to it): all 24 calls reach it, its refusals reach them.
#[test]
fn the_same_agents_straight_at_the_provider_fail_on_its_refusals() {
    let s = setup(Some(3));
    let direct = format!("{}/v1", s.fake.url());
    let cfg = config(&s, 3, Some(&direct), "network: open\n");
    let r = run(
        &s,
        &cfg,
        &["-w", "8", "-t", "call", "--timeout-per-worker", "120s"],
    );
    let results = r["results"].as_array().unwrap();
    // 24 calls, every third refused: 8 refusals, each failing its worker.
    assert_eq!(s.fake.seen().len(), 24, "{r}");
    let failed: Vec<&Value> = results.iter().filter(|w| w["status"] == "failed").collect();
    assert!(failed.len() >= 3, "{r}");
    let refused = failed.iter().all(|w| {
        let log = std::fs::read_to_string(w["log_path"].as_str().unwrap()).unwrap();
        log.lines()
            .any(|l| l.starts_with("call ") && l.ends_with(": 429"))
    });
    assert!(refused, "{r}");
    assert!(results.iter().all(|w| w["gateway"]["requests"] == 0), "{r}");
}

/// The agent: `CONNECT`s through its `HTTPS_PROXY` to each `host:port` given, and
/// writes each answer's status line into `connects.txt` in its worktree.
const CONNECTS: &str = r#"
import os, socket, sys
proxy = os.environ["HTTPS_PROXY"].rsplit("/", 1)[-1].rsplit(":", 1)
lines = []
for target in sys.argv[1:]:
    s = socket.create_connection((proxy[0], int(proxy[1])), timeout=30)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        if not b:
            break
        head += b
    s.close()
    lines.append(target + " " + head.decode().split("\r\n")[0])
open("connects.txt", "w").write("\n".join(lines) + "\n")
"#;

/// A loopback listener that takes connections and holds them; its `host:port`.
fn listener() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming().flatten() {
            held.push(c);
        }
    });
    addr
}

/// `network:` reaches the gateway: a host the run's `allow:` lists is tunnelled to
/// (200), one it does not list is refused (403) and counted in the worker's
/// `denied`; under `network: open` both pass. The providers' upstream — the gateway
/// holds its key — is refused either way: a worker reaches it through its door only.
#[test]
fn the_runs_network_is_what_the_gateway_lets_through() {
    let s = setup(None);
    let script = s.t.root().join("connects.py");
    std::fs::write(&script, CONNECTS).unwrap();
    let (listed, other) = (listener(), listener());
    let upstream = s.fake.addr.to_string();
    let connects = |network: &str| {
        let cfg = s.t.config(&format!(
            "parallel_runs:\n  agent: c\nworktree_dir: '{}'\nagents:\n  c:\n    command: ['/usr/bin/python3', '{}', '{listed}', '{other}', '{upstream}']\nnetwork: {network}\n",
            s.t.worktrees.display(),
            script.display(),
        ));
        let r = run(&s, &cfg, &["-w", "1", "-t", "connect"]);
        let w = r["results"][0].clone();
        assert_eq!(w["status"], "success", "{w}");
        let wt = PathBuf::from(w["worktree_path"].as_str().unwrap());
        let said = std::fs::read_to_string(wt.join("connects.txt")).unwrap();
        (said, w)
    };
    let (said, w) = connects(&format!("{{allow: ['{listed}']}}"));
    for line in [
        format!("{listed} HTTP/1.1 200"),
        format!("{other} HTTP/1.1 403"),
        format!("{upstream} HTTP/1.1 403"),
    ] {
        assert!(said.contains(&line), "{line:?} in:\n{said}");
    }
    let g = &w["gateway"];
    assert_eq!(g["denied_total"], 2, "{w}");
    let denied: Vec<&str> = (g["denied"].as_array().unwrap().iter())
        .map(|d| d["target"].as_str().unwrap())
        .collect();
    assert_eq!(denied, [other.as_str(), upstream.as_str()], "{w}");

    let (said, w) = connects("open");
    for line in [
        format!("{listed} HTTP/1.1 200"),
        format!("{other} HTTP/1.1 200"),
        format!("{upstream} HTTP/1.1 403"),
    ] {
        assert!(said.contains(&line), "{line:?} in:\n{said}");
    }
    assert_eq!(w["gateway"]["denied_total"], 1, "{w}");
    assert!(s.fake.seen().is_empty());
}

/// The agent: dumps its environment into `env-w<N>.txt`, then calls Anthropic's
/// Messages API at `$MY_URL` with `$MY_KEY` once.
const MESSAGES: &str = r#"
import json, os, urllib.request
open("env-w%s.txt" % os.environ["FANOUT_WORKER_ID"], "wb").write(open("/proc/self/environ", "rb").read())
req = urllib.request.Request(
    os.environ["MY_URL"] + "/v1/messages",
    data=json.dumps({"model": "fake-claude", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"x-api-key": os.environ["MY_KEY"], "content-type": "application/json"},
)
urllib.request.urlopen(req, timeout=30).read()
"#;

/// Every model credential in fanout's environment (`secret::MODEL_CREDENTIALS`, each
/// with a value of its own) reaches neither the agent, nor a setup command, nor a
/// check; with `ANTHROPIC_API_KEY` unset, the gateway takes `ANTHROPIC_AUTH_TOKEN` as
/// Anthropic's key and sends it upstream as a bearer token.
#[test]
fn no_model_credential_reaches_a_worker_and_anthropics_auth_token_goes_upstream_as_bearer() {
    let s = setup(None);
    let script = s.t.root().join("messages.py");
    std::fs::write(&script, MESSAGES).unwrap();
    let dump = |to: &str| format!("tr '\\0' '\\n' < /proc/self/environ > {to}");
    let cfg = s.t.config(&format!(
        "parallel_runs:\n  agent: m\nworktree_dir: '{}'\nagents:\n  m:\n    command: ['/usr/bin/python3', '{}']\n    gateway: {{base_url_env: MY_URL, key_env: MY_KEY, provider: anthropic}}\nsetup:\n  - {}\nchecks:\n  - {}\n",
        s.t.worktrees.display(),
        script.display(),
        dump("setup-env.txt"),
        dump("check-env.txt"),
    ));
    let mut c = s.t.fanout(&[
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "-q",
        "-w",
        "1",
        "-t",
        "t",
    ]);
    for name in fanout::secret::MODEL_CREDENTIALS {
        if *name != "ANTHROPIC_API_KEY" {
            c.env(name, format!("model-secret-{name}"));
        }
    }
    c.env("ANTHROPIC_BASE_URL", s.fake.url());
    succeeded(&mut c);
    let id = s.t.runs().pop().unwrap();
    let w = &s.t.results(&id)["results"][0];
    assert_eq!(w["status"], "success", "{w}");
    let wt = PathBuf::from(w["worktree_path"].as_str().unwrap());
    for file in ["env-w1.txt", "setup-env.txt", "check-env.txt"] {
        let env = String::from_utf8_lossy(&std::fs::read(wt.join(file)).unwrap()).into_owned();
        assert!(
            env.contains("HTTPS_PROXY=http://127.0.0.1:"),
            "{file}: {env}"
        );
        assert!(!env.contains("model-secret-"), "{file}: {env}");
    }
    let seen = s.fake.seen();
    assert_eq!(seen.len(), 1);
    let auth: Vec<(&str, &str)> = (seen[0].headers.iter())
        .filter(|(k, _)| k == "authorization" || k == "x-api-key")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        auth,
        [("authorization", "Bearer model-secret-ANTHROPIC_AUTH_TOKEN")]
    );
}

#[test]
fn the_agents_model_time_counts_from_its_start_not_from_its_setup() {
    // The first call is refused with `retry-after: 2`: served on its retry only if
    // the worker's deadline (4 s) counts from when its agent started, not from before
    // its 3-second setup.
    let s = setup_refusing(Some(Refuse::First {
        count: 1,
        retry_after: 2,
    }));
    let cfg = config(&s, 1, None, "setup:\n  - sleep 3\n");
    let r = run(
        &s,
        &cfg,
        &["-w", "1", "-t", "call", "--timeout-per-worker", "4s"],
    );
    let w = &r["results"][0];
    assert_eq!(w["status"], "success", "{w}");
    assert_eq!(w["gateway"]["requests"], 1, "{w}");
    assert_eq!(w["gateway"]["retries"], 1, "{w}");
    assert_eq!(s.fake.seen().len(), 2, "{w}");
}

#[test]
fn a_worker_whose_processes_never_started_has_no_gateway_record() {
    let s = setup(None);
    // A `writable:` path under a file: its sandbox cannot be made (after its door in
    // the gateway opened), so nothing of it runs. Needs Landlock (`required`).
    let file = s.t.root().join("a-file");
    std::fs::write(&file, "").unwrap();
    let cfg = config(&s, 1, None, "");
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "    gateway:",
        &format!("    writable: ['{}/sub']\n    gateway:", file.display()),
    );
    std::fs::write(&cfg, text).unwrap();
    let r = run(
        &s,
        &cfg,
        &["-w", "1", "-t", "call", "--sandbox", "required"],
    );
    let w = &r["results"][0];
    assert_eq!(w["status"], "failed", "{w}");
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("could not prepare the worker's sandbox"),
        "{w}"
    );
    assert!(w.get("gateway").is_none_or(Value::is_null), "{w}");
}

/// The agent of [`resume_after_sigkill_restarts_the_gateway_and_counts_what_was_spent`]:
/// worker 1 makes two calls and ends; before the resume (`argv[1]` missing) the others
/// wait to be killed; resumed, worker 2 calls until it is refused and then ignores
/// SIGTERM, worker 3 waits to be stopped, and worker 4 must not run.
const RESUMED_AGENT: &str = r#"
import json, os, signal, sys, time, urllib.request, urllib.error
me = int(os.environ["FANOUT_WORKER_ID"])
open(f"env-w{me}.txt", "wb").write(open("/proc/self/environ", "rb").read())
def call():
    req = urllib.request.Request(
        os.environ["MY_URL"] + "/chat/completions",
        data=json.dumps({"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Authorization": "Bearer " + os.environ["MY_KEY"], "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()
        return True
    except urllib.error.HTTPError:
        return False
if me == 1:
    sys.exit(0 if call() and call() else 1)
if os.path.exists(sys.argv[1]) and me == 2:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while call():
        pass
while me != 4:
    time.sleep(1)
"#;

#[test]
fn resume_after_sigkill_restarts_the_gateway_and_counts_what_was_spent() {
    let s = setup(None);
    let script = s.t.root().join("resumed-agent.py");
    std::fs::write(&script, RESUMED_AGENT).unwrap();
    let resumed = s.t.root().join("resumed");
    // Four answers reach the cap; worker 1 spends two of them in the first attempt.
    let cap = 0.024;
    assert_eq!((cap / one_answer()).ceil(), 4.0);
    let cfg = s.t.config(&format!(
        "parallel_runs:\n  agent: caller\nworktree_dir: '{}'\nkill_grace: 5\nagents:\n  caller:\n    command: ['/usr/bin/python3', '{}', '{}']\n    gateway: {{base_url_env: MY_URL, key_env: MY_KEY}}\nprices:\n  fake-gpt: {{input: {}, output: {}, cached_input: {}}}\n",
        s.t.worktrees.display(),
        script.display(),
        resumed.display(),
        PRICE.0,
        PRICE.1,
        PRICE.2,
    ));
    let mut args = vec!["--config", cfg.to_str().unwrap(), "run", "-q"];
    args.extend(["--run-id", "spent", "-w", "2", "--budget-total", "0.024"]);
    args.extend(["--timeout-per-worker", "60s"]);
    args.extend(["-t", "a", "-t", "b", "-t", "c", "-t", "d"]);
    let mut child = fanout(&s, &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Worker 1 finished, and worker 3 took its slot (its agent is running).
    let w1 = s.t.run_dir("spent").join("results/w1.json");
    let w3 = s.t.worktrees.join("spent/w3/env-w3.txt");
    let ready = wait_until(std::time::Duration::from_secs(60), || {
        w1.is_file() && w3.is_file()
    });
    // A crash: fanout and its gateway die at once; the agents are left running.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(ready, "worker 1 did not finish, or worker 3 did not start");
    assert_eq!(s.fake.seen().len(), 2);

    std::fs::write(&resumed, "").unwrap();
    let args = ["--config", cfg.to_str().unwrap(), "resume", "spent"];
    // (it exits 1: workers 2 to 4 did not succeed)
    let out = fanout(&s, &[&args[..], &["--stop-survivors", "-q"]].concat())
        .output()
        .unwrap();
    let r = s.t.results("spent");
    let results = r["results"].as_array().unwrap();
    // The resumed attempt stopped at the run's total: two more answers, not four.
    let seen = s.fake.seen();
    assert_eq!(
        seen.len(),
        4,
        "{r}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests: Vec<&Value> = results.iter().map(|w| &w["gateway"]["requests"]).collect();
    assert_eq!(
        requests,
        [&2.into(), &2.into(), &0.into(), &Value::Null],
        "{r}"
    );
    assert_eq!(results[0]["status"], "success", "{r}");
    for w in &results[1..3] {
        assert_eq!(w["attempt"], 2, "{w}");
        assert_eq!(w["status"], "partial", "{w}");
        let reason = w["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("stopped: by the gateway's measure of its model calls, the run's budget_total of $0.0240 is reached ($0.0244 spent)"),
            "{w}"
        );
    }
    // Worker 4 waited for a slot while worker 2 was being stopped: the kept spend and
    // what this attempt's gateway saw reach the total, so it never started.
    let reason = results[3]["reason"].as_str().unwrap();
    assert!(reason.starts_with("not started"), "{r}");
    // The resumed calls went through a new gateway, with the real key; the resumed
    // agent had its placeholder, and the key is nowhere a worker could see it.
    assert!(seen.iter().all(|q| {
        q.headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == &format!("Bearer {REAL_KEY}"))
    }));
    let wt = PathBuf::from(results[1]["worktree_path"].as_str().unwrap());
    let env = std::fs::read_to_string(wt.join("env-w2.txt")).unwrap();
    assert!(env.contains("MY_KEY=fanout-gateway-w2-"), "{env}");
    let holding = files_holding(s.t.root(), REAL_KEY);
    assert!(holding.is_empty(), "the real key is in {holding:?}");
}
