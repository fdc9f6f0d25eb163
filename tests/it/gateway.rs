//! The model gateway on loopback, against a fake provider (tests/support/
//! fake_provider.rs) speaking Anthropic Messages, Chat Completions and Responses:
//! keys, usage and cost from the wire, budgets, rate limits waited out, the
//! network allow-list.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use fanout::gateway::{
    Denied, Gateway, GatewayConfig, Network, Price, Provider, Stop, Usage, Wire, WorkerCredential,
    WorkerLimits,
};
use serde_json::{Value, json};

use crate::common::http::{Reply, request};
use crate::common::wait_until;
use crate::fake_provider::{CACHED, FakeProvider, INPUT, OUTPUT};

const ANTHROPIC_KEY: &str = "sk-ant-real-key-of-the-user";
const OPENAI_KEY: &str = "sk-real-openai-key-of-the-user";

/// The test prices (USD per million tokens): the user's `prices:`, so the shipped
/// table may change without changing these tests.
fn prices() -> BTreeMap<String, Price> {
    let price = |input, output, cached| Price {
        input,
        output,
        cached_input: Some(cached),
    };
    BTreeMap::from([
        ("fake-claude".to_owned(), price(3.0, 15.0, 0.3)),
        ("fake-gpt".to_owned(), price(2.0, 8.0, 0.5)),
    ])
}

/// The cost of one of the fake's answers for `model`, by hand.
fn one_answer(model: &str) -> f64 {
    let p = prices()[model];
    (INPUT as f64 * p.input + CACHED as f64 * p.cached_input.unwrap() + OUTPUT as f64 * p.output)
        / 1e6
}

struct Setup {
    rt: tokio::runtime::Runtime,
    fake: FakeProvider,
    gateway: Gateway,
}

fn setup(refuse_every: Option<u64>, network: Network, budget_total: Option<f64>) -> Setup {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fake = FakeProvider::start(rt.handle(), refuse_every);
    let provider = |name: &str, wire, key: &str| Provider {
        name: name.into(),
        wire,
        upstream: fake.url(),
        key: key.to_owned().into(),
        bearer: false,
    };
    let config = GatewayConfig {
        providers: vec![
            provider("anthropic", Wire::Anthropic, ANTHROPIC_KEY),
            provider("openai", Wire::OpenAi, OPENAI_KEY),
        ],
        network,
        refused: Vec::new(),
        prices: prices(),
        budget_total,
        ..GatewayConfig::default()
    };
    let gateway = Gateway::start(config, rt.handle().clone()).unwrap();
    Setup { rt, fake, gateway }
}

impl Setup {
    fn worker(&self, id: u32, budget: Option<f64>) -> WorkerCredential {
        let limits = WorkerLimits {
            budget,
            deadline: None,
        };
        self.gateway.register_worker(id, limits).unwrap()
    }

    fn usage(&self, id: u32) -> Usage {
        self.gateway.usage(id).unwrap()
    }
}

/// One of the three APIs, as a worker's agent calls it through `w`'s base URLs.
#[derive(Debug, Clone, Copy)]
enum Api {
    Messages,
    Chat,
    Responses,
}

/// `api`'s call of `model` through worker `w`'s door, presenting `key`.
fn call_with(w: &WorkerCredential, api: Api, stream: bool, model: &str, key: &str) -> Reply {
    let (url, auth) = match api {
        Api::Messages => (
            format!("{}/v1/messages", w.base_urls["anthropic"]),
            ("x-api-key", key.to_owned()),
        ),
        Api::Chat => (
            format!("{}/chat/completions", w.base_urls["openai"]),
            ("authorization", format!("Bearer {key}")),
        ),
        Api::Responses => (
            format!("{}/responses", w.base_urls["openai"]),
            ("authorization", format!("Bearer {key}")),
        ),
    };
    let body = json!({"model": model, "stream": stream, "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}]});
    let headers = [
        (auth.0, auth.1.as_str()),
        ("content-type", "application/json"),
    ];
    request("POST", &url, &headers, Some(body.to_string().into_bytes())).unwrap()
}

fn call(w: &WorkerCredential, api: Api, stream: bool, model: &str) -> Reply {
    call_with(w, api, stream, model, &w.placeholder_key)
}

fn json_of(r: &Reply) -> Value {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&r.body)))
}

