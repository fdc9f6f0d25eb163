//! fanout's one HTTP client stack, shared by every part that speaks HTTP: hyper 1 over
//! rustls with ring (`hyper-rustls`), the stack octocrab already brings for the GitHub
//! API. The push transport (`publish::smart_http`) and the model gateway
//! (`gateway`) build their clients here.
//!
//! - **Certificates**: the system's, as `rustls-native-certs` finds them, or those
//!   `SSL_CERT_FILE` / `SSL_CERT_DIR` name ([`tls_config`]); read when a client that
//!   needs them is built, never at start.
//! - **Timeouts** ([`Timeouts`]): opening a connection (name lookup, TCP and the TLS
//!   handshake) and each read or write on it are bounded separately, so a dead server
//!   ends a request with an error instead of hanging.
//! - **What the clients never do**: follow a redirect, read `HTTP(S)_PROXY`, send a
//!   cookie, log what they send (see `log` in Cargo.toml).

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// The connector of [`client`]: plain TCP, TLS over it for `https`, the timeouts.
pub type Connector = TimeoutConnector<HttpsConnector<HttpConnector>>;

/// A pooled HTTP/1.1 client with body type `B`.
pub type HttpClient<B> = Client<Connector, B>;

/// How long a client waits.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Opening a connection: name lookup, TCP and the TLS handshake.
    pub connect: Duration,
    /// Each read on an open connection (a response's head, each part of its body).
    pub read: Option<Duration>,
    /// Each write on an open connection.
    pub write: Option<Duration>,
}

/// The TLS settings every https client of fanout uses: ring, rustls' safe protocol
/// versions, the CA certificates of [`ca_certificates`].
pub fn tls_config() -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(ca_certificates()?);
    if added == 0 {
        return Err(
            "none of the CA certificates found could be read; set SSL_CERT_FILE to a PEM file of them"
                .into(),
        );
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .map_err(|e| format!("TLS set-up: {e}"))
}

/// The CA certificates https servers are checked against: `SSL_CERT_FILE` /
/// `SSL_CERT_DIR` when set, else the system's.
fn ca_certificates() -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        let why = found
            .errors
            .first()
            .map_or("none found".to_owned(), |e| e.to_string());
        return Err(format!(
            "no CA certificates to check an https server with ({why}); set SSL_CERT_FILE to a PEM file of them"
        ));
    }
    for e in &found.errors {
        tracing::debug!("some CA certificates were not read: {e}");
    }
    Ok(found.certs)
}

/// A client for `http` URLs, and for `https` ones when `tls` is given (without it an
/// https URL is an error, no certificate being read).
pub fn client<B>(tls: Option<rustls::ClientConfig>, timeouts: Timeouts) -> HttpClient<B>
where
    B: hyper::body::Body + Send + 'static + Unpin,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(timeouts.connect));
    let https = match tls {
        Some(tls) => hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp),
        None => {
            // No certificate to trust: every TLS handshake fails, and https URLs are
            // refused before one is tried (`enforce_https` is the opposite switch).
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
            hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(config)
                .https_or_http()
                .enable_http1()
                .wrap_connector(tcp)
        }
    };
    let mut timed = TimeoutConnector::new(https);
    timed.set_connect_timeout(Some(timeouts.connect));
    timed.set_read_timeout(timeouts.read);
    timed.set_write_timeout(timeouts.write);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .build(timed)
}

/// Why rustls refused a server's certificate, when that is what `e` (or an error it
/// wraps) says.
pub fn untrusted_certificate<'e>(
    e: &'e (dyn StdError + 'static),
) -> Option<&'e rustls::CertificateError> {
    chain(e).find_map(|err| {
        let tls = err.downcast_ref::<rustls::Error>().or_else(|| {
            err.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        match tls {
            Some(rustls::Error::InvalidCertificate(why)) => Some(why),
            _ => None,
        }
    })
}

/// Whether `e` (or an error it wraps) is a timeout of [`Timeouts`].
pub fn is_timeout(e: &(dyn StdError + 'static)) -> bool {
    chain(e).any(|err| {
        err.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            || err.is::<tokio::time::error::Elapsed>()
    })
}

/// `e` and the errors it wraps: an I/O error's `source` skips the error it carries
/// (hyper-rustls wraps rustls' error in two of them), so that one is taken instead.
fn chain<'e>(
    e: &'e (dyn StdError + 'static),
) -> impl Iterator<Item = &'e (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |&err: &&'e (dyn StdError + 'static)| {
        match err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(carried) => Some(carried as &(dyn StdError + 'static)),
            None => err.source(),
        }
    })
}

/// What `e` and the errors it wraps say, each message once ("client error
/// (Connect): tcp connect error: Connection refused").
pub fn describe(e: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    for err in chain(e) {
        let text = err.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

/// Whether `host` (a URL's host) is this machine: `localhost`, or a loopback address.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "LOCALHOST",
            "127.0.0.1",
            "127.9.9.9",
            "[::1]",
            "::1",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["example.com", "10.0.0.1", "localhost.example", "[::2]", ""] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn a_chain_is_described_once_per_message() {
        let inner = std::io::Error::new(std::io::ErrorKind::TimedOut, "deadline");
        assert!(is_timeout(&inner));
        let other = std::io::Error::other("refused");
        assert!(!is_timeout(&other));
        assert_eq!(describe(&other), "refused");
        let wrapped = std::io::Error::other(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ));
        assert_eq!(
            untrusted_certificate(&wrapped),
            Some(&rustls::CertificateError::UnknownIssuer)
        );
        assert!(untrusted_certificate(&other).is_none());
    }
}
