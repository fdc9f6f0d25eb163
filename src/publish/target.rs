//! Where publishing goes, decided and checked before anything runs or is pushed: the
//! API, the web server, the repository, and the URL branches are pushed to.
//!
//! A token goes only over https, or plain http to a loopback address
//! ([`check_token_url`]); a URL without a scheme is refused (exit 2, naming the flag or
//! variable) — `fanout run --publish` checks before the first worker starts.
//!
//! The push URL is never read from the repository's configuration at publish time (an
//! agent may have rewritten `remote.origin.url`, a `pushurl` or an `insteadOf`):
//! - `--remote URL` on the publishing command line: that URL, as given;
//! - `publish.remote` spelling a URL (recorded when the run started): that URL, only on
//!   the GitHub server's host (`$GITHUB_SERVER_URL`, else the API's web host) for an
//!   https one: neither a config file nor a run's record (which an unsandboxed agent
//!   that read the record key can forge) ever sends the token elsewhere; an ssh or
//!   local one carries no token;
//! - otherwise the remote named by `--remote NAME`, `publish.remote` or `origin`, as
//!   recorded when the run started ([`PushRecord`], in the run's journal):
//!   - an https (or http) remote → `https://<server>/<owner>/<repo>.git`, the server
//!     being `$GITHUB_SERVER_URL`, else the API's web host — the token goes to GitHub
//!     and nowhere else;
//!   - an ssh remote → pushed with the hardened git CLI and your ssh setup, no token
//!     (in GitHub Actions: over https with the token, as above);
//!   - a local repository (a path, `file://`) → pushed there; no credential is used;
//! - with no record (a `results.json` from elsewhere, a run older than the record):
//!   `https://<server>/<owner>/<repo>.git`.

use std::path::PathBuf;

use super::github::RepoSlug;
pub use crate::repo::PushRecord;

/// Where branches are pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushTo {
    /// https, or http to loopback: libgit2 over fanout's own transport
    /// ([`super::smart_http`]), with the token.
    Https(String),
    /// ssh: the hardened git CLI with the user's ssh setup; no token.
    Ssh(String),
    /// A repository on this machine: libgit2; no credential.
    Local(PathBuf),
}

impl std::fmt::Display for PushTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PushTo::Https(u) | PushTo::Ssh(u) => f.write_str(u),
            PushTo::Local(p) => write!(f, "{}", p.display()),
        }
    }
}

/// `raw` (from `origin`, a flag or variable named in errors) as a URL a token may be
/// sent to: https, or http to a loopback host; no user name or password in it.
pub fn check_token_url(raw: &str, origin: &str) -> Result<url::Url, String> {
    let raw = raw.trim();
    let bad = |why: &str| Err(format!("{origin} {raw:?}: {why}"));
    let u = match url::Url::parse(raw) {
        Ok(u) if u.scheme() == "http" || u.scheme() == "https" => u,
        Ok(u) if raw.contains("://") => {
            return bad(&format!(
                "fanout sends the token only over https (or http to this machine), not {}",
                u.scheme()
            ));
        }
        _ => return bad("not a URL: write it with its scheme, e.g. https://api.github.com"),
    };
    let Some(host) = u.host() else {
        return bad("no host");
    };
    if !u.username().is_empty() || u.password().is_some() {
        return bad("a user name or password does not belong in the URL");
    }
    if u.scheme() == "http" && !is_loopback(&host) {
        return bad(
            "plain http would send the token in clear text; use https (http is accepted only to this machine: localhost, 127.0.0.1, ::1)",
        );
    }
    Ok(u)
}

fn is_loopback(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(a) => a.is_loopback(),
        url::Host::Ipv6(a) => a.is_loopback(),
    }
}

/// The API's base URL: `--api-url`, else `$GITHUB_API_URL`, else GitHub's, checked.
pub fn api_url(flag: Option<&str>, env: Option<&str>) -> Result<String, String> {
    let (raw, origin) = match (flag, env) {
        (Some(f), _) => (f, "--api-url"),
        (None, Some(e)) => (e, "GITHUB_API_URL"),
        (None, None) => return Ok("https://api.github.com".into()),
    };
    check_token_url(raw, origin).map(|u| u.as_str().trim_end_matches('/').to_owned())
}

/// The web server (for compare links, Actions run links and pushes over https):
/// `$GITHUB_SERVER_URL`, checked; else GitHub Enterprise's host when the API is its
/// `…/api/v3`; else `https://github.com`.
pub fn server_url(env: Option<&str>, api: &str) -> Result<String, String> {
    if let Some(raw) = env {
        return check_token_url(raw, "GITHUB_SERVER_URL")
            .map(|u| u.as_str().trim_end_matches('/').to_owned());
    }
    let u = url::Url::parse(api).map_err(|e| format!("API URL {api:?}: {e}"))?;
    if u.path().trim_end_matches('/').ends_with("/api/v3") {
        return Ok(u.origin().ascii_serialization());
    }
    Ok("https://github.com".into())
}