#[test]
fn every_wire_format_streamed_or_not_reaches_upstream_with_the_real_key_and_is_priced() {
    let s = setup(None, Network::default(), None);
    let cases = [
        (Api::Messages, false, "fake-claude"),
        (Api::Messages, true, "fake-claude"),
        (Api::Chat, false, "fake-gpt"),
        (Api::Chat, true, "fake-gpt"),
        (Api::Responses, false, "fake-gpt"),
        (Api::Responses, true, "fake-gpt"),
    ];
    for (i, (api, stream, model)) in cases.into_iter().enumerate() {
        let id = i as u32 + 1;
        let w = s.worker(id, None);
        let r = call(&w, api, stream, model);
        let body = String::from_utf8_lossy(&r.body);
        assert_eq!(r.status, 200, "{api:?} stream={stream}: {body}");
        assert!(body.contains("hello"), "{api:?} stream={stream}: {body}");
        if stream {
            assert!(r.headers["content-type"].starts_with("text/event-stream"));
        }

        let seen = s.fake.seen();
        let last = seen.last().unwrap();
        assert_eq!(seen.len(), i + 1);
        let path = match api {
            Api::Messages => "/v1/messages",
            Api::Chat => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
        };
        assert_eq!(last.path, path);
        let (header, real) = match api {
            Api::Messages => ("x-api-key", ANTHROPIC_KEY.to_owned()),
            _ => ("authorization", format!("Bearer {OPENAI_KEY}")),
        };
        let sent: Vec<&str> = last
            .headers
            .iter()
            .filter(|(k, _)| k == header)
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(sent, [real.as_str()], "{api:?}");
        let everything = format!("{:?}{}", last.headers, String::from_utf8_lossy(&last.body));
        assert!(!everything.contains(&w.placeholder_key), "{everything}");
        assert!(!everything.contains("fanout-gateway"), "{everything}");
        if let (Api::Chat, true) = (api, stream) {
            let asked: Value = serde_json::from_slice(&last.body).unwrap();
            assert_eq!(asked["stream_options"]["include_usage"], true);
        }

        let u = s.usage(id);
        assert_eq!(
            (u.requests, u.metered, u.unmetered),
            (1, 1, 0),
            "{api:?} {u:?}"
        );
        assert_eq!(
            (u.tokens.input, u.tokens.cache_read, u.tokens.output),
            (INPUT, CACHED, OUTPUT),
            "{api:?} stream={stream}"
        );
        let want = one_answer(model);
        assert!(
            (u.cost - want).abs() < 1e-12,
            "{api:?} stream={stream}: {} != {want}",
            u.cost
        );
    }
    let total: f64 = cases.iter().map(|c| one_answer(c.2)).sum();
    assert!((s.gateway.run_cost() - total).abs() < 1e-12);
}

#[test]
fn a_key_other_than_the_workers_placeholder_is_refused_and_nothing_goes_upstream() {
    let s = setup(None, Network::default(), None);
    let w1 = s.worker(1, None);
    let w2 = s.worker(2, None);
    // Another worker's placeholder on this worker's door, the real key, no key.
    let r = call_with(
        &w1,
        Api::Messages,
        false,
        "fake-claude",
        &w2.placeholder_key,
    );
    assert_eq!(r.status, 401);
    assert_eq!(json_of(&r)["error"]["type"], "authentication_error");
    let r = call_with(&w1, Api::Chat, false, "fake-gpt", OPENAI_KEY);
    assert_eq!(r.status, 401);
    assert_eq!(json_of(&r)["error"]["code"], "invalid_api_key");
    let url = format!("{}/v1/messages", w1.base_urls["anthropic"]);
    let r = request("POST", &url, &[], Some(b"{}".to_vec())).unwrap();
    assert_eq!(r.status, 401);
    // A path the gateway does not meter (batches would escape the budget).
    let url = format!("{}/v1/messages/batches", w1.base_urls["anthropic"]);
    let key = [("x-api-key", w1.placeholder_key.as_str())];
    let r = request("POST", &url, &key, Some(b"{}".to_vec())).unwrap();
    assert_eq!(r.status, 403);
    assert_eq!(s.fake.seen().len(), 0);
    let u = s.usage(1);
    assert_eq!((u.denied_total, u.requests), (4, 0));
    let kinds: Vec<Denied> = u.denied.iter().map(|d| d.kind).collect();
    assert_eq!(
        kinds,
        [Denied::Credential, Denied::Credential, Denied::Endpoint]
    );
    assert_eq!(u.denied[0].count, 2, "{:?}", u.denied);
    assert_eq!(s.usage(2).denied_total, 0);
}

