//! A worker's door: the listener on its port, its HTTP/1.1 connections — at most
//! [`MAX_CONNECTIONS`] at once, a tunnel counting as its connection until it closes, so
//! that one agent cannot use up fanout's file descriptors and stall the other workers'
//! doors (more wait to be accepted) — and where each request goes (a model call, a
//! `CONNECT` tunnel, a plain-HTTP proxy request, or a denial).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;

use super::meter::Worker;
use super::serve::{Body, Shared, Slot, text};
use super::usage::Denied;
use crate::util::http as client;

/// Most connections (tunnels included) one door holds at once.
pub const MAX_CONNECTIONS: usize = 32;

/// Serve worker `w`'s door until it is closed.
pub async fn accept(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    w: Arc<Worker>,
    port: u16,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let slot = tokio::select! {
            () = w.cancel.cancelled() => return,
            s = Arc::clone(&slots).acquire_owned() => match s {
                Ok(s) => Slot::holding(s),
                Err(_) => return,
            },
        };
        let accepted = tokio::select! {
            () = w.cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection(stream, shared.clone(), w.clone(), port, slot));
            }
            // Out of descriptors, or a connection reset before it was taken: the
            // listener itself is fine.
            Err(e) => {
                tracing::debug!("gateway: accept on port {port}: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// HTTP/1.1 on one connection, until either end closes it or the door is closed.
async fn connection(
    stream: tokio::net::TcpStream,
    shared: Arc<Shared>,
    w: Arc<Worker>,
    port: u16,
    slot: Slot,
) {
    let cancel = w.cancel.clone();
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let shared = shared.clone();
        let w = w.clone();
        req.extensions_mut().insert(slot.clone());
        async move { Ok::<_, Infallible>(route(&shared, &w, port, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30))
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::select! {
        () = cancel.cancelled() => {}
        _ = conn => {}
    }
}

/// Where `req`, on worker `w`'s door (`port`), goes.
async fn route(
    shared: &Arc<Shared>,
    w: &Arc<Worker>,
    port: u16,
    req: Request<Incoming>,
) -> Response<Body> {
    if req.method() == hyper::Method::CONNECT {
        return super::tunnel::connect(shared, w, req).await;
    }
    let uri = req.uri().clone();
    if uri.scheme().is_some() {
        let own = uri.port_u16() == Some(port) && uri.host().is_some_and(client::is_loopback_host);
        if !own {
            return super::tunnel::plain(shared, w, req).await;
        }
    }
    let path = uri.path();
    let (first, rest) = match path.strip_prefix('/').and_then(|p| p.split_once('/')) {
        Some((first, rest)) => (first, format!("/{rest}")),
        None => (path.trim_start_matches('/'), String::new()),
    };
    match shared.providers.iter().find(|p| p.name == first) {
        Some(upstream) => super::forward::model(shared, w, upstream, &rest, req).await,
        None => {
            w.deny(Denied::Endpoint, &format!("{} {path}", req.method()));
            text(
                StatusCode::NOT_FOUND,
                "fanout gateway: no provider at this path (model calls go to the base URLs fanout gave)",
            )
        }
    }
}
