//! Git's smart HTTP protocol (gitprotocol-http(5), stateless RPC) for libgit2's
//! `http://` and `https://` remotes, in fanout's own process, over rustls with ring:
//! libgit2 is built without its own https transport (and so without OpenSSL), and a
//! push over http(s) goes through this one, [`register`]ed once per process before the
//! first push.
//!
//! For each step of a push libgit2 asks for a stream; this module turns it into one
//! HTTP exchange ([`Endpoint`]):
//! - listing the remote's refs: `GET <url>/info/refs?service=git-receive-pack` (or
//!   `git-upload-pack`), the answer being `application/x-git-…-advertisement` (its
//!   `# service=` line is checked and dropped by libgit2's smart protocol layer);
//! - sending: `POST <url>/git-receive-pack` (or `git-upload-pack`), the body being all
//!   libgit2 wrote to the stream before it first reads the answer, sent with
//!   `Content-Type: application/x-git-…-request` and `Accept:
//!   application/x-git-…-result`; the answer must be of that type.
//!
//! An answer other than `200` with the expected content type ends the push with an
//! error naming the URL and the status ([`check`]): `401`/`403` with a token is "the
//! token was refused by the remote"; a redirect is never followed (the error names
//! where it pointed). No proxy is used (libgit2's default, which fanout kept: neither
//! `http.proxy` nor `HTTPS_PROXY` is read). A connection is given 30 s to open (name
//! lookup and TLS handshake included) and then 2 minutes for each read or write, so a
//! dead server ends the push with an error instead of hanging the run.
//!
//! **Certificates**: the system's, as `rustls-native-certs` finds them, or those
//! `SSL_CERT_FILE` / `SSL_CERT_DIR` name; read when the first https connection is
//! made, never at start.
//!
//! **Credentials**: [`with_token`] hands the token to this thread's transport for the
//! length of one push, bound to the exact URL pushed to: only requests to that URL's
//! endpoints carry it (`Authorization: Basic`, user `x-access-token`, as GitHub wants),
//! sent with the first request. libgit2 gives a custom transport no access to the
//! credential callback, so the token does not go through libgit2 at all. It is never
//! logged nor put in an error (ureq's trace-level dump of the bytes it sends is not
//! compiled in: see `log` in Cargo.toml).

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::sync::{Arc, Once, OnceLock};
use std::time::Duration;

use git2::transport::{Service, SmartSubtransport, SmartSubtransportStream, Transport};
use secrecy::{ExposeSecret, SecretString};

/// The user git servers see (GitHub answers smart HTTP to any, but logs it).
const USER_AGENT: &str = concat!("git/2.0 (fanout ", env!("CARGO_PKG_VERSION"), ")");

/// Most time to open a connection: name lookup, TCP and the TLS handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Most time one read or write on an open connection may wait.
const IO_TIMEOUT: Duration = Duration::from_secs(120);

/// Make libgit2 use this transport for `http://` and `https://` URLs; once per
/// process, before the first push (later calls do nothing).
pub fn register() -> Result<(), String> {
    static REGISTERED: Once = Once::new();
    static FAILED: OnceLock<String> = OnceLock::new();
    REGISTERED.call_once(|| {
        for scheme in ["http", "https"] {
            // SAFETY: libgit2's list of transports must not change while another
            // thread creates one. Every libgit2 connection fanout makes starts with a
            // push that calls this function first, and `call_once` makes any other
            // caller wait until both schemes are registered.
            let done = unsafe {
                git2::transport::register(scheme, |remote| {
                    Transport::smart(remote, true, SmartHttp)
                })
            };
            if let Err(e) = done {
                let _ = FAILED.set(format!(
                    "cannot set up fanout's {scheme} transport: {}",
                    e.message()
                ));
                return;
            }
        }
    });
    match FAILED.get() {
        Some(e) => Err(e.clone()),
        None => Ok(()),
    }
}

thread_local! {
    /// The push this thread is making over http(s): its URL and token.
    static PUSH_TOKEN: RefCell<Option<(String, SecretString)>> = const { RefCell::new(None) };
}

