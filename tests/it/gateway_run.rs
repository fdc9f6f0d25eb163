//! Runs through the gateway, end to end: `fanout run` with a `command` agent (a Python
//! script calling Chat Completions at `$MY_URL` with `$MY_KEY`, declared with
//! `gateway: {base_url_env, key_env}`) against the loopback fake provider
//! (tests/support/fake_provider.rs), which fanout reaches through the user's own
//! `OPENAI_BASE_URL`, holding the real key (`OPENAI_API_KEY`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;
use crate::fake_provider::{CACHED, FakeProvider, INPUT, OUTPUT};

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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fake = FakeProvider::start(rt.handle(), refuse_every);
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
    succeeded(
        s.t.fanout(&all)
            .env("OPENAI_API_KEY", REAL_KEY)
            .env("OPENAI_BASE_URL", format!("{}/v1", s.fake.url())),
    );
    let id =
        s.t.runs()
            .into_iter()
            .find(|r| !before.contains(r))
            .expect("a new run");
    s.t.results(&id)
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            found.extend(files_holding(&p, needle));
        } else if std::fs::read(&p)
            .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            found.push(p);
        }
    }
    found
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
