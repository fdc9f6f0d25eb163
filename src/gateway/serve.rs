//! A worker's door: the listener on its port, HTTP/1.1 on each connection, and which
//! way each request goes (a model call, a `CONNECT` tunnel, a plain-HTTP proxy
//! request, or a denial).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::{Response, StatusCode};
use secrecy::SecretString;

use super::allow::AllowList;
use super::limiter::Limiter;
use super::meter::Ledger;
use super::setup::GatewayConfig;
use super::wire::Wire;
use crate::util::http::{self as client, HttpClient, Timeouts};

/// An error any body of the gateway may end with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every request and response the gateway sends.
pub type Body = BoxBody<Bytes, BoxError>;

/// A provider, ready to forward to.
#[derive(Debug)]
pub struct Upstream {
    /// Its name (its path prefix).
    pub name: String,
    /// Its wire format.
    pub wire: Wire,
    /// Its API's URL, without a trailing `/`.
    pub base: String,
    /// The real key.
    pub key: SecretString,
    /// Whether the key goes as `Authorization: Bearer` whatever the wire.
    pub bearer: bool,
    /// Its rate limiter.
    pub limiter: Limiter,
}

/// What every door of a gateway shares.
#[derive(Debug)]
pub struct Shared {
    /// The providers.
    pub providers: Vec<Arc<Upstream>>,
    /// The proxy's filter.
    pub allow: AllowList,
    /// The client for upstream requests (model calls and plain-HTTP proxying).
    pub client: HttpClient<Body>,
    /// Usage, budgets, workers.
    pub ledger: Ledger,
}

/// Most time to open a connection upstream (TLS included), and for each write.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const WRITE_TIMEOUT: Duration = Duration::from_secs(120);
/// Most time a response may go silent (a model thinking before it streams).
const READ_TIMEOUT: Duration = Duration::from_secs(600);

impl Shared {
    /// Check `config`: each provider's name and upstream URL (https, or http to a
    /// loopback address), the allow-list; read the CA certificates when an upstream
    /// is https.
    pub fn new(config: GatewayConfig) -> Result<Shared, String> {
        let mut providers: Vec<Arc<Upstream>> = Vec::new();
        let mut refused = config.refused;
        let mut tls = false;
        for p in config.providers {
            let (base, host, https) = check_upstream(&p.name, &p.upstream)?;
            if providers.iter().any(|q| q.name == p.name) {
                return Err(format!(
                    "gateway: provider {:?} is configured twice",
                    p.name
                ));
            }
            tls |= https;
            refused.push(host);
            providers.push(Arc::new(Upstream {
                name: p.name,
                wire: p.wire,
                base,
                key: p.key,
                bearer: p.bearer,
                limiter: Limiter::default(),
            }));
        }
        let allow = AllowList::new(&config.network, &refused)?;
        let tls = if tls {
            Some(client::tls_config().map_err(|e| format!("gateway: {e}"))?)
        } else {
            None
        };
        let timeouts = Timeouts {
            connect: CONNECT_TIMEOUT,
            read: Some(READ_TIMEOUT),
            write: Some(WRITE_TIMEOUT),
        };
        Ok(Shared {
            providers,
            allow,
            client: client::client(tls, timeouts),
            ledger: Ledger::new(config.prices, config.budget_total, config.spent_before),
        })
    }
}

/// Provider `name`'s upstream: its base URL, its `host:port` (refused by the proxy),
/// whether it is https.
pub(super) fn check_upstream(name: &str, upstream: &str) -> Result<(String, String, bool), String> {
    let bad = |why: String| format!("gateway: provider {name:?}, upstream {upstream:?}: {why}");
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!(
            "gateway: provider name {name:?}: letters, digits, '-' and '_' only (it is a path segment)"
        ));
    }
    let url = url::Url::parse(upstream).map_err(|e| bad(format!("not a URL ({e})")))?;
    let host = url.host_str().ok_or_else(|| bad("no host".into()))?;
    let https = match url.scheme() {
        "https" => true,
        "http" if client::is_loopback_host(host) => false,
        "http" => {
            return Err(bad(
                "plain http goes only to a loopback address; use https".into()
            ));
        }
        other => return Err(bad(format!("scheme {other:?} is not https"))),
    };
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() {
        return Err(bad("no user, password or query in an upstream URL".into()));
    }
    let port = url.port_or_known_default().unwrap_or(443);
    let base = upstream.trim_end_matches('/').to_owned();
    Ok((base, format!("{host}:{port}"), https))
}

/// A plain-text answer from the gateway itself.
pub fn text(status: StatusCode, message: &str) -> Response<Body> {
    respond(
        status,
        "text/plain; charset=utf-8",
        format!("{message}\n").into_bytes(),
    )
}

/// An answer from the gateway itself.
pub fn respond(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(full(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    r
}

/// `bytes` as a body.
pub fn full(bytes: Bytes) -> Body {
    http_body_util::Full::new(bytes)
        .map_err(|never| match never {})
        .boxed()
}

/// Headers that concern one connection (RFC 9110 §7.6.1), plus those the gateway
/// sets itself; never forwarded either way.
pub fn strip_hop_by_hop(headers: &mut http::HeaderMap) {
    let named: Vec<String> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    for name in named {
        headers.remove(name.as_str());
    }
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    ] {
        headers.remove(name);
    }
}

/// One of a door's connections (at most `MAX_CONNECTIONS`), held by the
/// connection and by a tunnel made on it (in the request's extensions).
#[derive(Clone)]
pub struct Slot {
    _held: Arc<tokio::sync::OwnedSemaphorePermit>,
}

impl Slot {
    /// A slot holding `permit` until its last clone goes.
    pub fn holding(permit: tokio::sync::OwnedSemaphorePermit) -> Slot {
        Slot {
            _held: Arc::new(permit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_are_https_or_loopback_http() {
        let ok = check_upstream("anthropic", "https://api.anthropic.com/").unwrap();
        assert_eq!(
            ok,
            (
                "https://api.anthropic.com".into(),
                "api.anthropic.com:443".into(),
                true
            )
        );
        let local = check_upstream("fake", "http://127.0.0.1:9/v").unwrap();
        assert_eq!(
            local,
            ("http://127.0.0.1:9/v".into(), "127.0.0.1:9".into(), false)
        );
        for (name, url, why) in [
            (
                "x",
                "http://api.example.com",
                "plain http goes only to a loopback address",
            ),
            ("x", "ftp://127.0.0.1", "scheme \"ftp\" is not https"),
            (
                "x",
                "https://u:p@api.example.com",
                "no user, password or query",
            ),
            ("x", "nope", "not a URL"),
            ("a/b", "https://api.example.com", "a path segment"),
            ("", "https://api.example.com", "a path segment"),
        ] {
            let e = check_upstream(name, url).unwrap_err();
            assert!(e.contains(why), "{url}: {e}");
        }
    }

    #[test]
    fn hop_by_hop_headers_and_those_they_name_are_dropped() {
        let mut h = http::HeaderMap::new();
        for (k, v) in [
            ("connection", "close, x-private"),
            ("x-private", "1"),
            ("proxy-authorization", "Basic abc"),
            ("transfer-encoding", "chunked"),
            ("x-kept", "yes"),
        ] {
            h.append(k, v.parse().unwrap());
        }
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert_eq!(h["x-kept"], "yes");
    }
}