#[test]
fn a_worker_over_its_budget_is_refused_and_upstream_sees_nothing_more() {
    let s = setup(None, Network::default(), None);
    let one = one_answer("fake-claude");
    let mut w = s.worker(1, Some(one * 1.5));
    let other = s.worker(2, None);
    assert_eq!(call(&w, Api::Messages, true, "fake-claude").status, 200);
    assert_eq!(*w.stop.borrow_and_update(), None);
    // The second answer crosses the budget: it is delivered (it was in flight), and
    // the stop is sent.
    assert_eq!(call(&w, Api::Messages, false, "fake-claude").status, 200);
    assert!(w.stop.has_changed().unwrap());
    assert!(matches!(*w.stop.borrow(), Some(Stop::Budget { .. })));
    let r = call(&w, Api::Messages, true, "fake-claude");
    assert_eq!(r.status, 403);
    let e = json_of(&r);
    assert_eq!(e["type"], "error");
    assert_eq!(e["error"]["type"], "permission_error");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("budget"),
        "{e}"
    );
    assert_eq!(s.fake.seen().len(), 2);
    let u = s.usage(1);
    assert_eq!((u.requests, u.refused), (2, 1));
    assert!((u.cost - 2.0 * one).abs() < 1e-12);
    // Another worker is not held by this one's budget.
    assert_eq!(call(&other, Api::Chat, true, "fake-gpt").status, 200);
    assert_eq!(s.fake.seen().len(), 3);
    // A model without a price cannot be held to a budget: refused up front.
    let w3 = s.worker(3, Some(1.0));
    let r = call(&w3, Api::Responses, false, "unpriced-model");
    assert_eq!(r.status, 403);
    assert!(
        json_of(&r)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no price")
    );
    assert_eq!(s.fake.seen().len(), 3);
    assert!(!w3.stop.has_changed().unwrap());
}

#[test]
fn the_runs_budget_stops_every_worker() {
    let one = one_answer("fake-gpt");
    let s = setup(None, Network::default(), Some(one * 1.5));
    let a = s.worker(1, None);
    let b = s.worker(2, None);
    assert_eq!(call(&a, Api::Responses, true, "fake-gpt").status, 200);
    assert_eq!(*b.stop.borrow(), None);
    assert_eq!(call(&b, Api::Chat, false, "fake-gpt").status, 200);
    for w in [&a, &b] {
        assert!(matches!(*w.stop.borrow(), Some(Stop::RunBudget { .. })));
        let r = call(w, Api::Chat, true, "fake-gpt");
        assert_eq!(r.status, 403);
        assert_eq!(json_of(&r)["error"]["code"], "permission_denied");
    }
    assert_eq!(s.fake.seen().len(), 2);
    // A worker registered later starts stopped.
    let c = s.worker(3, None);
    assert!(matches!(*c.stop.borrow(), Some(Stop::RunBudget { .. })));
    assert_eq!(call(&c, Api::Messages, false, "fake-claude").status, 403);
    assert_eq!(s.fake.seen().len(), 2);
}