/// A remote URL, as git spells them: scp-like `user@host:path` and `ssh://` are ssh;
/// `http(s)://`; `file://` and paths are local; anything else (`git://`, `ext::`) is
/// refused.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RemoteKind {
    Http,
    Ssh,
    Local(PathBuf),
}

fn remote_kind(url: &str) -> Result<RemoteKind, String> {
    let url = url.trim();
    if let Some((scheme, rest)) = url.split_once("://") {
        return match scheme.to_ascii_lowercase().as_str() {
            "http" | "https" => Ok(RemoteKind::Http),
            "ssh" | "git+ssh" | "ssh+git" => Ok(RemoteKind::Ssh),
            "file" => Ok(RemoteKind::Local(PathBuf::from(rest))),
            other => Err(format!("{url:?}: fanout does not push over {other}://")),
        };
    }
    if url.contains("::") {
        return Err(format!(
            "{url:?}: fanout does not push through a remote helper"
        ));
    }
    match url.split_once(':') {
        // `host:path` (scp-like), unless the part before ':' holds a '/' (a path)
        Some((host, _)) if !host.contains('/') && !host.is_empty() => Ok(RemoteKind::Ssh),
        _ if url.is_empty() => Err("an empty remote URL".into()),
        _ => Ok(RemoteKind::Local(PathBuf::from(url))),
    }
}

/// Whether `s` names a remote (a plain name) rather than spelling a URL or a path.
fn is_remote_name(s: &str) -> bool {
    !s.is_empty()
        && !s.contains(['/', ':', '\\'])
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// What decides the push URL.
#[derive(Debug, Clone, Copy)]
pub struct PushInputs<'a> {
    /// `--remote` of this publishing command (trusted: the user typed it).
    pub flag: Option<&'a str>,
    /// What the run recorded when it started.
    pub record: Option<&'a PushRecord>,
    /// The repository.
    pub slug: &'a RepoSlug,
    /// The web server, checked ([`server_url`]).
    pub server_url: &'a str,
    /// Running in GitHub Actions (an ssh remote is pushed over https with the token).
    pub in_actions: bool,
}

/// Where to push (see the module docs); errors name the flag or the remote.
pub fn push_to(i: PushInputs<'_>) -> Result<PushTo, String> {
    let github = || PushTo::Https(format!("{}/{}.git", i.server_url, i.slug));
    let recorded = |name: &str| i.record.and_then(|r| r.remotes.get(name));
    if let Some(flag) = i.flag {
        if is_remote_name(flag) {
            return match recorded(flag) {
                Some(url) => from_recorded(url, &i, github),
                None if i.record.is_some() => Err(format!(
                    "--remote {flag}: no such remote when the run started; pass its URL"
                )),
                None => Ok(github()),
            };
        }
        return as_given(flag, "--remote");
    }
    let Some(record) = i.record else {
        return Ok(github());
    };
    let name = record.publish_remote.as_deref().unwrap_or("origin");
    if !is_remote_name(name) {
        let to = as_given(name, "publish.remote")?;
        return match &to {
            PushTo::Https(url) if !same_origin(url, i.server_url) => Err(format!(
                "publish.remote {name:?}: fanout sends the token only to the GitHub server ({}), never to a host a config file or a run's record names; to push elsewhere, pass --remote URL on the command line",
                i.server_url
            )),
            _ => Ok(to),
        };
    }
    match recorded(name) {
        Some(url) => from_recorded(url, &i, github),
        None => Ok(github()),
    }
}

/// A URL the user gave for this push: used as given (a token only over https or
/// loopback http).
fn as_given(url: &str, origin: &str) -> Result<PushTo, String> {
    match remote_kind(url).map_err(|e| format!("{origin} {e}"))? {
        RemoteKind::Http => Ok(PushTo::Https(
            check_token_url(url, origin)?.as_str().to_owned(),
        )),
        RemoteKind::Ssh => Ok(PushTo::Ssh(url.trim().to_owned())),
        RemoteKind::Local(p) => Ok(PushTo::Local(p)),
    }
}

