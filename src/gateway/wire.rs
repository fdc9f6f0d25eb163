//! The providers' wire formats, as far as the gateway reads or writes them: which
//! endpoints go through ([`endpoint`]), the token usage a response reports ([`usage`],
//! streamed or not, via [`SseScan`]), the `stream_options.include_usage` a streamed
//! Chat Completions request needs ([`prepare`]), and errors in each provider's own
//! shape ([`error_body`]).

use serde_json::Value;

use super::usage::Tokens;

/// How a provider's API speaks: its credential header, its error shape, its
/// rate-limit headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Anthropic: `x-api-key`, `{"type":"error","error":{…}}`, `anthropic-ratelimit-*`.
    Anthropic,
    /// OpenAI: `Authorization: Bearer`, `{"error":{…}}`, `x-ratelimit-*`.
    OpenAi,
}

/// An API whose responses report token usage, each in its own shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages (`POST /v1/messages`).
    Messages,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    ChatCompletions,
    /// OpenAI Responses (`POST /v1/responses`).
    Responses,
}

/// What the gateway does with a request to a provider's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// A model call: metered, priced, refused once the budget is reached.
    Metered(Api),
    /// Free (a model list, a token count): forwarded as it is.
    Free,
}

/// The endpoint `method path` is on `wire`, or `None`: not let through (anything a
/// budget would not see, such as batches or files, is refused).
pub fn endpoint(wire: Wire, method: &http::Method, path: &str) -> Option<Endpoint> {
    let post = method == http::Method::POST;
    let get = method == http::Method::GET;
    let models = path == "/v1/models" || path.starts_with("/v1/models/");
    match wire {
        Wire::Anthropic => match path {
            "/v1/messages" if post => Some(Endpoint::Metered(Api::Messages)),
            "/v1/messages/count_tokens" if post => Some(Endpoint::Free),
            _ if get && models => Some(Endpoint::Free),
            _ => None,
        },
        Wire::OpenAi => match path {
            "/v1/chat/completions" if post => Some(Endpoint::Metered(Api::ChatCompletions)),
            "/v1/responses" if post => Some(Endpoint::Metered(Api::Responses)),
            _ if get && models => Some(Endpoint::Free),
            _ => None,
        },
    }
}

/// What a metered request asks for, read from its JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// Its `model`, when a string.
    pub model: Option<String>,
    /// Whether it asks for a streamed (SSE) response.
    pub stream: bool,
}

/// Read a metered request's body; for a streamed Chat Completions request without
/// `stream_options.include_usage: true`, the body with it set (else the body
/// unchanged, `None`): without it the stream carries no usage at all. A Responses
/// request run in the background (`background: true`) is refused: its answer, and
/// the usage it is billed for, come after the call, out of the gateway's sight.
pub fn prepare(api: Api, body: &[u8]) -> Result<(Asked, Option<Vec<u8>>), String> {
    let mut v: Value =
        serde_json::from_slice(body).map_err(|e| format!("the request body is not JSON ({e})"))?;
    let Some(obj) = v.as_object_mut() else {
        return Err("the request body is not a JSON object".into());
    };
    if api == Api::Responses
        && obj
            .get("background")
            .is_some_and(|b| b != &Value::Bool(false))
    {
        return Err(
            "background responses are not let through: their usage is billed after the call, where the gateway cannot meter it"
                .into(),
        );
    }
    let asked = Asked {
        model: obj.get("model").and_then(Value::as_str).map(str::to_owned),
        stream: obj.get("stream").and_then(Value::as_bool) == Some(true),
    };
    if api != Api::ChatCompletions || !asked.stream {
        return Ok((asked, None));
    }
    let options = obj
        .entry("stream_options")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(options) = options.as_object_mut() else {
        return Err("stream_options is not a JSON object".into());
    };
    if options.get("include_usage") == Some(&Value::Bool(true)) {
        return Ok((asked, None));
    }
    options.insert("include_usage".into(), Value::Bool(true));
    let rewritten = serde_json::to_vec(&v).map_err(|e| e.to_string())?;
    Ok((asked, Some(rewritten)))
}

/// Token counts as one message of a response reports them: each count is absent
/// when that message does not say it (Anthropic's `message_delta` carries only the
/// output so far). Counts are cumulative over the response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reported {
    /// Input tokens neither read from nor written to a cache.
    pub input: Option<u64>,
    /// Input tokens read from a cache.
    pub cache_read: Option<u64>,
    /// Input tokens written to a cache.
    pub cache_write: Option<u64>,
    /// Of those, written for an hour (Anthropic prices them higher).
    pub cache_write_1h: Option<u64>,
    /// Output tokens, reasoning included.
    pub output: Option<u64>,
}