#[test]
fn rate_limits_are_waited_out_for_every_worker() {
    let s = setup(Some(3), Network::default(), None);
    // Straight to the provider, every third request fails.
    let direct: Vec<u16> = (0..3)
        .map(|_| {
            let body = json!({"model":"fake-claude","messages":[]}).to_string();
            let url = format!("{}/v1/messages", s.fake.url());
            request("POST", &url, &[], Some(body.into_bytes()))
                .unwrap()
                .status
        })
        .collect();
    assert_eq!(direct, [200, 200, 429]);

    let workers: Vec<WorkerCredential> = (1..=8).map(|id| s.worker(id, None)).collect();
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let calls: Vec<_> = workers
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let api = [Api::Messages, Api::Chat, Api::Responses][i % 3];
                let model = if i % 3 == 0 {
                    "fake-claude"
                } else {
                    "fake-gpt"
                };
                scope.spawn(move || call(w, api, i % 2 == 0, model).status)
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    assert_eq!(statuses, [200; 8]);
    let usages: Vec<Usage> = (1..=8).map(|id| s.usage(id)).collect();
    let retries: u64 = usages.iter().map(|u| u.retries).sum();
    let refused = s.fake.seen().len() as u64 - 3 - 8;
    assert!(retries >= 1, "{usages:?}");
    assert_eq!(retries, refused, "every refusal was sent again, once");
    assert!(
        usages.iter().any(|u| u.waited > Duration::ZERO),
        "{usages:?}"
    );
    for u in &usages {
        assert_eq!((u.requests, u.metered), (1, 1), "{u:?}");
    }
}

#[test]
fn a_rate_limit_past_the_workers_deadline_is_passed_on() {
    let s = setup(Some(1), Network::default(), None);
    let limits = WorkerLimits {
        budget: None,
        deadline: Some(std::time::Instant::now() + Duration::from_millis(200)),
    };
    let w = s.gateway.register_worker(1, limits).unwrap();
    let r = call(&w, Api::Messages, false, "fake-claude");
    assert_eq!(r.status, 429);
    assert_eq!(json_of(&r)["error"]["type"], "rate_limit_error");
    assert_eq!(s.fake.seen().len(), 1);
}

/// Send `head` on a new connection to `door`; the status line of the answer and the
/// connection.
fn proxy(door: SocketAddr, head: &str) -> (String, TcpStream) {
    let mut c = TcpStream::connect(door).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(head.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        assert_eq!(
            c.read(&mut byte).unwrap(),
            1,
            "{}",
            String::from_utf8_lossy(&got)
        );
        got.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    (text.lines().next().unwrap().to_owned(), c)
}

fn connect(door: SocketAddr, target: &str) -> (String, TcpStream) {
    proxy(
        door,
        &format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"),
    )
}

/// A loopback server echoing what it reads; its address.
fn echo_server() -> SocketAddr {
    echo_server_on("127.0.0.1")
}

#[test]
fn connect_reaches_allowed_hosts_only_and_denials_are_counted_per_worker() {
    let echo = echo_server();
    let elsewhere = echo_server();
    let s = setup(None, Network::Allow(vec![echo.to_string()]), None);
    let w = s.worker(1, None);
    let other = s.worker(2, None);
    assert_eq!(w.proxy_url, format!("http://{}", w.addr));

    let (status, mut tunnel) = connect(w.addr, &echo.to_string());
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    tunnel.write_all(b"ping\n").unwrap();
    let mut back = [0u8; 5];
    tunnel.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"ping\n");

    // The providers' upstream (the gateway holds their keys) is reached through the
    // door only, never tunnelled to.
    let fake = s.fake.addr.to_string();
    for target in [
        elsewhere.to_string(),
        "registry.npmjs.org:443".into(),
        fake.clone(),
    ] {
        let (status, _) = connect(w.addr, &target);
        assert!(status.starts_with("HTTP/1.1 403"), "{target}: {status}");
    }
    let (status, _) = connect(w.addr, &elsewhere.to_string());
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    let plain = "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n";
    let (status, _) = proxy(w.addr, plain);
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");

    let u = s.usage(1);
    assert_eq!(u.denied_total, 5);
    let denied: Vec<(Denied, &str, u64)> = u
        .denied
        .iter()
        .map(|d| (d.kind, d.target.as_str(), d.count))
        .collect();
    assert_eq!(
        denied,
        [
            (Denied::Host, elsewhere.to_string().as_str(), 2),
            (Denied::Host, "registry.npmjs.org:443", 1),
            (Denied::Host, fake.as_str(), 1),
            (Denied::Host, "example.com:80", 1),
        ]
    );
    assert_eq!(s.usage(2).denied_total, 0);
    drop(other);
}

