//! A plain HTTP/1.1 client for tests, on hyper (fanout's own stack): one request per
//! connection, on a runtime of its own, so synchronous tests can call it.

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;

/// A response: status, headers (lower-case names; the last value of a repeated one),
/// the whole body.
pub struct Reply {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

/// Send one request to `url` (`http://host:port/path`) with `headers` and `body`;
/// `Err` when the connection failed or the server answered nothing (30 s at most).
pub fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Result<Reply, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let exchange = send(method, url, headers, body);
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), exchange)
            .await
            .map_err(|_| format!("{method} {url}: no answer in 30 s"))?
    })
}

async fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Result<Reply, String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let authority = uri.authority().ok_or("no host")?.clone();
    let stream = tokio::net::TcpStream::connect(authority.as_str())
        .await
        .map_err(|e| format!("connect {authority}: {e}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut builder = hyper::Request::builder()
        .method(method)
        .uri(uri.path_and_query().map_or("/", |p| p.as_str()))
        .header("host", authority.as_str());
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let request = builder
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes()
        .to_vec();
    Ok(Reply {
        status,
        headers,
        body,
    })
}