impl Reported {
    /// `so_far` updated with what this message says.
    pub fn over(self, so_far: Tokens) -> Tokens {
        Tokens {
            input: self.input.unwrap_or(so_far.input),
            cache_read: self.cache_read.unwrap_or(so_far.cache_read),
            cache_write: self.cache_write.unwrap_or(so_far.cache_write),
            cache_write_1h: self.cache_write_1h.unwrap_or(so_far.cache_write_1h),
            output: self.output.unwrap_or(so_far.output),
        }
    }
}

/// The usage (and the model, when named) one JSON message of a response of `api`
/// reports: a whole non-streamed body, or one event's `data` of a stream.
pub fn usage(api: Api, v: &Value) -> Option<(Option<&str>, Reported)> {
    fn model(v: &Value) -> Option<&str> {
        v.get("model").and_then(Value::as_str)
    }
    match api {
        Api::Messages => match v.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                let m = v.get("message")?;
                Some((model(m), anthropic(m.get("usage")?)?))
            }
            Some("message_delta") => Some((None, anthropic(v.get("usage")?)?)),
            _ => Some((model(v), anthropic(v.get("usage")?)?)),
        },
        Api::ChatCompletions => Some((model(v), chat(v.get("usage")?)?)),
        Api::Responses => {
            let r = match v.get("type").and_then(Value::as_str) {
                Some(t) if t.starts_with("response.") => v.get("response")?,
                _ => v,
            };
            Some((model(r), responses(r.get("usage")?)?))
        }
    }
}

fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// Anthropic's usage: `input_tokens` counts only what no cache touched.
fn anthropic(u: &Value) -> Option<Reported> {
    u.as_object()?;
    Some(Reported {
        input: count(u, "input_tokens"),
        cache_read: count(u, "cache_read_input_tokens"),
        cache_write: count(u, "cache_creation_input_tokens"),
        cache_write_1h: u
            .get("cache_creation")
            .and_then(|c| count(c, "ephemeral_1h_input_tokens")),
        output: count(u, "output_tokens"),
    })
}

/// Chat Completions' usage: `prompt_tokens` includes the cached ones.
fn chat(u: &Value) -> Option<Reported> {
    let prompt = count(u, "prompt_tokens")?;
    let cached = u
        .get("prompt_tokens_details")
        .and_then(|d| count(d, "cached_tokens"))
        .unwrap_or(0)
        .min(prompt);
    Some(Reported {
        input: Some(prompt - cached),
        cache_read: Some(cached),
        cache_write: None,
        cache_write_1h: None,
        output: count(u, "completion_tokens"),
    })
}

/// Responses' usage: `input_tokens` includes the cached ones.
fn responses(u: &Value) -> Option<Reported> {
    let input = count(u, "input_tokens")?;
    let cached = u
        .get("input_tokens_details")
        .and_then(|d| count(d, "cached_tokens"))
        .unwrap_or(0)
        .min(input);
    Some(Reported {
        input: Some(input - cached),
        cache_read: Some(cached),
        cache_write: None,
        cache_write_1h: None,
        output: count(u, "output_tokens"),
    })
}

/// Longest line of a stream the scanner keeps while waiting for its end; a longer
/// one is skipped (and the response marked as not fully read).
const MAX_LINE: usize = 4 << 20;

/// Reads a server-sent-events stream as it passes, chunk by chunk, and hands on the
/// `data` of each event that may carry usage (it names `"usage"`): the many events
/// that carry only text are not parsed.
#[derive(Debug, Default)]
pub struct SseScan {
    partial: Vec<u8>,
    skipping: bool,
    /// Whether a line longer than the scanner keeps was skipped.
    pub overflowed: bool,
}

impl SseScan {
    /// Scan `chunk`, calling `on_data` with each complete `data:` payload naming usage.
    pub fn feed(&mut self, chunk: &[u8], on_data: &mut dyn FnMut(&[u8])) {
        let mut rest = chunk;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            let piece = &rest[..end];
            rest = &rest[end + 1..];
            if self.skipping {
                self.skipping = false;
                continue;
            }
            if self.partial.is_empty() {
                line(piece, on_data);
            } else {
                self.partial.extend_from_slice(piece);
                let whole = std::mem::take(&mut self.partial);
                line(&whole, on_data);
            }
        }
        if self.skipping {
            return;
        }
        if self.partial.len() + rest.len() > MAX_LINE {
            self.partial.clear();
            self.skipping = true;
            self.overflowed = true;
        } else {
            self.partial.extend_from_slice(rest);
        }
    }
}

