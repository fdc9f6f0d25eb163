//! The proxy half of a door: `CONNECT host:port` tunnels and plain `http://`
//! requests in absolute form, each only to a host the allow-list permits; anything
//! else is answered 403 and counted against the worker.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::allow::Via;
use super::meter::Worker;
use super::serve::{Body, Shared, strip_hop_by_hop, text};
use super::usage::Denied;

/// Most time to reach a tunnel's host.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// `CONNECT host:port`: a tunnel when the host is allowed and answers.
pub async fn connect(
    shared: &Arc<Shared>,
    w: &Arc<Worker>,
    req: Request<Incoming>,
) -> Response<Body> {
    let Some(authority) = req.uri().authority().cloned() else {
        w.deny(Denied::Host, &req.uri().to_string());
        return text(
            StatusCode::BAD_REQUEST,
            "fanout gateway: CONNECT needs host:port",
        );
    };
    let host = authority.host().to_owned();
    let port = authority.port_u16().unwrap_or(443);
    let target = format!("{host}:{port}");
    if !shared.allow.permits(&host, port, Via::Tunnel) {
        w.deny(Denied::Host, &target);
        return denied(&target);
    }
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let dialed = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((bare.as_str(), port)),
    )
    .await;
    let mut upstream = match dialed {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return text(
                StatusCode::BAD_GATEWAY,
                &format!("fanout gateway: {target}: {e}"),
            );
        }
        Err(_) => {
            return text(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("fanout gateway: {target}: no connection in time"),
            );
        }
    };
    let _ = upstream.set_nodelay(true);
    let cancel = w.cancel.clone();
    // The tunnel holds its connection's place at the door until it closes.
    let slot = req.extensions().get::<super::serve::Slot>().cloned();
    tokio::spawn(async move {
        let _slot = slot;
        let Ok(upgraded) = hyper::upgrade::on(req).await else {
            return;
        };
        let mut client = TokioIo::new(upgraded);
        tokio::select! {
            () = cancel.cancelled() => {}
            _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        }
    });
    Response::new(super::serve::full(bytes::Bytes::new()))
}

/// `METHOD http://host[:port]/…`: forwarded when the host is allowed.
pub async fn plain(
    shared: &Arc<Shared>,
    w: &Arc<Worker>,
    req: Request<Incoming>,
) -> Response<Body> {
    let uri = req.uri().clone();
    let (Some("http"), Some(host)) = (uri.scheme_str(), uri.host()) else {
        w.deny(Denied::Host, &uri.to_string());
        return text(
            StatusCode::BAD_REQUEST,
            "fanout gateway: only http:// URLs are proxied this way; https goes through CONNECT",
        );
    };
    let port = uri.port_u16().unwrap_or(80);
    let target = format!("{host}:{port}");
    if !shared.allow.permits(host, port, Via::Plain) {
        w.deny(Denied::Host, &target);
        return denied(&target);
    }
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let outgoing = Request::from_parts(parts, body.map_err(Into::into).boxed());
    match shared.client.request(outgoing).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, body.map_err(Into::into).boxed())
        }
        Err(e) => text(
            StatusCode::BAD_GATEWAY,
            &format!(
                "fanout gateway: {target}: {}",
                crate::util::http::describe(&e)
            ),
        ),
    }
}

fn denied(target: &str) -> Response<Body> {
    text(
        StatusCode::FORBIDDEN,
        &format!("fanout gateway: {target} is not in the network allow-list"),
    )
}
