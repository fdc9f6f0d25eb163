//! The gateway: one door out for a run's agents, on loopback. It holds the model
//! providers' real API keys, measures and caps what each worker spends from the
//! responses themselves, lets through only the hosts allowed, and waits out rate
//! limits for every worker at once.
//!
//! **Its API** ([`Gateway`]): [`Gateway::start`] with a [`GatewayConfig`] (providers
//! and their keys, the network allow-list, prices, the run's `budget_total` and what
//! earlier attempts of the run spent against it) on a
//! tokio runtime; [`Gateway::register_worker`] for each worker, with its budget and
//! deadline ([`WorkerLimits`]; a deadline known only later is set with
//! [`Gateway::set_deadline`]), gives a [`WorkerCredential`]: the base URL of each
//! provider and the proxy URL to hand its agents, the placeholder key they present,
//! and a watch channel on which a [`Stop`] arrives when its budget or the run's is
//! reached (fanout then stops the worker). [`Gateway::usage`] reads a worker's
//! [`Usage`] live; [`Gateway::end_worker`] closes its door; [`Gateway::shutdown`]
//! closes all of them.
//!
//! **A port per worker.** Each worker gets a listener of its own on 127.0.0.1, and
//! whatever arrives on it is that worker's: model calls (origin-form requests under
//! `/<provider>/…`), `CONNECT` tunnels and plain-HTTP proxy requests alike. The port,
//! not a secret in the request, says whose traffic it is, so a denied attempt is
//! counted against the worker whatever credential it sent or left out, any client
//! works (many drop the user and password of a proxy URL), and the sandbox can pin a
//! worker to its own port (Landlock's TCP rules) so that no worker can use another's
//! door. Model calls must also carry the worker's placeholder key (`x-api-key` or
//! `Authorization: Bearer`): without it, or with another, the answer is 401 in the
//! provider's error format and nothing goes upstream.
//!
//! **Model traffic** (`forward`): only the endpoints whose cost the gateway can read
//! go through (Messages, Chat Completions, Responses; model lists and token counts
//! free); the placeholder is replaced by the real key (in the provider's header,
//! marked sensitive, never logged) and the request goes upstream over TLS (rustls,
//! the system's CA certificates), or over plain http only to a loopback upstream.
//! `Accept-Encoding` is set to identity so the gateway can read the answer; a
//! streamed Chat Completions request gets `stream_options.include_usage`. The usage
//! of each response, streamed (SSE) or not, is read as it passes (`wire`), priced
//! with the price table (Anthropic's cache writes at 1.25× the input price, 2× when
//! kept an hour) and added to the worker's cost at once (`meter`): a streamed
//! response's input is counted at its first event, its output when the stream
//! reports it, always before the client has the event that says it. Once a worker's
//! budget or the run's is reached, its next model call gets 403 in the provider's
//! error format; what is spent past the budget is at most the responses already in
//! flight. With a budget, a model without a price is refused (its cost could not be
//! counted).
//!
//! **Everything else** (`tunnel`): `CONNECT host:port` and plain `http://` requests in
//! absolute form go through only to hosts in the allow-list ([`Network`]: host
//! names, plus presets such as `npm`, `pypi`, `crates`; `open` switches the filter
//! off); anything else gets 403 and is counted per worker ([`Usage::denied`]). A
//! provider's upstream (and [`GatewayConfig::refused`]) is never reached through the
//! proxy, listed or open: its calls go through the door, metered, with the key the
//! gateway holds — not tunnelled past the budget with a credential an agent found. A
//! request in absolute form to the worker's own port (a client sending its base URL
//! through its proxy) is served as a model call.
//!
//! **Rate limits** (`limiter`): one limiter per provider, shared by all workers. A
//! 429, 529 or 503 is not passed on while the worker's deadline allows a retry: the
//! provider is paused for what the answer asks (`retry-after-ms`, `retry-after`, the
//! rate-limit reset headers, else a doubling back-off), every new request to it waits
//! (with jitter), and the request is sent again. Nothing has reached the client by
//! then, so the retry is invisible to it. The time each worker waits is counted. A
//! 429 that says the account's quota is gone is passed on at once.

mod allow;
mod door;
mod forward;
mod limiter;
mod meter;
mod serve;
mod setup;
mod tunnel;
mod usage;
mod wire;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

pub use crate::agent::prices::Price;
pub use allow::{Network, PRESETS, check_allow_entry};
pub use door::MAX_CONNECTIONS;
pub use setup::{GatewayConfig, Provider};
pub use usage::{Denial, Denied, Stop, Tokens, Usage, WorkerLimits};
pub use wire::Wire;

/// What a worker's agents are given to reach the network through the gateway.
#[derive(Debug, Clone)]
pub struct WorkerCredential {
    /// The worker.
    pub worker: u32,
    /// Its door: 127.0.0.1 and its port.
    pub addr: SocketAddr,
    /// The API key its agents present (in place of the real one).
    pub placeholder_key: String,
    /// Each provider's base URL by name, as the CLIs take it
    /// (`http://127.0.0.1:P/anthropic`, `http://127.0.0.1:P/openai/v1`).
    pub base_urls: BTreeMap<String, String>,
    /// For `HTTP_PROXY` / `HTTPS_PROXY`.
    pub proxy_url: String,
    /// Gets a [`Stop`] when the worker's budget or the run's is reached.
    pub stop: watch::Receiver<Option<Stop>>,
}

