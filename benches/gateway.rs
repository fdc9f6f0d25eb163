//! Benchmark (not a test): what the model gateway adds to a model call on loopback.
//!
//! - Latency: `BENCH_RUNS` (default 2000) rounds of one call straight to the fake
//!   provider (tests/support/fake_provider.rs) and one through a worker's door, each
//!   client on a kept-alive connection, the order alternating every round; p50 and
//!   p99 of each side, what the gateway adds, and the ratio. Non-streamed and
//!   streamed (SSE) Anthropic Messages. Target (issue #31): <= 1 ms added at p50.
//! - Throughput: 10 workers, each streaming `BENCH_STREAMS` (default 200) calls one
//!   after the other, all at once, through the gateway and straight to the fake;
//!   calls per second of each and the ratio.
//!
//! Run with `bench/gateway.sh` or `cargo bench --bench gateway`. Only 127.0.0.1 is
//! contacted. Figures on a loaded machine move; the ratios hold better.

#[path = "../tests/support/fake_provider.rs"]
#[allow(dead_code)]
mod fake_provider;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fanout::gateway::{Gateway, GatewayConfig, Price, Provider, Wire, WorkerLimits};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;

const WORKERS: u32 = 10;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// A kept-alive HTTP/1.1 connection to `base` (`http://host:port[/prefix]`).
struct Client {
    sender: SendRequest<Full<Bytes>>,
    authority: String,
    prefix: String,
}

impl Client {
    async fn new(base: &str) -> Client {
        let uri: hyper::Uri = base.parse().unwrap();
        let authority = uri.authority().unwrap().to_string();
        let stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        Client {
            sender,
            authority,
            prefix: uri.path().trim_end_matches('/').to_owned(),
        }
    }

    /// One Messages call; its duration, the whole answer read.
    async fn messages(&mut self, key: &str, stream: bool) -> Duration {
        let body = serde_json::json!({"model": "fake-claude", "stream": stream,
            "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]});
        let request = hyper::Request::post(format!("{}/v1/messages", self.prefix))
            .header("host", &self.authority)
            .header("x-api-key", key)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        let start = Instant::now();
        self.sender.ready().await.unwrap();
        let response = self.sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        response.into_body().collect().await.unwrap();
        start.elapsed()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn latency(direct: &str, door: &str, key: &str, stream: bool, runs: usize) {
    let mut d = Client::new(direct).await;
    let mut g = Client::new(door).await;
    let (mut direct_t, mut gateway_t) = (Vec::new(), Vec::new());
    for round in 0..runs + 50 {
        let (a, b) = if round % 2 == 0 {
            let a = d.messages("unused", stream).await;
            (a, g.messages(key, stream).await)
        } else {
            let b = g.messages(key, stream).await;
            (d.messages("unused", stream).await, b)
        };
        if round >= 50 {
            direct_t.push(a);
            gateway_t.push(b);
        }
    }
    direct_t.sort();
    gateway_t.sort();
    let kind = if stream { "streamed" } else { "whole" };
    for (name, p) in [("p50", 0.5), ("p99", 0.99)] {
        let (dp, gp) = (percentile(&direct_t, p), percentile(&gateway_t, p));
        println!(
            "latency {kind:8} {name}: direct {:.3} ms, gateway {:.3} ms, added {:.3} ms, ratio {:.2}",
            ms(dp),
            ms(gp),
            ms(gp) - ms(dp),
            gp.as_secs_f64() / dp.as_secs_f64()
        );
    }
    let added = ms(percentile(&gateway_t, 0.5)) - ms(percentile(&direct_t, 0.5));
    let verdict = if added <= 1.0 { "met" } else { "NOT" };
    println!("goal {kind} p50 added <= 1 ms: {added:.3} ms {verdict}");
}

/// `bases.len()` clients at once, each making `streams` streamed calls; calls per second.
async fn throughput(bases: Vec<(String, String)>, streams: usize) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = bases
        .into_iter()
        .map(|(base, key)| {
            tokio::spawn(async move {
                let mut c = Client::new(&base).await;
                for _ in 0..streams {
                    c.messages(&key, true).await;
                }
            })
        })
        .collect();
    let n = tasks.len() * streams;
    for t in tasks {
        t.await.unwrap();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let runs = env_count("BENCH_RUNS", 2000);
    let streams = env_count("BENCH_STREAMS", 200);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fake = fake_provider::FakeProvider::start(rt.handle(), None);
    let config = GatewayConfig {
        providers: vec![Provider {
            name: "anthropic".into(),
            wire: Wire::Anthropic,
            upstream: fake.url(),
            key: "sk-ant-bench".to_owned().into(),
            bearer: false,
        }],
        prices: BTreeMap::from([(
            "fake-claude".to_owned(),
            Price {
                input: 3.0,
                output: 15.0,
                cached_input: Some(0.3),
            },
        )]),
        ..GatewayConfig::default()
    };
    let gateway = Gateway::start(config, rt.handle().clone()).unwrap();
    let doors: Vec<_> = (1..=WORKERS)
        .map(|id| {
            gateway
                .register_worker(id, WorkerLimits::default())
                .unwrap()
        })
        .collect();
    let door = &doors[0];
    println!(
        "gateway bench: {runs} rounds per latency figure, {WORKERS} workers x {streams} streamed calls"
    );
    rt.block_on(async {
        let base = &door.base_urls["anthropic"];
        latency(&fake.url(), base, &door.placeholder_key, false, runs).await;
        latency(&fake.url(), base, &door.placeholder_key, true, runs).await;
        let direct = (0..WORKERS).map(|_| (fake.url(), "unused".to_owned())).collect();
        let through = doors
            .iter()
            .map(|d| (d.base_urls["anthropic"].clone(), d.placeholder_key.clone()))
            .collect();
        let direct = throughput(direct, streams).await;
        let through = throughput(through, streams).await;
        println!(
            "throughput {WORKERS} workers streaming: direct {direct:.0} calls/s, gateway {through:.0} calls/s, ratio {:.2}",
            through / direct
        );
    });
    let spent: f64 = (1..=WORKERS)
        .filter_map(|id| gateway.usage(id))
        .map(|u| u.cost)
        .sum();
    println!("metered through the gateway: ${spent:.4} (every call priced)");
}
