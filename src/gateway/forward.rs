//! The model half of a door: a worker's call to a provider, checked (placeholder key,
//! endpoint, budget, price), sent upstream with the real key (waiting out rate
//! limits), and its response metered on the way back.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use secrecy::ExposeSecret;

use super::limiter::is_refusal;
use super::meter::{Meter, Worker};
use super::serve::{Body, BoxError, Shared, Upstream, full, respond, strip_hop_by_hop};
use super::usage::Denied;
use super::wire::{self, Api, Endpoint, SseScan, Wire};

/// Largest request body the gateway takes (a long conversation is a few MB).
const MAX_REQUEST: usize = 64 << 20;
/// Largest non-streamed response it reads whole.
const MAX_RESPONSE: usize = 64 << 20;
/// What it reads of a refusal before sending the request again.
const MAX_REFUSAL: usize = 64 << 10;

/// A request as it goes upstream, sent again as it is after a refusal.
struct Outgoing {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Bytes,
}

/// Worker `w`'s call to `up` at `rest` (the path after the provider's name).
pub async fn model(
    shared: &Arc<Shared>,
    w: &Arc<Worker>,
    up: &Arc<Upstream>,
    rest: &str,
    req: Request<Incoming>,
) -> Response<Body> {
    let wire = up.wire;
    let target = format!("{} /{}{rest}", req.method(), up.name);
    if !presents(&w.placeholder, req.headers()) {
        w.deny(Denied::Credential, &target);
        return error(
            wire,
            StatusCode::UNAUTHORIZED,
            "fanout gateway: not the API key fanout gave this worker",
        );
    }
    let Some(endpoint) = wire::endpoint(wire, req.method(), rest) else {
        w.deny(Denied::Endpoint, &target);
        return error(
            wire,
            StatusCode::FORBIDDEN,
            &format!(
                "fanout gateway: {target} is not let through (only model calls whose cost it can read)"
            ),
        );
    };
    let api = match endpoint {
        Endpoint::Metered(api) => Some(api),
        Endpoint::Free => None,
    };
    if api.is_some()
        && let Some(refusal) = budget_refusal(w, wire)
    {
        return refusal;
    }
    let (parts, body) = req.into_parts();
    let (asked, body) = match read_request(shared, w, wire, api, body).await {
        Ok(read) => read,
        Err(answer) => return answer,
    };
    let outgoing = Outgoing {
        method: parts.method.clone(),
        uri: match upstream_uri(up, rest, parts.uri.query()) {
            Ok(u) => u,
            Err(e) => return error(wire, StatusCode::BAD_REQUEST, &e),
        },
        headers: upstream_headers(up, parts.headers),
        body,
    };
    if api.is_some() {
        w.with_usage(|u| u.requests += 1);
    }
    // On a task of its own: once the call is sent, neither the agent going away nor
    // its door closing stops its answer from being read and metered.
    let (shared, w2, up) = (shared.clone(), w.clone(), up.clone());
    let exchange = w.in_flight.spawn(async move {
        let response = match send(&shared, &w2, &up, api.is_some(), &outgoing).await {
            Ok(r) => r,
            Err(answer) => return answer,
        };
        match api {
            Some(api) => metered(&shared, &w2, api, asked, response).await,
            None => passed(response.map(|b| b.map_err(Into::into).boxed())),
        }
    });
    exchange.await.unwrap_or_else(|e| {
        error(
            wire,
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("fanout gateway: the call's task ended: {e}"),
        )
    })
}

/// Whether `headers` carry `placeholder` as `x-api-key` or as a bearer token.
fn presents(placeholder: &str, headers: &http::HeaderMap) -> bool {
    let given = |name: &str, prefix: &str| {
        headers.get_all(name).iter().any(|v| {
            v.as_bytes()
                .strip_prefix(prefix.as_bytes())
                .is_some_and(|k| same(k, placeholder.as_bytes()))
        })
    };
    given("x-api-key", "") || given("authorization", "Bearer ")
}

/// `a == b`, in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The refusal of `w`'s model call when a budget is reached.
fn budget_refusal(w: &Worker, wire: Wire) -> Option<Response<Body>> {
    let stop = w.stopped()?;
    w.with_usage(|u| u.refused += 1);
    Some(error(
        wire,
        StatusCode::FORBIDDEN,
        &format!("fanout gateway: {stop}; no more model calls for this worker"),
    ))
}

