//! A fake model provider on loopback for the gateway's tests and bench: it answers
//! Anthropic Messages (`POST /v1/messages`), OpenAI Chat Completions
//! (`POST /v1/chat/completions`) and Responses (`POST /v1/responses`), streamed (SSE)
//! or not, each reporting the same usage ([`INPUT`] uncached input tokens, [`CACHED`]
//! read from a cache, [`OUTPUT`] output tokens) in that API's own shape. Like OpenAI,
//! a streamed Chat Completions answer carries usage only when the request asked for
//! it (`stream_options.include_usage`). It refuses requests with 429 as it is told
//! ([`Refuse`]), whoever sends them. A request whose body says `"hold": true` is
//! answered only once [`FakeProvider::release`] is called (a call kept in flight); a
//! streamed one that says `"hold_stream": true` gets its first event at once and the
//! rest — a megabyte of keep-alive comments, then the events naming usage — once
//! released (an answer still coming when the agent hangs up). It records every
//! request it gets.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Frame};
use hyper::{Request, Response};
use serde_json::{Value, json};

/// Input tokens no cache touched, per answer.
pub const INPUT: u64 = 1000;
/// Input tokens read from a cache, per answer.
pub const CACHED: u64 = 200;
/// Output tokens, per answer.
pub const OUTPUT: u64 = 500;

/// A request the fake got.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Which requests the fake refuses with 429 (counted from 1, whoever sends them).
#[derive(Debug, Clone, Copy)]
pub enum Refuse {
    /// Every k-th, with `retry-after: 1`.
    Every(u64),
    /// The first `count`, with `retry-after: <retry_after>` (seconds).
    First { count: u64, retry_after: u64 },
}

impl Refuse {
    /// The `retry-after` of the n-th request when it is refused.
    fn nth(self, n: u64) -> Option<u64> {
        match self {
            Refuse::Every(k) => n.is_multiple_of(k).then_some(1),
            Refuse::First { count, retry_after } => (n <= count).then_some(retry_after),
        }
    }
}

/// A running fake provider.
pub struct FakeProvider {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    held: Arc<tokio::sync::Notify>,
}

impl FakeProvider {
    /// Start one on `handle`'s runtime that refuses every `refuse_every`-th request.
    pub fn start(handle: &tokio::runtime::Handle, refuse_every: Option<u64>) -> FakeProvider {
        Self::refusing(handle, refuse_every.map(Refuse::Every))
    }

