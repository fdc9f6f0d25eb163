//! The hosts a worker may reach through the gateway's proxy: an allow-list of host
//! names (exact, or `*.domain` for its sub-domains), each with an optional port, plus
//! built-in presets for the package registries a setup command needs; or no filter at
//! all (`open`). Hosts the gateway holds a key for are refused through the proxy
//! whatever the list says (their calls go through the door, where they are metered).
//!
//! A host without a port is allowed on the default port of the way it is reached:
//! 443 through `CONNECT` (TLS), 80 as plain HTTP. Names are compared without case
//! and without a trailing dot; an IP address matches only itself, written as such.

/// Built-in presets: the hosts each package ecosystem's installer fetches from.
pub const PRESETS: &[(&str, &[&str])] = &[
    ("npm", &["registry.npmjs.org", "registry.yarnpkg.com"]),
    ("pypi", &["pypi.org", "files.pythonhosted.org"]),
    (
        "crates",
        &["crates.io", "index.crates.io", "static.crates.io"],
    ),
    ("go", &["proxy.golang.org", "sum.golang.org"]),
    (
        "github",
        &[
            "github.com",
            "api.github.com",
            "codeload.github.com",
            "objects.githubusercontent.com",
            "raw.githubusercontent.com",
        ],
    ),
];

/// Which hosts the proxy lets a worker reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// No filter: every host (the report says so).
    Open,
    /// Only these: host names (`example.com`, `*.example.com`, `host:port`) or preset
    /// names ([`PRESETS`]).
    Allow(Vec<String>),
}

impl Default for Network {
    /// Nothing.
    fn default() -> Self {
        Network::Allow(Vec::new())
    }
}

/// One allowed host pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    /// Lower-case, without a trailing dot; for a wildcard, the suffix with its dot
    /// (`.example.com`).
    host: String,
    wildcard: bool,
    port: Option<u16>,
}

/// The compiled filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList {
    open: bool,
    rules: Vec<Rule>,
    /// Never let through, open or listed (a rule without a port: on any port).
    refused: Vec<Rule>,
}

/// How a host is reached, for its default port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `CONNECT host:port` (TLS inside, port 443 by default).
    Tunnel,
    /// A plain HTTP request in absolute form (port 80 by default).
    Plain,
}

impl AllowList {
    /// The filter `network` describes, less `refused` (`host` — on any port — or
    /// `host:port`: the hosts of the providers the gateway holds a key for), which
    /// no entry and not `open` lets through. An entry that is neither a preset nor a
    /// host name is an error naming it.
    pub fn new(network: &Network, refused: &[String]) -> Result<AllowList, String> {
        let refused = refused.iter().map(|h| rule(h)).collect::<Result<_, _>>()?;
        let (open, entries): (bool, &[String]) = match network {
            Network::Open => (true, &[]),
            Network::Allow(entries) => (false, entries),
        };
        let mut rules = Vec::new();
        for entry in entries {
            rules.extend(entry_rules(entry)?);
        }
        Ok(AllowList {
            open,
            rules,
            refused,
        })
    }

    /// Whether `host:port`, reached `via`, is allowed.
    pub fn permits(&self, host: &str, port: u16, via: Via) -> bool {
        let host = normal(host);
        if self
            .refused
            .iter()
            .any(|r| r.names(&host) && r.port.is_none_or(|p| p == port))
        {
            return false;
        }
        if self.open {
            return true;
        }
        let default_port = match via {
            Via::Tunnel => 443,
            Via::Plain => 80,
        };
        self.rules
            .iter()
            .any(|r| r.names(&host) && r.port.unwrap_or(default_port) == port)
    }
}

impl Rule {
    /// Whether this rule names `host` (normalised).
    fn names(&self, host: &str) -> bool {
        if self.wildcard {
            host.len() > self.host.len() && host.ends_with(&self.host)
        } else {
            host == self.host
        }
    }
}

/// Check one allow-list entry (`network.allow` in `fanout.yml`): a preset, or a host
/// pattern. The error says what is wrong with it.
pub fn check_allow_entry(entry: &str) -> Result<(), String> {
    entry_rules(entry).map(drop)
}

/// The rules of one entry: a preset's hosts, or the host pattern it is. A single word
/// with no port that is no preset is taken for a mistyped preset (a single-label host
/// is written with a trailing dot, `intranet.`; `localhost` is one as it is).
fn entry_rules(entry: &str) -> Result<Vec<Rule>, String> {
    let entry = entry.trim();
    if let Some((_, hosts)) = PRESETS.iter().find(|(name, _)| *name == entry) {
        return hosts.iter().map(|h| rule(h)).collect();
    }
    let word = !entry.is_empty()
        && entry
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if word && entry != "localhost" && !entry.bytes().all(|b| b.is_ascii_digit()) {
        let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
        return Err(format!(
            "network allow-list entry {entry:?}: no such preset (the presets: {}); a host name has a dot (write \"{entry}.\" for a single-label host)",
            names.join(", ")
        ));
    }
    Ok(vec![rule(entry)?])
}

/// `host` lower-case, without brackets nor a trailing dot.
fn normal(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// One entry: `host`, `host:port`, `*.domain[:port]`, `[v6]:port`.
fn rule(entry: &str) -> Result<Rule, String> {
    let bad = |why: &str| format!("network allow-list entry {entry:?}: {why}");
    let (host, port) = split_port(entry).map_err(|e| bad(&e))?;
    let (wildcard, name) = match host.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, host),
    };
    let name = normal(name);
    if name.is_empty() {
        return Err(bad("no host name"));
    }
    let is_ip = name.parse::<std::net::IpAddr>().is_ok();
    let valid = is_ip
        || name
            .split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if !valid {
        return Err(bad(
            "not a host name (letters, digits, '-' and '.'; '*.' before a domain for its sub-domains; a preset: npm, pypi, crates, go, github)",
        ));
    }
    if wildcard && is_ip {
        return Err(bad("a wildcard goes before a domain name, not an address"));
    }
    Ok(Rule {
        host: if wildcard { format!(".{name}") } else { name },
        wildcard,
        port,
    })
}