/// Read the request's body (bounded) and, for a model call, what it asks for (with
/// `include_usage` set where needed); a model without a price is refused when a
/// budget applies.
async fn read_request(
    shared: &Shared,
    w: &Worker,
    wire: Wire,
    api: Option<Api>,
    body: Incoming,
) -> Result<(Option<String>, Bytes), Response<Body>> {
    let body = match http_body_util::Limited::new(body, MAX_REQUEST)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let too_large = e.is::<http_body_util::LengthLimitError>();
            let (status, why) = if too_large {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "fanout gateway: request body over {} MiB",
                        MAX_REQUEST >> 20
                    ),
                )
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    format!("fanout gateway: request body: {e}"),
                )
            };
            return Err(error(wire, status, &why));
        }
    };
    let Some(api) = api else {
        return Ok((None, body));
    };
    let (asked, rewritten) = wire::prepare(api, &body).map_err(|e| {
        error(
            wire,
            StatusCode::BAD_REQUEST,
            &format!("fanout gateway: {e}"),
        )
    })?;
    if shared.ledger.budgeted(w) {
        let priced = asked
            .model
            .as_deref()
            .is_some_and(|m| shared.ledger.priced(m));
        if !priced {
            let named = asked.model.as_deref().unwrap_or("(none named)");
            return Err(error(
                wire,
                StatusCode::FORBIDDEN,
                &format!(
                    "fanout gateway: model {named:?} has no price, so a budget cannot hold: add it under prices: in fanout.yml"
                ),
            ));
        }
    }
    Ok((asked.model, rewritten.map_or(body, Bytes::from)))
}

/// The upstream URL of `rest?query`.
fn upstream_uri(up: &Upstream, rest: &str, query: Option<&str>) -> Result<http::Uri, String> {
    let q = query.map(|q| format!("?{q}")).unwrap_or_default();
    format!("{}{rest}{q}", up.base)
        .parse()
        .map_err(|e| format!("fanout gateway: bad request path ({e})"))
}

/// The client's headers, less hop-by-hop ones, credentials and encodings; with the
/// real key, marked sensitive.
fn upstream_headers(up: &Upstream, mut headers: http::HeaderMap) -> http::HeaderMap {
    strip_hop_by_hop(&mut headers);
    for name in ["authorization", "x-api-key", "accept-encoding", "cookie"] {
        headers.remove(name);
    }
    let key = up.key.expose_secret();
    let (name, value) = match up.wire {
        Wire::Anthropic if !up.bearer => ("x-api-key", http::HeaderValue::from_str(key)),
        Wire::Anthropic | Wire::OpenAi => (
            "authorization",
            http::HeaderValue::from_str(&format!("Bearer {key}")),
        ),
    };
    if let Ok(mut value) = value {
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    headers.insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    headers
}

/// Send `out` upstream, waiting out rate limits until the worker's deadline; the
/// response, or the answer to give the client instead.
async fn send(
    shared: &Shared,
    w: &Worker,
    up: &Upstream,
    model_call: bool,
    out: &Outgoing,
) -> Result<Response<Incoming>, Response<Body>> {
    let deadline = w.deadline();
    loop {
        // A closed door sends nothing more (a call already sent is still metered).
        let admitted = tokio::select! {
            () = w.cancel.cancelled() => {
                return Err(error(up.wire, StatusCode::SERVICE_UNAVAILABLE, "fanout gateway: this worker's door is closed"));
            }
            a = up.limiter.admit(deadline) => a,
        };
        w.waited(admitted.unwrap_or_else(|d| d));
        if admitted.is_err() {
            return Err(error(
                up.wire,
                StatusCode::TOO_MANY_REQUESTS,
                "fanout gateway: the provider asks to wait past this worker's deadline",
            ));
        }
        if model_call && let Some(refusal) = budget_refusal(w, up.wire) {
            return Err(refusal);
        }
        let mut request = Request::new(full(out.body.clone()));
        *request.method_mut() = out.method.clone();
        *request.uri_mut() = out.uri.clone();
        *request.headers_mut() = out.headers.clone();
        let response = shared.client.request(request).await.map_err(|e| {
            error(
                up.wire,
                StatusCode::BAD_GATEWAY,
                &format!(
                    "fanout gateway: {} unreachable: {}",
                    up.name,
                    crate::util::http::describe(&e)
                ),
            )
        })?;
        if !is_refusal(response.status()) {
            up.limiter.answered(response.headers());
            return Ok(response);
        }
        let (parts, body) = response.into_parts();
        let read = http_body_util::Limited::new(body, MAX_REFUSAL).collect();
        let text = match tokio::time::timeout(Duration::from_secs(30), read).await {
            Ok(Ok(b)) => b.to_bytes(),
            _ => Bytes::new(),
        };
        let wait = up.limiter.refused(&parts.headers);
        let quota_gone = memchr::memmem::find(&text, b"insufficient_quota").is_some();
        let too_late = deadline.is_some_and(|d| Instant::now() + wait > d);
        if quota_gone || too_late {
            let mut headers = parts.headers.clone();
            strip_hop_by_hop(&mut headers);
            let mut answer = Response::new(full(text));
            *answer.status_mut() = parts.status;
            *answer.headers_mut() = headers;
            return Err(answer);
        }
        tracing::debug!(worker = w.id, provider = %up.name, status = %parts.status, ?wait, "gateway: rate limited, retrying");
        w.with_usage(|u| u.retries += 1);
    }
}

/// A response passed on as it is, less hop-by-hop headers.
fn passed(response: Response<Body>) -> Response<Body> {
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Response::from_parts(parts, body)
}

/// A model call's response, metered: a stream as it passes, a whole body before it
/// is handed on.
async fn metered(
    shared: &Arc<Shared>,
    w: &Arc<Worker>,
    api: Api,
    asked: Option<String>,
    response: Response<Incoming>,
) -> Response<Body> {
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let header = |name: http::header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    let encoded = !matches!(
        header(http::header::CONTENT_ENCODING).as_str(),
        "" | "identity"
    );
    if !parts.status.is_success() || encoded {
        if parts.status.is_success() {
            w.with_usage(|u| u.unmetered += 1);
        }
        return Response::from_parts(parts, body.map_err(Into::into).boxed());
    }
    let meter = shared.ledger.meter(w, asked);
    if header(http::header::CONTENT_TYPE).starts_with("text/event-stream") {
        let stream = Metered(Some(Stream {
            inner: body,
            scan: SseScan::default(),
            meter,
            shared: shared.clone(),
            api,
            ended: false,
            _in_flight: w.in_flight.token(),
        }));
        return Response::from_parts(parts, stream.boxed());
    }
    whole(shared, w, api, meter, parts, body).await
}

/// A non-streamed response: read whole (bounded), its usage recorded, then handed on.
async fn whole(
    shared: &Shared,
    w: &Worker,
    api: Api,
    mut meter: Meter,
    parts: http::response::Parts,
    body: Incoming,
) -> Response<Body> {
    let bytes = match http_body_util::Limited::new(body, MAX_RESPONSE)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            w.with_usage(|u| u.unmetered += 1);
            return respond(
                StatusCode::BAD_GATEWAY,
                "text/plain; charset=utf-8",
                format!("fanout gateway: the response could not be read whole: {e}\n").into_bytes(),
            );
        }
    };
    let value: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
    match value.as_ref().and_then(|v| wire::usage(api, v)) {
        Some((model, reported)) => shared.ledger.record(&mut meter, model, reported),
        None => w.with_usage(|u| u.unmetered += 1),
    }
    Response::from_parts(parts, full(bytes))
}