/// Run `push` (one libgit2 push on this thread) with `token` given to the transport for
/// requests to exactly `url`; requests to any other URL carry no credential.
pub fn with_token<T>(url: &str, token: Option<&str>, push: impl FnOnce() -> T) -> T {
    struct Restore(Option<(String, SecretString)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            PUSH_TOKEN.with(|t| *t.borrow_mut() = before);
        }
    }
    let scoped = token.map(|t| (url.to_owned(), SecretString::from(t)));
    let _restore = Restore(PUSH_TOKEN.with(|t| t.replace(scoped)));
    push()
}

/// The `Authorization` header for a request to the push URL `url`, when this thread
/// was given a token for exactly that URL.
fn authorization_for(url: &str) -> Option<SecretString> {
    use base64::Engine;
    PUSH_TOKEN.with(|t| {
        let t = t.borrow();
        let (_, token) = t.as_ref().filter(|(u, _)| u == url)?;
        let pair = format!("x-access-token:{}", token.expose_secret());
        let encoded = base64::engine::general_purpose::STANDARD.encode(pair.as_bytes());
        Some(SecretString::from(format!("Basic {encoded}")))
    })
}

/// The subtransport libgit2's smart protocol layer drives (stateless: one HTTP
/// exchange per stream).
struct SmartHttp;

impl SmartSubtransport for SmartHttp {
    fn action(
        &self,
        url: &str,
        action: Service,
    ) -> Result<Box<dyn SmartSubtransportStream>, git2::Error> {
        Ok(Box::new(Exchange {
            endpoint: Endpoint::of(url, action),
            authorization: authorization_for(url),
            body: Vec::new(),
            answer: None,
        }))
    }

    fn close(&self) -> Result<(), git2::Error> {
        Ok(())
    }
}

/// Where and how one step of the protocol is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    /// `GET` (a ref listing) or `POST` (a request).
    post: bool,
    /// The request's URL.
    url: String,
    /// `git-receive-pack` or `git-upload-pack`.
    service: &'static str,
}

impl Endpoint {
    /// The endpoint of `service` for the repository at `base` (the remote's URL).
    fn of(base: &str, service: Service) -> Endpoint {
        let base = base.trim_end_matches('/');
        let (post, name) = match service {
            Service::UploadPackLs => (false, "git-upload-pack"),
            Service::UploadPack => (true, "git-upload-pack"),
            Service::ReceivePackLs => (false, "git-receive-pack"),
            Service::ReceivePack => (true, "git-receive-pack"),
        };
        let url = if post {
            format!("{base}/{name}")
        } else {
            format!("{base}/info/refs?service={name}")
        };
        Endpoint {
            post,
            url,
            service: name,
        }
    }

    /// The content type of the request body (`POST` only).
    fn request_type(&self) -> String {
        format!("application/x-{}-request", self.service)
    }

    /// The content type a smart server answers with.
    fn answer_type(&self) -> String {
        let kind = if self.post { "result" } else { "advertisement" };
        format!("application/x-{}-{kind}", self.service)
    }
}

/// What a response said, as far as [`check`] looks at it.
#[derive(Debug)]
struct Answer<'a> {
    status: u16,
    content_type: Option<&'a str>,
    location: Option<&'a str>,
}

/// Whether `answer` to a request at `endpoint` is one to hand libgit2; `authorized`:
/// the request carried the token. The error names the URL and what was wrong.
fn check(endpoint: &Endpoint, answer: &Answer<'_>, authorized: bool) -> Result<(), String> {
    let url = &endpoint.url;
    let status = answer.status;
    match status {
        200 => {}
        300..=399 => {
            let to = answer.location.map_or("nowhere".into(), printable);
            return Err(format!(
                "{url} redirected (HTTP {status}) to {to}; fanout does not follow redirects: push to that URL if it is the repository's"
            ));
        }
        401 | 403 if authorized => {
            return Err(format!(
                "the token was refused by the remote (HTTP {status} from {url})"
            ));
        }
        401 | 403 => {
            return Err(format!(
                "{url} asks for credentials (HTTP {status}) and fanout has none for it"
            ));
        }
        _ => return Err(format!("{url} answered HTTP {status}")),
    }
    let expected = endpoint.answer_type();
    let media = answer
        .content_type
        .map(|c| c.split(';').next().unwrap_or("").trim());
    match media {
        Some(m) if m.eq_ignore_ascii_case(&expected) => Ok(()),
        Some(m) => Err(format!(
            "{url} answered with content type {}, not {expected}: not a git smart-HTTP server",
            printable(m)
        )),
        None => Err(format!(
            "{url} answered without a content type, not {expected}: not a git smart-HTTP server"
        )),
    }
}