#[test]
fn open_network_and_presets() {
    let echo = echo_server();
    let s = setup(None, Network::Open, None);
    let w = s.worker(1, None);
    let (status, _) = connect(w.addr, &echo.to_string());
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    // open, and the providers' upstream still only through the door
    let (status, _) = connect(w.addr, &s.fake.addr.to_string());
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    let bad = GatewayConfig {
        network: Network::Allow(vec!["npm".into(), "not a host".into()]),
        ..GatewayConfig::default()
    };
    let e = Gateway::start(bad, s.rt.handle().clone()).unwrap_err();
    assert!(e.contains("\"not a host\""), "{e}");
}

#[test]
fn an_ended_worker_s_door_is_closed_and_its_usage_kept() {
    let s = setup(None, Network::default(), None);
    let w = s.worker(1, None);
    assert_eq!(call(&w, Api::Chat, false, "fake-gpt").status, 200);
    let u = s.rt.block_on(s.gateway.end_worker(1)).unwrap();
    assert_eq!(u.requests, 1);
    assert!(TcpStream::connect(w.addr).is_err());
    assert!(s.gateway.usage(1).is_none());
}

/// A call the provider has not answered when the worker's door closes (its agent
/// killed, say) was still sent, so it is still metered: closing the door waits for
/// its answer, and the usage it returns holds the call's cost.
#[test]
fn a_call_in_flight_when_the_door_closes_is_still_metered() {
    let s = setup(None, Network::default(), None);
    let w = s.worker(1, None);
    let url = format!("{}/chat/completions", w.base_urls["openai"]);
    let auth = format!("Bearer {}", w.placeholder_key);
    let body = json!({"model": "fake-gpt", "hold": true, "messages": []}).to_string();
    let agent = std::thread::spawn(move || {
        let headers = [("authorization", auth.as_str())];
        // (the door closes under it: no answer to check)
        let _ = request("POST", &url, &headers, Some(body.into_bytes()));
    });
    assert!(wait_until(Duration::from_secs(30), || s.fake.seen().len() == 1));
    // The door is closed first (end_worker's first step), then the fake answers.
    let (u, ()) =
        s.rt.block_on(async { tokio::join!(s.gateway.end_worker(1), async { s.fake.release() }) });
    let u = u.unwrap();
    assert_eq!(u.requests, 1, "{u:?}");
    assert!((u.cost - one_answer("fake-gpt")).abs() < 1e-12, "{u:?}");
    agent.join().unwrap();
}