/// `entry`'s host and port, if it names one.
fn split_port(entry: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (v6, after) = rest.split_once(']').ok_or("an unclosed '['")?;
        match after.strip_prefix(':') {
            Some(p) => (v6, Some(p)),
            None if after.is_empty() => (v6, None),
            None => return Err("text after ']'".into()),
        }
    } else if entry.matches(':').count() > 1 {
        (entry, None) // a bare IPv6 address
    } else {
        match entry.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (entry, None),
        }
    };
    let port = port
        .map(|p| match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{p:?} is not a port (1-65535)")),
        })
        .transpose()?;
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> AllowList {
        let listed = ["api.anthropic.com", "127.0.0.1:8080"]
            .iter()
            .chain(entries);
        AllowList::new(
            &Network::Allow(listed.map(|s| s.to_string()).collect()),
            &[],
        )
        .unwrap()
    }

    #[test]
    fn hosts_ports_wildcards_and_presets() {
        let l = list(&[
            "npm",
            "*.example.com",
            "Exact.Test.",
            "local:9000",
            "[::1]:7",
        ]);
        assert!(l.permits("api.anthropic.com", 443, Via::Tunnel));
        assert!(!l.permits("api.anthropic.com", 8443, Via::Tunnel));
        assert!(l.permits("api.anthropic.com", 80, Via::Plain));
        assert!(l.permits("127.0.0.1", 8080, Via::Tunnel));
        assert!(!l.permits("127.0.0.1", 22, Via::Tunnel));
        assert!(l.permits("registry.npmjs.org", 443, Via::Tunnel));
        assert!(l.permits("REGISTRY.NPMJS.ORG.", 443, Via::Tunnel));
        assert!(!l.permits("pypi.org", 443, Via::Tunnel));
        assert!(l.permits("a.example.com", 443, Via::Tunnel));
        assert!(l.permits("a.b.example.com", 443, Via::Tunnel));
        assert!(!l.permits("example.com", 443, Via::Tunnel));
        assert!(!l.permits("badexample.com", 443, Via::Tunnel));
        assert!(l.permits("exact.test", 443, Via::Tunnel));
        assert!(!l.permits("sub.exact.test", 443, Via::Tunnel));
        assert!(l.permits("local", 9000, Via::Plain));
        assert!(!l.permits("local", 80, Via::Plain));
        assert!(l.permits("[::1]", 7, Via::Tunnel));
        assert!(l.permits("::1", 7, Via::Tunnel));
        // single-label hosts: with a trailing dot, or `localhost`
        let l = list(&["intranet.", "localhost"]);
        assert!(l.permits("intranet", 443, Via::Tunnel));
        assert!(l.permits("localhost", 443, Via::Tunnel));
        assert!(check_allow_entry("pypi").is_ok() && check_allow_entry(" crates ").is_ok());
    }

    #[test]
    fn open_lets_everything_through_and_default_nothing() {
        let open = AllowList::new(&Network::Open, &[]).unwrap();
        assert!(open.permits("anything.example", 22, Via::Tunnel));
        let default = AllowList::new(&Network::default(), &[]).unwrap();
        assert!(!default.permits("api.openai.com", 443, Via::Tunnel));
        assert!(!default.permits("registry.npmjs.org", 443, Via::Tunnel));
    }

    #[test]
    fn refused_hosts_pass_neither_listed_nor_open() {
        let refused = ["api.anthropic.com".to_owned(), "127.0.0.1:8080".to_owned()];
        let listed = Network::Allow(vec![
            "api.anthropic.com".into(),
            "*.anthropic.com".into(),
            "127.0.0.1:8080".into(),
            "127.0.0.1:8081".into(),
        ]);
        for network in [listed, Network::Open] {
            let l = AllowList::new(&network, &refused).unwrap();
            // a refused host without a port: on every port, either way
            for (port, via) in [(443, Via::Tunnel), (80, Via::Plain), (8443, Via::Tunnel)] {
                assert!(!l.permits("API.anthropic.com.", port, via), "{network:?}");
            }
            assert!(!l.permits("127.0.0.1", 8080, Via::Tunnel), "{network:?}");
            // beside them, what the list says
            assert!(l.permits("127.0.0.1", 8081, Via::Tunnel), "{network:?}");
            assert!(
                l.permits("x.anthropic.com", 443, Via::Tunnel),
                "{network:?}"
            );
        }
    }

    #[test]
    fn bad_entries_are_named() {
        for (entry, why) in [
            ("", "no host name"),
            ("ex ample.com", "not a host name"),
            ("example.com:0", "\"0\" is not a port"),
            ("example.com:http", "\"http\" is not a port"),
            ("*.10.0.0.1", "a wildcard goes before a domain name"),
            ("[::1", "an unclosed '['"),
            ("a..b", "not a host name"),
            ("*", "not a host name"),
            (
                "npmm",
                "no such preset (the presets: npm, pypi, crates, go, github)",
            ),
            ("intranet", "write \"intranet.\" for a single-label host"),
        ] {
            let e = AllowList::new(&Network::Allow(vec![entry.into()]), &[]).unwrap_err();
            assert!(
                e.starts_with(&format!("network allow-list entry {entry:?}: ")) && e.contains(why),
                "{entry}: {e}"
            );
        }
    }
}