/// `s`, at most 200 characters and no control characters, for an error message
/// (a header value is the server's to choose).
fn printable(s: &str) -> String {
    let mut out: String = s.chars().filter(|c| !c.is_control()).take(200).collect();
    if s.chars().count() > 200 {
        out.push('…');
    }
    format!("{out:?}")
}

/// One stream libgit2 reads and writes: what it writes is kept, and sent as the
/// request when it first reads; what it reads is the answer's body.
struct Exchange {
    endpoint: Endpoint,
    authorization: Option<SecretString>,
    body: Vec<u8>,
    answer: Option<Box<dyn Read + Send>>,
}

impl Read for Exchange {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.answer.is_none() {
            self.answer = Some(self.send().map_err(io::Error::other)?);
        }
        match &mut self.answer {
            Some(answer) => answer.read(buf),
            None => Ok(0),
        }
    }
}

impl Write for Exchange {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.answer.is_some() {
            return Err(io::Error::other(format!(
                "{}: libgit2 wrote after reading the answer",
                self.endpoint.url
            )));
        }
        self.body.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Exchange {
    /// Send the request; the answer's body when [`check`] accepts it.
    fn send(&mut self) -> Result<Box<dyn Read + Send>, String> {
        let url = &self.endpoint.url;
        let agent = agent_for(url)?;
        let request = self.request()?;
        let response = if self.endpoint.post {
            let body = std::mem::take(&mut self.body);
            request.body(body).map(|r| agent.run(r))
        } else {
            request.body(()).map(|r| agent.run(r))
        }
        .map_err(|e| format!("{url}: {e}"))?
        .map_err(|e| failed(url, &e))?;
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok());
        let answer = Answer {
            status: response.status().as_u16(),
            content_type: header("content-type"),
            location: header("location"),
        };
        check(&self.endpoint, &answer, self.authorization.is_some())?;
        Ok(Box::new(Body {
            url: url.clone(),
            reader: response.into_body().into_reader(),
        }))
    }

    /// The request's method, URL and headers ([`Endpoint`]), with the token when
    /// this thread was given one for this URL.
    fn request(&self) -> Result<ureq::http::request::Builder, String> {
        let e = &self.endpoint;
        let mut request = ureq::http::Request::builder().uri(&e.url);
        request = if e.post {
            request
                .method("POST")
                .header("Content-Type", e.request_type())
                .header("Accept", e.answer_type())
        } else {
            request
                .method("GET")
                .header("Accept", "*/*")
                .header("Pragma", "no-cache")
        };
        if let Some(auth) = &self.authorization {
            let mut value = ureq::http::HeaderValue::from_str(auth.expose_secret())
                .map_err(|_| format!("{}: the token is not a valid header value", e.url))?;
            value.set_sensitive(true);
            request = request.header("Authorization", value);
        }
        Ok(request)
    }
}

/// An answer's body, whose read errors name the URL.
struct Body<R> {
    url: String,
    reader: R,
}

impl<R: Read> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader
            .read(buf)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.url)))
    }
}

/// What went wrong sending a request to `url` or reading its answer's head.
fn failed(url: &str, e: &ureq::Error) -> String {
    if let Some(why) = untrusted(e) {
        return format!(
            "{url}: the server's certificate is not trusted ({why}); fanout checks it against the system's CA certificates, or those SSL_CERT_FILE / SSL_CERT_DIR name"
        );
    }
    match e {
        ureq::Error::Io(io) => format!("{url}: {io}"),
        ureq::Error::Timeout(t) => format!("{url}: no answer in time ({t})"),
        other => format!("{url}: {other}"),
    }
}