/// An agent that hangs up on a streamed answer after its first event (Chat
/// Completions names usage only in its last) still pays for it: the provider bills
/// the whole answer, so the gateway reads the rest without the agent; nothing is left
/// unmetered.
#[test]
fn a_stream_the_agent_hangs_up_on_is_still_metered() {
    let s = setup(None, Network::default(), None);
    let w = s.worker(1, None);
    let base = w.base_urls["openai"].clone();
    let path = base.split_once("//").unwrap().1.split_once('/').unwrap().1;
    let body = json!({"model": "fake-gpt", "stream": true, "hold_stream": true,
        "messages": []})
    .to_string();
    let mut agent = TcpStream::connect(w.addr).unwrap();
    write!(
        agent,
        "POST /{path}/chat/completions HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        w.addr,
        w.placeholder_key,
        body.len()
    )
    .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("data: ") {
        let n = agent.read(&mut buf).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    drop(agent);
    s.fake.release();
    // The gateway finds the agent gone when it passes on the next event, and reads on.
    assert!(wait_until(Duration::from_secs(30), || s.usage(1).cost > 0.0));
    let u = s.rt.block_on(s.gateway.end_worker(1)).unwrap();
    assert_eq!((u.requests, u.unmetered), (1, 0), "{u:?}");
    assert!((u.cost - one_answer("fake-gpt")).abs() < 1e-12, "{u:?}");
}

/// A door holds at most `MAX_CONNECTIONS` connections at once (tunnels included): an
/// agent that opens that many and keeps them idle gets its next call answered only
/// once one closes, and uses up none of fanout's descriptors beyond them; another
/// worker's door is not held up meanwhile.
#[test]
fn a_door_holds_a_bounded_number_of_connections() {
    let s = setup(None, Network::default(), None);
    let (w1, w2) = (s.worker(1, None), s.worker(2, None));
    let idle: Vec<TcpStream> = (0..fanout::gateway::MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(w1.addr).unwrap())
        .collect();
    // Each idle connection is taken (the door answers a request on the first at once).
    let mut first = &idle[0];
    write!(first, "GET /nowhere HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut buf = [0u8; 64];
    assert!(first.read(&mut buf).unwrap() > 0);
    let waiting = std::thread::spawn(move || {
        let r = call(&w1, Api::Chat, false, "fake-gpt");
        (r.status, std::time::Instant::now())
    });
    assert_eq!(call(&w2, Api::Chat, false, "fake-gpt").status, 200);
    // Time for the call to be answered, were it let in.
    std::thread::sleep(Duration::from_millis(300));
    let closed = std::time::Instant::now();
    drop(idle);
    let (status, answered) = waiting.join().unwrap();
    assert_eq!(status, 200);
    assert!(answered > closed, "answered before a connection closed");
}

/// The second address of the network namespace (on its loopback interface): a
/// "host elsewhere" a pinned worker may reach only through the gateway.
const ELSEWHERE: &str = "10.200.0.2";
/// Set in the namespace's copy of this test binary.
const IN_NETNS: &str = "FANOUT_TEST_IN_NETNS";

/// One door out, in a network namespace of its own (`unshare -rn`: loopback up and
/// [`ELSEWHERE`] added to it): a process confined as a pinned worker
/// (`NetPolicy::pinned`: TCP only to its gateway door, no UDP) cannot connect to a
/// TCP listener on the second address, nor send it a datagram (its listener receives
/// nothing); through the gateway, a CONNECT to a host not allowed gets 403 and is
/// counted in the worker's `denied`, one to the allowed host carries its bytes. The
/// same script unconfined reaches both listeners directly (the address is real).
#[test]
fn a_pinned_worker_reaches_another_address_only_through_the_gateway() {
    if std::env::var_os(IN_NETNS).is_some() {
        return pinned_worker_in_this_namespace();
    }
    let me = std::env::current_exe().unwrap();
    let setup = format!(
        "ip link set lo up && ip addr add {ELSEWHERE}/32 dev lo || exit 97; exec \"$0\" \"$@\""
    );
    let test = "gateway::a_pinned_worker_reaches_another_address_only_through_the_gateway";
    let out = std::process::Command::new("unshare")
        .args(["-rn", "sh", "-c", &setup])
        .arg(&me)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(IN_NETNS, "1")
        .output()
        .expect("unshare (util-linux) runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let refused = [
        "Operation not permitted",
        "Permission denied",
        "No space left",
    ];
    if !out.status.success() && refused.iter().any(|r| stderr.contains(r)) && !stdout.contains(test)
    {
        println!("skipped: the kernel gives no user and network namespace here: {stderr}");
        return;
    }
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "in the namespace ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

/// The test, inside the namespace.
fn pinned_worker_in_this_namespace() {
    use fanout::sandbox::{NetPolicy, Policy};
    let abi = fanout::sandbox::probe().abi.unwrap_or(0);
    assert!(
        abi >= 4,
        "this test needs Landlock ABI 4 (network rules), has {abi}"
    );
    let allowed = echo_server_on(ELSEWHERE);
    let other = echo_server_on(ELSEWHERE);
    let udp = std::net::UdpSocket::bind((ELSEWHERE, 0)).unwrap();
    let s = setup(None, Network::Allow(vec![allowed.to_string()]), None);
    let w = s.worker(1, None);
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("door.py");
    std::fs::write(&script, DOOR_PY).unwrap();
    let run = |network: Option<NetPolicy>| {
        let policy = Policy {
            abi,
            write_files: vec!["/dev/null".into()],
            network,
            ..Default::default()
        };
        let prepared = fanout::sandbox::prepare(&policy).unwrap();
        let mut c = std::process::Command::new("python3");
        c.arg(&script)
            .args(
                [
                    w.addr.port(),
                    allowed.port(),
                    other.port(),
                    udp.local_addr().unwrap().port(),
                ]
                .map(|p| p.to_string()),
            )
            .arg(ELSEWHERE);
        // SAFETY: `apply` makes system calls only (as fanout does between fork and exec).
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, move || prepared.apply());
        }
        let out = c.output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        said
    };

    let pinned = run(Some(NetPolicy::pinned(w.addr.port(), [])));
    for line in [
        "direct tcp: PermissionError",
        "fast open: PermissionError",
        "udp: PermissionError",
        "connect other: HTTP/1.1 403",
        "connect allowed: HTTP/1.1 200",
        "tunnel: ping",
    ] {
        assert!(pinned.contains(line), "{line:?} in:\n{pinned}");
    }
    udp.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    let got = udp.recv_from(&mut buf);
    assert!(
        matches!(&got, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the listener received a datagram from the pinned worker: {got:?}"
    );
    let u = s.usage(1);
    let denied: Vec<(Denied, &str, u64)> = (u.denied.iter())
        .map(|d| (d.kind, d.target.as_str(), d.count))
        .collect();
    assert_eq!(denied, [(Denied::Host, other.to_string().as_str(), 1)]);
    assert_eq!(u.denied_total, 1);

    // Unconfined, the same script reaches the second address directly.
    let open = run(None);
    for line in [
        "direct tcp: ok",
        "fast open: ok",
        "udp: ok",
        "connect allowed: HTTP/1.1 200",
    ] {
        assert!(open.contains(line), "{line:?} in:\n{open}");
    }
    udp.set_nonblocking(false).unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let (n, _) = udp.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"data");
}

/// A server at `ip` echoing what it reads; its address.
fn echo_server_on(ip: &str) -> SocketAddr {
    let l = std::net::TcpListener::bind((ip, 0)).unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 256];
                while let Ok(n @ 1..) = c.read(&mut buf) {
                    if c.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// `door.py DOOR ALLOWED OTHER UDP HOST`: what a worker tries, and how each ended.
const DOOR_PY: &str = r#"import socket, sys
door, allowed, other, udp = map(int, sys.argv[1:5])
host = sys.argv[5]
def attempt(what, f):
    try:
        print(what + ": " + (f() or "ok"), flush=True)
    except OSError as e:
        print(what + ": " + type(e).__name__ + " " + str(e), flush=True)
def direct():
    s = socket.create_connection((host, allowed), timeout=30)
    s.close()
def datagram():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"data", (host, udp))
def through_door(port):
    s = socket.create_connection(("127.0.0.1", door), timeout=30)
    target = "%s:%d" % (host, port)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        if not b:
            break
        head += b
    return s, head.decode().split("\r\n")[0]
def connect(port):
    s, status = through_door(port)
    if status.startswith("HTTP/1.1 200"):
        s.sendall(b"ping\n")
        print("tunnel: " + s.recv(5).decode().strip(), flush=True)
    s.close()
    return status
def fast_open():
    # TCP Fast Open connects inside sendto(), past Landlock's connect() check.
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.sendto(b"ping\n", socket.MSG_FASTOPEN, (host, allowed))
    s.close()
attempt("direct tcp", direct)
attempt("fast open", fast_open)
attempt("udp", datagram)
attempt("connect other", lambda: connect(other))
attempt("connect allowed", lambda: connect(allowed))
"#;