fn line(raw: &[u8], on_data: &mut dyn FnMut(&[u8])) {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    if let Some(data) = raw.strip_prefix(b"data:")
        && memchr::memmem::find(data, b"\"usage\"").is_some()
    {
        on_data(data);
    }
}

/// An error body in `wire`'s shape, for `status`.
pub fn error_body(wire: Wire, status: http::StatusCode, message: &str) -> Vec<u8> {
    let v = match wire {
        Wire::Anthropic => {
            let kind = match status.as_u16() {
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                400..=499 => "invalid_request_error",
                _ => "api_error",
            };
            serde_json::json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Wire::OpenAi => {
            let kind = match status.as_u16() {
                401 => "invalid_api_key",
                403 => "permission_denied",
                429 => "rate_limit_exceeded",
                400..=499 => "invalid_request_error",
                _ => "server_error",
            };
            serde_json::json!({"error": {"message": message, "type": kind, "param": null, "code": kind}})
        }
    };
    serde_json::to_vec(&v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_known_endpoints_go_through() {
        use http::Method;
        let a = Wire::Anthropic;
        let o = Wire::OpenAi;
        assert_eq!(
            endpoint(a, &Method::POST, "/v1/messages"),
            Some(Endpoint::Metered(Api::Messages))
        );
        assert_eq!(
            endpoint(a, &Method::POST, "/v1/messages/count_tokens"),
            Some(Endpoint::Free)
        );
        assert_eq!(
            endpoint(a, &Method::GET, "/v1/models"),
            Some(Endpoint::Free)
        );
        assert_eq!(endpoint(a, &Method::POST, "/v1/messages/batches"), None);
        assert_eq!(endpoint(a, &Method::GET, "/v1/messages"), None);
        assert_eq!(endpoint(a, &Method::POST, "/v1/chat/completions"), None);
        assert_eq!(
            endpoint(o, &Method::POST, "/v1/responses"),
            Some(Endpoint::Metered(Api::Responses))
        );
        assert_eq!(
            endpoint(o, &Method::POST, "/v1/chat/completions"),
            Some(Endpoint::Metered(Api::ChatCompletions))
        );
        assert_eq!(
            endpoint(o, &Method::GET, "/v1/models/gpt-5"),
            Some(Endpoint::Free)
        );
        for p in ["/v1/embeddings", "/v1/files", "/v1/batches", "/v1/modelsx"] {
            assert_eq!(endpoint(o, &Method::POST, p), None, "{p}");
        }
    }

    #[test]
    fn include_usage_is_added_to_streamed_chat_requests_only() {
        let body = br#"{"model":"gpt-4o","stream":true,"messages":[]}"#;
        let (asked, rewritten) = prepare(Api::ChatCompletions, body).unwrap();
        assert_eq!(asked.model.as_deref(), Some("gpt-4o"));
        assert!(asked.stream);
        let v: Value = serde_json::from_slice(&rewritten.unwrap()).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["messages"], json!([]));
        let off = br#"{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1}}"#;
        let v: Value =
            serde_json::from_slice(&prepare(Api::ChatCompletions, off).unwrap().1.unwrap())
                .unwrap();
        assert_eq!(v["stream_options"], json!({"include_usage": true, "x": 1}));
        let on = br#"{"model":"m","stream":true,"stream_options":{"include_usage":true}}"#;
        assert_eq!(prepare(Api::ChatCompletions, on).unwrap().1, None);
        let unstreamed = br#"{"model":"m"}"#;
        assert_eq!(prepare(Api::ChatCompletions, unstreamed).unwrap().1, None);
        assert_eq!(prepare(Api::Messages, body).unwrap().1, None);
        assert!(prepare(Api::Responses, b"[1]").is_err());
        assert!(prepare(Api::Responses, br#"{"model":"o3","background":true}"#).is_err());
        assert!(prepare(Api::Responses, br#"{"model":"o3","background":"yes"}"#).is_err());
        assert!(prepare(Api::Responses, br#"{"model":"o3","background":false}"#).is_ok());
        assert!(prepare(Api::Responses, b"not json").is_err());
        let bad = br#"{"model":"m","stream":true,"stream_options":3}"#;
        assert!(prepare(Api::ChatCompletions, bad).is_err());
    }

    #[test]
    fn usage_is_read_in_each_shape() {
        let start = json!({"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{
            "input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,
            "cache_creation":{"ephemeral_5m_input_tokens":15,"ephemeral_1h_input_tokens":5},
            "output_tokens":1}}});
        let (model, r) = usage(Api::Messages, &start).unwrap();
        assert_eq!(model, Some("claude-sonnet-4-5"));
        let t = r.over(Tokens::default());
        assert_eq!(
            t,
            Tokens {
                input: 10,
                cache_read: 30,
                cache_write: 20,
                cache_write_1h: 5,
                output: 1
            }
        );
        let delta = json!({"type":"message_delta","delta":{},"usage":{"output_tokens":42}});
        let (model, r) = usage(Api::Messages, &delta).unwrap();
        assert_eq!(model, None);
        let t = r.over(t);
        assert_eq!((t.input, t.cache_read, t.output), (10, 30, 42));
        assert!(usage(Api::Messages, &json!({"type":"content_block_delta"})).is_none());

        let chat_v = json!({"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":100,
            "completion_tokens":7,"prompt_tokens_details":{"cached_tokens":40}}});
        let (model, r) = usage(Api::ChatCompletions, &chat_v).unwrap();
        assert_eq!(model, Some("gpt-4o"));
        let t = r.over(Tokens::default());
        assert_eq!((t.input, t.cache_read, t.output), (60, 40, 7));
        assert!(usage(Api::ChatCompletions, &json!({"usage": null})).is_none());

        let done = json!({"type":"response.completed","response":{"model":"gpt-5","usage":{
            "input_tokens":200,"input_tokens_details":{"cached_tokens":500},"output_tokens":9}}});
        let (model, r) = usage(Api::Responses, &done).unwrap();
        assert_eq!(model, Some("gpt-5"));
        let t = r.over(Tokens::default());
        // More cached than input is nonsense: capped, never an underflow.
        assert_eq!((t.input, t.cache_read, t.output), (0, 200, 9));
        let whole = json!({"model":"gpt-5","usage":{"input_tokens":3,"output_tokens":4}});
        let t = usage(Api::Responses, &whole)
            .unwrap()
            .1
            .over(Tokens::default());
        assert_eq!((t.input, t.output), (3, 4));
        assert!(
            usage(
                Api::Responses,
                &json!({"type":"response.created","response":{}})
            )
            .is_none()
        );
    }

    fn scan(chunks: &[&[u8]]) -> (Vec<String>, bool) {
        let mut s = SseScan::default();
        let mut got = Vec::new();
        for c in chunks {
            s.feed(c, &mut |d| {
                got.push(String::from_utf8_lossy(d).trim().to_owned())
            });
        }
        (got, s.overflowed)
    }

    #[test]
    fn events_are_found_across_chunks_and_text_events_skipped() {
        let stream = b"event: message_start\r\ndata: {\"usage\":1}\r\n\r\nevent: x\ndata: {\"text\":\"hi\"}\n\ndata: {\"a\":2,\"usage\":3}\n\n";
        for cut in 0..stream.len() {
            let (got, overflowed) = scan(&[&stream[..cut], &stream[cut..]]);
            assert_eq!(
                got,
                ["{\"usage\":1}", "{\"a\":2,\"usage\":3}"],
                "cut at {cut}"
            );
            assert!(!overflowed);
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(scan(&bytes).0.len(), 2);
    }

    #[test]
    fn an_endless_line_is_skipped_not_kept() {
        let long = vec![b'x'; MAX_LINE];
        let (got, overflowed) = scan(&[b"data: \"usage\"", &long, b"\ndata: {\"usage\":1}\n"]);
        assert!(overflowed);
        assert_eq!(got, ["{\"usage\":1}"]);
    }

    #[test]
    fn errors_take_each_providers_shape() {
        let a: Value = serde_json::from_slice(&error_body(
            Wire::Anthropic,
            http::StatusCode::FORBIDDEN,
            "no",
        ))
        .unwrap();
        assert_eq!(
            a,
            json!({"type":"error","error":{"type":"permission_error","message":"no"}})
        );
        let o: Value = serde_json::from_slice(&error_body(
            Wire::OpenAi,
            http::StatusCode::UNAUTHORIZED,
            "who",
        ))
        .unwrap();
        assert_eq!(o["error"]["message"], "who");
        assert_eq!(o["error"]["code"], "invalid_api_key");
    }
}