/// Whether `url` is on the server `server` (same scheme, host and port).
fn same_origin(url: &str, server: &str) -> bool {
    match (url::Url::parse(url), url::Url::parse(server)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

/// A remote's URL as recorded at the run's start.
fn from_recorded(
    url: &str,
    i: &PushInputs<'_>,
    github: impl Fn() -> PushTo,
) -> Result<PushTo, String> {
    match remote_kind(url)? {
        RemoteKind::Http => Ok(github()),
        RemoteKind::Ssh if i.in_actions => Ok(github()),
        RemoteKind::Ssh => Ok(PushTo::Ssh(url.trim().to_owned())),
        RemoteKind::Local(p) => Ok(PushTo::Local(p)),
    }
}

/// The repository: `--repo`, else `$GITHUB_REPOSITORY`, else the recorded remote's URL.
pub fn slug(
    flag: Option<&str>,
    env: Option<&str>,
    record: Option<&PushRecord>,
    remote_flag: Option<&str>,
) -> Result<RepoSlug, String> {
    if let Some(s) = flag.or(env) {
        let origin = if flag.is_some() {
            "--repo"
        } else {
            "GITHUB_REPOSITORY"
        };
        return RepoSlug::parse(s).ok_or_else(|| format!("{origin} {s:?}: expected OWNER/NAME"));
    }
    let name = remote_flag
        .or(record.and_then(|r| r.publish_remote.as_deref()))
        .unwrap_or("origin");
    let recorded = record.and_then(|r| r.remotes.get(name));
    let url = recorded.map(String::as_str).unwrap_or(name);
    RepoSlug::from_remote_url(url).ok_or_else(|| match record {
        // Added (or renamed) since: the run's record is what counts, not the config now.
        Some(r) if recorded.is_none() && remote_flag.is_none() => format!(
            "cannot tell the GitHub repository: remote {name:?} was not there when the run started ({}), and fanout publishes to the remotes recorded then, never to ones added since; pass --repo OWNER/NAME to publish anyway",
            match r.remotes.keys().map(String::as_str).collect::<Vec<_>>().join(", ") {
                none if none.is_empty() => "it had no remotes".to_owned(),
                names => format!("it had: {names}"),
            }
        ),
        _ => format!(
            "cannot tell the GitHub repository from remote {name:?}: pass --repo OWNER/NAME"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_urls_need_https_or_loopback_http() {
        let ok = [
            "https://api.github.com",
            "https://ghe.example.com/api/v3/",
            "http://127.0.0.1:8080",
            "http://localhost:3000/api",
            "http://[::1]:9/",
            "http://127.1.2.3",
        ];
        for u in ok {
            assert!(check_token_url(u, "--api-url").is_ok(), "{u}");
        }
        let bad = [
            ("127.0.0.1:8080", "not a URL"),
            ("api.github.com", "not a URL"),
            ("localhost:8080", "not a URL"),
            ("http://192.0.2.1:9", "plain http"),
            ("http://example.com", "plain http"),
            ("http://localhost.example.com", "plain http"),
            ("ftp://example.com", "not ftp"),
            ("https://user:pw@example.com", "user name or password"),
            ("", "not a URL"),
        ];
        for (u, why) in bad {
            let e = check_token_url(u, "--api-url").unwrap_err();
            assert!(e.starts_with(&format!("--api-url {u:?}: ")), "{e}");
            assert!(e.contains(why), "{u}: {e}");
        }
    }

    #[test]
    fn api_and_server_urls() {
        assert_eq!(api_url(None, None).unwrap(), "https://api.github.com");
        let e = api_url(None, Some("127.0.0.1:1")).unwrap_err();
        assert!(e.starts_with("GITHUB_API_URL "), "{e}");
        assert!(
            api_url(Some("127.0.0.1:1"), Some("https://x"))
                .unwrap_err()
                .starts_with("--api-url ")
        );
        assert_eq!(
            server_url(None, "https://api.github.com").unwrap(),
            "https://github.com"
        );
        assert_eq!(
            server_url(None, "https://ghe.example.com/api/v3").unwrap(),
            "https://ghe.example.com"
        );
        assert_eq!(
            server_url(None, "http://127.0.0.1:9/x").unwrap(),
            "https://github.com"
        );
        assert!(
            server_url(Some("http://evil.example"), "https://api.github.com")
                .unwrap_err()
                .starts_with("GITHUB_SERVER_URL ")
        );
    }

    /// Where `octo/demo` on github.com is pushed, given `flag`, `rec` and `in_actions`.
    fn at(
        flag: Option<&str>,
        rec: Option<&PushRecord>,
        in_actions: bool,
    ) -> Result<PushTo, String> {
        push_to(PushInputs {
            flag,
            record: rec,
            slug: &RepoSlug::parse("octo/demo").unwrap(),
            server_url: "https://github.com",
            in_actions,
        })
    }

    fn record(remotes: &[(&str, &str)], publish_remote: Option<&str>) -> PushRecord {
        PushRecord {
            remotes: remotes
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            publish_remote: publish_remote.map(str::to_owned),
        }
    }

    #[test]
    fn the_push_url_never_comes_from_config_read_after_the_start() {
        let gh = PushTo::Https("https://github.com/octo/demo.git".into());
        let https = record(&[("origin", "https://github.com/octo/demo")], None);
        assert_eq!(at(None, Some(&https), false).unwrap(), gh);
        let ssh = record(&[("origin", "git@github.com:octo/demo.git")], None);
        assert_eq!(
            at(None, Some(&ssh), false).unwrap(),
            PushTo::Ssh("git@github.com:octo/demo.git".into())
        );
        assert_eq!(at(None, Some(&ssh), true).unwrap(), gh);
        let local = record(
            &[
                ("origin", "/srv/git/demo.git"),
                ("up", "file:///srv/up.git"),
            ],
            None,
        );
        assert_eq!(
            at(None, Some(&local), false).unwrap(),
            PushTo::Local("/srv/git/demo.git".into())
        );
        assert_eq!(
            at(Some("up"), Some(&local), false).unwrap(),
            PushTo::Local("/srv/up.git".into())
        );
        let e = at(Some("nope"), Some(&local), false).unwrap_err();
        assert!(e.starts_with("--remote nope: no such remote"), "{e}");
        assert_eq!(at(None, None, false).unwrap(), gh);
        // a URL given on the command line is used as given, checked
        assert_eq!(
            at(Some("http://127.0.0.1:5/r.git"), Some(&https), false).unwrap(),
            PushTo::Https("http://127.0.0.1:5/r.git".into())
        );
        let e = at(Some("http://evil.example/r.git"), None, false).unwrap_err();
        assert!(
            e.starts_with("--remote \"http://evil.example/r.git\": plain http"),
            "{e}"
        );
        let e = at(Some("ext::sh -c evil"), None, false).unwrap_err();
        assert!(e.contains("remote helper"), "{e}");
        // publish.remote as the config said when the run started
        let named = record(&[("origin", "/a.git"), ("fork", "/b.git")], Some("fork"));
        assert_eq!(
            at(None, Some(&named), false).unwrap(),
            PushTo::Local("/b.git".into())
        );
        let url = record(&[], Some("https://github.com/octo/demo.git"));
        assert!(matches!(
            at(None, Some(&url), false).unwrap(),
            PushTo::Https(_)
        ));
    }

    #[test]
    fn a_config_or_record_names_no_other_host_for_the_token() {
        let url = record(&[], Some("https://github.com/octo/demo.git"));
        // A config (recorded at the run's start) names no other host for the token, in
        // Actions or not; a flag may.
        assert!(matches!(
            at(None, Some(&url), true).unwrap(),
            PushTo::Https(_)
        ));
        let elsewhere = record(&[], Some("https://attacker.example/x.git"));
        for in_actions in [false, true] {
            let e = at(None, Some(&elsewhere), in_actions).unwrap_err();
            assert!(
                e.starts_with("publish.remote \"https://attacker.example/x.git\": fanout sends the token only to the GitHub server"),
                "{e}"
            );
            assert!(e.contains("--remote URL"), "{e}");
        }
        let port = record(&[], Some("https://github.com:8443/octo/demo.git"));
        assert!(at(None, Some(&port), true).is_err());
        assert_eq!(
            at(
                Some("https://attacker.example/x.git"),
                Some(&elsewhere),
                true
            )
            .unwrap(),
            PushTo::Https("https://attacker.example/x.git".into())
        );
        let path = record(&[], Some("/srv/git/mirror.git"));
        assert_eq!(
            at(None, Some(&path), true).unwrap(),
            PushTo::Local("/srv/git/mirror.git".into())
        );
    }

    #[test]
    fn the_repository_comes_from_flags_environment_or_the_record() {
        let rec = record(&[("origin", "git@github.com:o/r.git")], None);
        assert_eq!(
            slug(None, None, Some(&rec), None).unwrap().to_string(),
            "o/r"
        );
        assert_eq!(
            slug(None, Some("e/v"), Some(&rec), None)
                .unwrap()
                .to_string(),
            "e/v"
        );
        assert_eq!(
            slug(Some("f/l"), Some("e/v"), None, None)
                .unwrap()
                .to_string(),
            "f/l"
        );
        let e = slug(None, None, None, None).unwrap_err();
        assert!(e.contains("pass --repo OWNER/NAME"), "{e}");
        // An origin added after the run started (issue #29 item 5).
        assert_eq!(
            slug(None, None, Some(&record(&[], None)), None).unwrap_err(),
            "cannot tell the GitHub repository: remote \"origin\" was not there when the run started (it had no remotes), and fanout publishes to the remotes recorded then, never to ones added since; pass --repo OWNER/NAME to publish anyway"
        );
        assert!(
            slug(
                None,
                None,
                Some(&record(&[("upstream", "/srv/up.git")], None)),
                None
            )
            .unwrap_err()
            .contains("(it had: upstream)")
        );
        assert!(
            slug(Some("nope"), None, None, None)
                .unwrap_err()
                .starts_with("--repo \"nope\"")
        );
    }
}