    /// Start one on `handle`'s runtime that refuses what `refuse` says.
    pub fn refusing(handle: &tokio::runtime::Handle, refuse: Option<Refuse>) -> FakeProvider {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let count = Arc::new(AtomicU64::new(0));
        let held = Arc::new(tokio::sync::Notify::new());
        let (log, hold) = (seen.clone(), held.clone());
        handle.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let (log, count, hold) = (log.clone(), count.clone(), hold.clone());
                let service = hyper::service::service_fn(move |req| {
                    let (log, count, hold) = (log.clone(), count.clone(), hold.clone());
                    async move {
                        let answer = serve(req, &log, &count, refuse, hold).await;
                        Ok::<_, Infallible>(answer)
                    }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        FakeProvider { addr, seen, held }
    }

    /// Answer the request held (`"hold": true`), now or as soon as it comes.
    pub fn release(&self) {
        self.held.notify_one();
    }

    /// Its base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests it got so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// An answer's body: whole, or its first event now and the rest once released.
enum Answer {
    Whole(Full<Bytes>),
    Held {
        first: Option<Bytes>,
        /// Until the release: `None` once it came.
        release: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
        rest: VecDeque<Bytes>,
    },
}

impl hyper::body::Body for Answer {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Answer::Whole(full) => Pin::new(full).poll_frame(cx),
            Answer::Held {
                first,
                release,
                rest,
            } => {
                if let Some(b) = first.take() {
                    return Poll::Ready(Some(Ok(Frame::data(b))));
                }
                if let Some(r) = release {
                    if r.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    *release = None;
                }
                Poll::Ready(rest.pop_front().map(|b| Ok(Frame::data(b))))
            }
        }
    }
}

/// The streamed answer `text`: its first event now, the rest once `held` is released,
/// a megabyte of keep-alive comments before it.
fn held_back(text: &str, held: Arc<tokio::sync::Notify>) -> Answer {
    let at = text.find("\n\n").map_or(text.len(), |i| i + 2);
    let mut rest: VecDeque<Bytes> = (0..64)
        .map(|_| Bytes::from(": keep-alive\n".repeat(1024)))
        .collect();
    rest.push_back(Bytes::from(text[at..].to_owned()));
    Answer::Held {
        first: Some(Bytes::from(text[..at].to_owned())),
        release: Some(Box::pin(async move { held.notified().await })),
        rest,
    }
}

async fn serve(
    req: Request<hyper::body::Incoming>,
    log: &Mutex<Vec<Seen>>,
    count: &AtomicU64,
    refuse: Option<Refuse>,
    held: Arc<tokio::sync::Notify>,
) -> Response<Answer> {
    let path = req.uri().path().to_owned();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = req.into_body().collect().await.unwrap().to_bytes().to_vec();
    let asked: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    log.lock().unwrap().push(Seen {
        path: path.clone(),
        headers,
        body,
    });
    if asked["hold"] == true {
        held.notified().await;
    }
    let n = count.fetch_add(1, Ordering::SeqCst) + 1;
    if let Some(wait) = refuse.and_then(|r| r.nth(n)) {
        let mut r = reply(
            429,
            "application/json",
            json!({"type":"error","error":{"type":"rate_limit_error","message":"slow down"}})
                .to_string(),
        );
        r.headers_mut()
            .insert("retry-after", hyper::header::HeaderValue::from(wait));
        return r.map(Answer::Whole);
    }
    let model = asked["model"].as_str().unwrap_or("unnamed").to_owned();
    let stream = asked["stream"] == true;
    let include_usage = asked["stream_options"]["include_usage"] == true;
    let r = match (path.as_str(), stream) {
        ("/v1/messages", false) => reply(200, "application/json", messages(&model)),
        ("/v1/messages", true) => reply(200, "text/event-stream", messages_sse(&model)),
        ("/v1/chat/completions", false) => reply(200, "application/json", chat(&model)),
        ("/v1/chat/completions", true) => {
            reply(200, "text/event-stream", chat_sse(&model, include_usage))
        }
        ("/v1/responses", false) => reply(200, "application/json", responses(&model)),
        ("/v1/responses", true) => reply(200, "text/event-stream", responses_sse(&model)),
        _ => reply(
            404,
            "application/json",
            r#"{"error":"no such path"}"#.into(),
        ),
    };
    let (parts, body) = r.into_parts();
    if stream && asked["hold_stream"] == true {
        let text = body.collect().await.unwrap().to_bytes();
        let answer = held_back(&String::from_utf8_lossy(&text), held);
        return Response::from_parts(parts, answer);
    }
    Response::from_parts(parts, Answer::Whole(body))
}

fn reply(status: u16, content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

fn messages(model: &str) -> String {
    json!({"id":"msg_1","type":"message","role":"assistant","model":model,
        "content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn",
        "usage":{"input_tokens":INPUT,"cache_read_input_tokens":CACHED,
                 "cache_creation_input_tokens":0,"output_tokens":OUTPUT}})
    .to_string()
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn messages_sse(model: &str) -> String {
    let start = json!({"type":"message_start","message":{"id":"msg_1","type":"message",
        "role":"assistant","model":model,"content":[],
        "usage":{"input_tokens":INPUT,"cache_read_input_tokens":CACHED,
                 "cache_creation_input_tokens":0,"output_tokens":1}}});
    let delta = json!({"type":"content_block_delta","index":0,
        "delta":{"type":"text_delta","text":"hello"}});
    let end = json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},
        "usage":{"output_tokens":OUTPUT}});
    [
        event("message_start", &start),
        event("content_block_delta", &delta),
        event("message_delta", &end),
        event("message_stop", &json!({"type":"message_stop"})),
    ]
    .concat()
}

fn chat_usage() -> Value {
    json!({"prompt_tokens":INPUT + CACHED,"completion_tokens":OUTPUT,
        "prompt_tokens_details":{"cached_tokens":CACHED}})
}

fn chat(model: &str) -> String {
    json!({"id":"c1","object":"chat.completion","model":model,
        "choices":[{"index":0,"message":{"role":"assistant","content":"hello"}}],
        "usage":chat_usage()})
    .to_string()
}

fn chat_sse(model: &str, include_usage: bool) -> String {
    let mut chunk = json!({"id":"c1","object":"chat.completion.chunk","model":model,
        "choices":[{"index":0,"delta":{"content":"hello"}}]});
    if include_usage {
        // As OpenAI does: every chunk names usage, null until the last.
        chunk["usage"] = Value::Null;
    }
    let mut out = format!("data: {chunk}\n\n");
    if include_usage {
        let last = json!({"id":"c1","object":"chat.completion.chunk","model":model,
            "choices":[],"usage":chat_usage()});
        out.push_str(&format!("data: {last}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

fn responses_usage() -> Value {
    json!({"input_tokens":INPUT + CACHED,"input_tokens_details":{"cached_tokens":CACHED},
        "output_tokens":OUTPUT})
}

fn responses(model: &str) -> String {
    json!({"id":"r1","object":"response","model":model,"status":"completed",
        "output":[{"type":"message","content":[{"type":"output_text","text":"hello"}]}],
        "usage":responses_usage()})
    .to_string()
}

fn responses_sse(model: &str) -> String {
    let created = json!({"type":"response.created","response":{"id":"r1","model":model,
        "status":"in_progress","usage":null}});
    let delta = json!({"type":"response.output_text.delta","delta":"hello"});
    let done = json!({"type":"response.completed","response":{"id":"r1","model":model,
        "status":"completed","usage":responses_usage()}});
    [
        event("response.created", &created),
        event("response.output_text.delta", &delta),
        event("response.completed", &done),
    ]
    .concat()
}