/// Why rustls refused the server's certificate, when it did (as an error of its own,
/// or inside the I/O error of the TLS stream).
fn untrusted(e: &ureq::Error) -> Option<&rustls::CertificateError> {
    let tls = match e {
        ureq::Error::Rustls(tls) => tls,
        ureq::Error::Io(io) => io.get_ref()?.downcast_ref::<rustls::Error>()?,
        _ => return None,
    };
    match tls {
        rustls::Error::InvalidCertificate(why) => Some(why),
        _ => None,
    }
}

/// The HTTP client for `url`: one for plain http, one with TLS (built, and the CA
/// certificates read, at the first https request), kept for the process. No token
/// goes with its requests but through [`with_token`] (also used, without one, to read
/// a job's log where GitHub redirects to: [`super::github`]).
pub(crate) fn agent_for(url: &str) -> Result<&'static ureq::Agent, String> {
    static PLAIN: OnceLock<ureq::Agent> = OnceLock::new();
    static TLS: OnceLock<Result<ureq::Agent, String>> = OnceLock::new();
    let https = url::Url::parse(url)
        .map_err(|e| format!("{url}: not a URL ({e})"))?
        .scheme()
        == "https";
    if !https {
        return Ok(PLAIN.get_or_init(|| agent(Vec::new())));
    }
    TLS.get_or_init(|| ca_certificates().map(agent))
        .as_ref()
        .map_err(Clone::clone)
}

/// A client with `roots` as the CA certificates it trusts: no proxy, no redirect
/// followed, every status returned as an answer (see [`check`]), the timeouts of the
/// module docs.
fn agent(roots: Vec<ureq::tls::Certificate<'static>>) -> ureq::Agent {
    use ureq::tls::{RootCerts, TlsConfig, TlsProvider};
    let tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .root_certs(RootCerts::Specific(Arc::new(roots)))
        .build();
    ureq::Agent::config_builder()
        .tls_config(tls)
        .proxy(None)
        .max_redirects(0)
        .http_status_as_error(false)
        .user_agent(USER_AGENT)
        .timeout_resolve(Some(CONNECT_TIMEOUT))
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_per_read(Some(IO_TIMEOUT))
        .timeout_per_write(Some(IO_TIMEOUT))
        .build()
        .new_agent()
}