/// A running gateway.
#[derive(Debug)]
pub struct Gateway {
    shared: Arc<serve::Shared>,
    handle: tokio::runtime::Handle,
    listeners: Mutex<BTreeMap<u32, tokio::task::JoinHandle<()>>>,
}

impl Gateway {
    /// Check `config` and start a gateway whose tasks run on `handle`'s runtime. No
    /// port is open until a worker is registered. Errors name the provider or
    /// allow-list entry at fault.
    pub fn start(config: GatewayConfig, handle: tokio::runtime::Handle) -> Result<Gateway, String> {
        Ok(Gateway {
            shared: Arc::new(serve::Shared::new(config)?),
            handle,
            listeners: Mutex::new(BTreeMap::new()),
        })
    }

    /// Open worker `id`'s door, with its limits.
    pub fn register_worker(
        &self,
        id: u32,
        limits: WorkerLimits,
    ) -> Result<WorkerCredential, String> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| format!("gateway: cannot listen on 127.0.0.1 for worker {id}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("gateway: {e}"))?;
        let placeholder = placeholder(id)?;
        let (worker, stop) = self.shared.ledger.add(id, placeholder.clone(), limits)?;
        let listener = {
            let _entered = self.handle.enter();
            tokio::net::TcpListener::from_std(listener)
        }
        .map_err(|e| format!("gateway: {e}"))?;
        let task = self.handle.spawn(door::accept(
            listener,
            self.shared.clone(),
            worker,
            addr.port(),
        ));
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, task);
        let base_urls = self
            .shared
            .providers
            .iter()
            .map(|p| (p.name.clone(), base_url(addr, &p.name, p.wire)))
            .collect();
        Ok(WorkerCredential {
            worker: id,
            addr,
            placeholder_key: placeholder,
            base_urls,
            proxy_url: format!("http://{addr}"),
            stop,
        })
    }

    /// Set worker `id`'s deadline (when its agent's timeout ends, known once the agent
    /// starts): no rate-limit wait of its lasts past it.
    pub fn set_deadline(&self, id: u32, deadline: std::time::Instant) {
        if let Some(w) = self.shared.ledger.worker(id) {
            w.set_deadline(deadline);
        }
    }

    /// Worker `id`'s usage now.
    pub fn usage(&self, id: u32) -> Option<Usage> {
        self.shared.ledger.worker(id).map(|w| w.usage())
    }

    /// What the run has spent, USD: [`GatewayConfig::spent_before`] and what this
    /// gateway measured.
    pub fn run_cost(&self) -> f64 {
        self.shared.ledger.run_cost()
    }

    /// Close worker `id`'s door: its port, its connections and tunnels. Its usage as
    /// it ends, once the model calls it had in flight are metered (for up to
    /// [`IN_FLIGHT_WAIT`]; a call still unanswered then counts as unmetered).
    pub async fn end_worker(&self, id: u32) -> Option<Usage> {
        let worker = self.shared.ledger.remove(id)?;
        worker.cancel.cancel();
        worker.in_flight.close();
        let _ = tokio::time::timeout(IN_FLIGHT_WAIT, worker.in_flight.wait()).await;
        let task = self
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        if let Some(task) = task {
            let _ = task.await;
        }
        Some(worker.usage())
    }

    /// Close every door; each worker's usage as it ends.
    pub async fn shutdown(self) -> BTreeMap<u32, Usage> {
        let mut all = BTreeMap::new();
        for w in self.shared.ledger.all() {
            if let Some(u) = self.end_worker(w.id).await {
                all.insert(w.id, u);
            }
        }
        all
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        for w in self.shared.ledger.all() {
            w.cancel.cancel();
        }
    }
}

/// How long closing a door waits for the model calls it has in flight to be answered
/// and metered.
const IN_FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether the gateway takes `upstream` as provider `name`'s API: `https://…`, or
/// `http://` to a loopback address.
pub fn check_upstream(name: &str, upstream: &str) -> Result<(), String> {
    serve::check_upstream(name, upstream).map(drop)
}

/// A placeholder key for worker `id`: random, recognisably fanout's.
fn placeholder(id: u32) -> Result<String, String> {
    let mut bytes = [0u8; 24];
    getrandom::getrandom(&mut bytes).map_err(|e| format!("gateway: no randomness: {e}"))?;
    Ok(format!("fanout-gateway-w{id}-{}", hex::encode(bytes)))
}

/// The base URL of provider `name` on the door at `addr`, as that wire's clients take
/// it (OpenAI's include `/v1`).
fn base_url(addr: SocketAddr, name: &str, wire: Wire) -> String {
    match wire {
        Wire::Anthropic => format!("http://{addr}/{name}"),
        Wire::OpenAi => format!("http://{addr}/{name}/v1"),
    }
}