/// A streamed response, its usage read from each event before the event is handed on;
/// one of the worker's calls in flight until it ends. When the agent hangs up before
/// that, the rest is read without it (for up to [`DRAIN_WAIT`], and only while the
/// worker's door is open): the provider bills the whole answer, and its usage comes in
/// the last events.
struct Metered(Option<Stream>);

/// What [`Metered`] reads from.
struct Stream {
    inner: Incoming,
    scan: SseScan,
    meter: Meter,
    shared: Arc<Shared>,
    api: Api,
    /// The provider's stream ended.
    ended: bool,
    /// Counted among the worker's calls in flight until read to its end (closing the
    /// door waits for them).
    _in_flight: tokio_util::task::task_tracker::TaskTrackerToken,
}

/// How long the rest of a stream the agent hung up on is read, for its usage.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

impl Stream {
    /// Record the usage the events of `data` name.
    fn feed(&mut self, data: &[u8]) {
        let (meter, ledger, api) = (&mut self.meter, &self.shared.ledger, self.api);
        self.scan.feed(data, &mut |event| {
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(event) else {
                return;
            };
            if let Some((model, reported)) = wire::usage(api, &v) {
                ledger.record(meter, model, reported);
            }
        });
    }

    /// Read what is left of the stream, for its usage, then close it; given up when
    /// fanout closes the worker's door (a stop, its budget spent, its end): then
    /// dropping the stream ends the answer upstream, as it should.
    async fn drain(mut self) {
        let until = tokio::time::Instant::now() + DRAIN_WAIT;
        let closed = self.meter.worker().cancel.clone();
        loop {
            let frame = tokio::select! {
                () = closed.cancelled() => break,
                f = tokio::time::timeout_at(until, self.inner.frame()) => f,
            };
            match frame {
                Ok(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        self.feed(data);
                    }
                }
                Ok(None) => {
                    self.ended = true;
                    break;
                }
                _ => break,
            }
        }
        self.close();
    }

    /// A stream cut before its end, or that ended without any usage read, is counted
    /// as unmetered (what a cut one's first events named is counted too).
    fn close(self) {
        if !self.ended || !self.meter.seen || self.scan.overflowed {
            self.meter.worker().with_usage(|u| u.unmetered += 1);
        }
    }
}

impl hyper::body::Body for Metered {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let Some(this) = self.0.as_mut() else {
            return Poll::Ready(None);
        };
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(f) => f,
        };
        match frame {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    this.feed(data);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(e)) => {
                this.ended = true;
                Poll::Ready(Some(Err(e.into())))
            }
            None => {
                this.ended = true;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(|s| s.inner.is_end_stream())
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.0
            .as_ref()
            .map_or_else(hyper::body::SizeHint::default, |s| s.inner.size_hint())
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        let Some(stream) = self.0.take() else {
            return;
        };
        let closed = stream.meter.worker().cancel.is_cancelled();
        if closed || stream.ended || hyper::body::Body::is_end_stream(&stream.inner) {
            return stream.close();
        }
        // The agent hung up: the rest is read on a task of its own.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(stream.drain())),
            Err(_) => stream.close(),
        }
    }
}

/// An error from the gateway in `wire`'s format.
fn error(wire: Wire, status: StatusCode, message: &str) -> Response<Body> {
    respond(
        status,
        "application/json",
        wire::error_body(wire, status, message),
    )
}