/// The CA certificates https servers are checked against: `SSL_CERT_FILE` /
/// `SSL_CERT_DIR` when set, else the system's.
fn ca_certificates() -> Result<Vec<ureq::tls::Certificate<'static>>, String> {
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
    Ok(found
        .certs
        .iter()
        .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_those_of_the_smart_protocol() {
        let ls = Endpoint::of("https://h.example/o/r.git/", Service::ReceivePackLs);
        assert_eq!(
            ls.url,
            "https://h.example/o/r.git/info/refs?service=git-receive-pack"
        );
        assert!(!ls.post);
        assert_eq!(
            ls.answer_type(),
            "application/x-git-receive-pack-advertisement"
        );
        let push = Endpoint::of("https://h.example/o/r.git", Service::ReceivePack);
        assert_eq!(push.url, "https://h.example/o/r.git/git-receive-pack");
        assert!(push.post);
        assert_eq!(
            push.request_type(),
            "application/x-git-receive-pack-request"
        );
        assert_eq!(push.answer_type(), "application/x-git-receive-pack-result");
        let fetch = Endpoint::of("http://127.0.0.1:9/r", Service::UploadPack);
        assert_eq!(fetch.url, "http://127.0.0.1:9/r/git-upload-pack");
        assert_eq!(fetch.answer_type(), "application/x-git-upload-pack-result");
        let ls = Endpoint::of("http://127.0.0.1:9/r", Service::UploadPackLs);
        assert_eq!(
            ls.url,
            "http://127.0.0.1:9/r/info/refs?service=git-upload-pack"
        );
    }

    fn answer(status: u16, content_type: Option<&'static str>) -> Answer<'static> {
        Answer {
            status,
            content_type,
            location: None,
        }
    }

    #[test]
    fn only_a_200_of_the_expected_type_is_accepted() {
        let e = Endpoint::of("https://h.example/r.git", Service::ReceivePackLs);
        let adv = Some("application/x-git-receive-pack-advertisement");
        assert_eq!(check(&e, &answer(200, adv), true), Ok(()));
        let with_params = Some("Application/X-Git-Receive-Pack-Advertisement; charset=x");
        assert_eq!(check(&e, &answer(200, with_params), false), Ok(()));
        let dumb = check(&e, &answer(200, Some("text/plain")), true).unwrap_err();
        assert_eq!(
            dumb,
            "https://h.example/r.git/info/refs?service=git-receive-pack answered with content type \"text/plain\", not application/x-git-receive-pack-advertisement: not a git smart-HTTP server"
        );
        let none = check(&e, &answer(200, None), true).unwrap_err();
        assert!(none.contains("without a content type"), "{none}");
        let result = Endpoint::of("https://h.example/r.git", Service::ReceivePack);
        assert!(check(&result, &answer(200, adv), true).is_err());
        let e500 = check(&e, &answer(500, adv), true).unwrap_err();
        assert_eq!(
            e500,
            "https://h.example/r.git/info/refs?service=git-receive-pack answered HTTP 500"
        );
    }

    #[test]
    fn a_refused_token_and_a_missing_one_say_so() {
        let e = Endpoint::of("https://h.example/r.git", Service::ReceivePack);
        for status in [401, 403] {
            assert_eq!(
                check(&e, &answer(status, None), true).unwrap_err(),
                format!(
                    "the token was refused by the remote (HTTP {status} from https://h.example/r.git/git-receive-pack)"
                )
            );
            let none = check(&e, &answer(status, None), false).unwrap_err();
            assert!(
                none.ends_with(&format!(
                    "asks for credentials (HTTP {status}) and fanout has none for it"
                )),
                "{none}"
            );
        }
    }

    #[test]
    fn a_redirect_is_refused_naming_where_it_pointed() {
        let e = Endpoint::of("https://h.example/r.git", Service::ReceivePackLs);
        let to = Answer {
            status: 301,
            content_type: None,
            location: Some("https://evil.example/r.git/info/refs\u{1b}[2J"),
        };
        let err = check(&e, &to, true).unwrap_err();
        assert_eq!(
            err,
            "https://h.example/r.git/info/refs?service=git-receive-pack redirected (HTTP 301) to \"https://evil.example/r.git/info/refs[2J\"; fanout does not follow redirects: push to that URL if it is the repository's"
        );
        let nowhere = check(&e, &answer(307, None), true).unwrap_err();
        assert!(nowhere.contains("(HTTP 307) to nowhere"), "{nowhere}");
    }

    #[test]
    fn the_token_is_given_for_exactly_the_push_url_and_one_push() {
        let url = "https://h.example/o/r.git";
        assert!(authorization_for(url).is_none());
        with_token(url, Some("t0k"), || {
            // base64("x-access-token:t0k")
            let auth = authorization_for(url).unwrap();
            assert_eq!(auth.expose_secret(), "Basic eC1hY2Nlc3MtdG9rZW46dDBr");
            for other in [
                "https://h.example/o/r.git/",
                "https://h.example/o/r",
                "http://h.example/o/r.git",
                "https://evil.example/o/r.git",
            ] {
                assert!(authorization_for(other).is_none(), "{other}");
            }
            std::thread::scope(|s| {
                s.spawn(|| assert!(authorization_for(url).is_none()));
            });
            with_token("https://other.example/r.git", None, || {
                assert!(authorization_for(url).is_none());
            });
            assert!(authorization_for(url).is_some());
        });
        assert!(authorization_for(url).is_none());
    }

    /// A server on 127.0.0.1 that answers each connection, in turn, with one of
    /// `answers` (raw HTTP), and returns the requests it got (head and body).
    fn serve(answers: Vec<String>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        use std::io::BufRead;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let mut requests = Vec::new();
            for answer in answers {
                let (conn, _) = listener.accept().unwrap();
                conn.set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                let mut reader = io::BufReader::new(conn.try_clone().unwrap());
                let mut request = String::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    let lower = line.to_ascii_lowercase();
                    if let Some(n) = lower.strip_prefix("content-length:") {
                        length = n.trim().parse().unwrap();
                    }
                    request.push_str(&line);
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                request.push_str(&String::from_utf8_lossy(&body));
                (&conn).write_all(answer.as_bytes()).unwrap();
                requests.push(request);
            }
            requests
        });
        (base, server)
    }

    /// The value of the header `name` in `request` (its head, as sent).
    fn header<'r>(request: &'r str, name: &str) -> Option<&'r str> {
        let head = request.split("\r\n\r\n").next()?;
        head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn reply(head: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    #[test]
    fn a_request_carries_what_libgit2_wrote_and_the_token_only_to_the_push_url() {
        let (base, server) = serve(vec![
            reply(
                "200 OK\r\nContent-Type: application/x-git-receive-pack-result",
                "0000",
            ),
            reply(
                "200 OK\r\nContent-Type: application/x-git-receive-pack-advertisement",
                "",
            ),
        ]);
        let push_url = format!("{base}/o/r.git");
        let read = with_token(&push_url, Some("t0k"), || {
            let mut push = SmartHttp.action(&push_url, Service::ReceivePack).unwrap();
            push.write_all(b"00a0 commands").unwrap();
            push.write_all(b"PACK...").unwrap();
            let mut read = String::new();
            push.read_to_string(&mut read).unwrap();
            // Another URL on the same server: no credential.
            let other = format!("{base}/other.git");
            let mut ls = SmartHttp.action(&other, Service::ReceivePackLs).unwrap();
            ls.read_to_string(&mut String::new()).unwrap();
            read
        });
        assert_eq!(read, "0000");
        let requests = server.join().unwrap();
        let post = &requests[0];
        assert!(
            post.starts_with("POST /o/r.git/git-receive-pack HTTP/1.1\r\n"),
            "{post}"
        );
        assert_eq!(
            header(post, "content-type"),
            Some("application/x-git-receive-pack-request")
        );
        assert_eq!(
            header(post, "accept"),
            Some("application/x-git-receive-pack-result")
        );
        assert_eq!(
            header(post, "authorization"),
            Some("Basic eC1hY2Nlc3MtdG9rZW46dDBr")
        );
        assert_eq!(header(post, "content-length"), Some("20"));
        assert!(post.ends_with("\r\n\r\n00a0 commandsPACK..."), "{post}");
        let get = &requests[1];
        assert!(
            get.starts_with("GET /other.git/info/refs?service=git-receive-pack HTTP/1.1\r\n"),
            "{get}"
        );
        assert_eq!(header(get, "authorization"), None, "{get}");
        assert_eq!(header(get, "pragma"), Some("no-cache"));
    }

    #[test]
    fn a_redirect_is_not_followed() {
        let trap = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        trap.set_nonblocking(true).unwrap();
        let to = format!(
            "http://{}/r.git/info/refs?service=git-receive-pack",
            trap.local_addr().unwrap()
        );
        let (base, server) = serve(vec![reply(&format!("302 Found\r\nLocation: {to}"), "")]);
        let url = format!("{base}/r.git");
        let err = with_token(&url, Some("t0k"), || {
            let mut ls = SmartHttp.action(&url, Service::ReceivePackLs).unwrap();
            ls.read(&mut [0; 64]).unwrap_err()
        });
        assert_eq!(
            err.to_string(),
            format!(
                "{url}/info/refs?service=git-receive-pack redirected (HTTP 302) to {to:?}; fanout does not follow redirects: push to that URL if it is the repository's"
            )
        );
        assert_eq!(server.join().unwrap().len(), 1);
        assert_eq!(
            trap.accept().unwrap_err().kind(),
            io::ErrorKind::WouldBlock,
            "the redirect was followed"
        );
    }

    #[test]
    fn a_closed_port_is_an_error_naming_the_url() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let url = format!("http://{closed}/r.git");
        let mut ls = SmartHttp.action(&url, Service::ReceivePackLs).unwrap();
        let err = ls.read(&mut [0; 64]).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{url}/info/refs?service=git-receive-pack: ")),
            "{err}"
        );
    }
}
