//! Whether a run's workers are pinned to the gateway: `network.enforce:` in
//! `fanout.yml` ([`Enforce`]) against what the kernel and the run's sandbox can do
//! ([`decide_network`]). Pinned, each worker's processes get a [`NetPolicy::pinned`]:
//! TCP only to the gateway's port and the worker's own `ports:`, no UDP, raw or
//! netlink socket — the gateway is their only door. Not pinned, the gateway's proxy
//! still filters what goes through it, but a process that ignores `HTTP(S)_PROXY`
//! reaches the network directly: the network is unconfined, and the run says so.
//!
//! [`NetPolicy::pinned`]: super::NetPolicy::pinned

use serde::{Deserialize, Serialize};

use super::policy::NET_ABI;

/// What this kernel can enforce of a closed network ([`super::NetPolicy`]), for `fanout
/// sandbox` and for the run that is asked to close it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NetworkSupport {
    /// TCP `connect` and `bind` by port: Landlock ABI [`NET_ABI`] or later.
    pub tcp_ports: bool,
    /// The socket filter (seccomp): no Unix, raw or netlink socket, no UDP when the
    /// network is closed.
    pub socket_filter: bool,
}

impl NetworkSupport {
    /// Both: a closed network can be enforced.
    pub fn closed_network(&self) -> bool {
        self.tcp_ports && self.socket_filter
    }
}

/// `network.enforce:`: what to do where the kernel cannot pin workers to the gateway.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Enforce {
    /// Pin workers where the kernel can (Landlock ABI 4, Linux 6.7, and seccomp);
    /// elsewhere run with the gateway's proxy alone and say the network is unconfined.
    #[default]
    Auto,
    /// Pin workers; refuse to run (exit 2, before anything is made) where the kernel
    /// or the run's sandbox cannot.
    Required,
}

impl Enforce {
    /// `auto`, `required`.
    pub fn as_str(self) -> &'static str {
        match self {
            Enforce::Auto => "auto",
            Enforce::Required => "required",
        }
    }

    /// Whether this is the default (`auto`), for `skip_serializing_if`.
    pub fn is_auto(&self) -> bool {
        *self == Enforce::Auto
    }
}

/// How a run's network works out on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct NetDecision {
    /// Each worker's sandbox pins it to the gateway ([`super::NetPolicy::pinned`]);
    /// else a process that ignores the proxy reaches the network directly.
    pub pinned: bool,
    /// Said once (on stderr and in the summary) when the network is open, or
    /// unconfined though agents are confined (unconfined agents have the sandbox's
    /// notice already).
    pub notice: Option<String>,
}

/// Decide for `enforce` (`open`: `network: open`, no filter to enforce: said in the
/// notice) with the Landlock ABI the run confines its workers with (`sandbox_abi`,
/// `None`: unconfined) and what the kernel supports; an error (for `required`) says
/// why the run cannot start.
pub fn decide_network(
    enforce: Enforce,
    open: bool,
    sandbox_abi: Option<u8>,
    support: NetworkSupport,
) -> Result<NetDecision, String> {
    if open {
        return Ok(NetDecision {
            pinned: false,
            notice: Some(
                "network: open: the gateway's proxy lets every host through (but the model providers it holds a key for) and workers are not pinned to it".to_owned(),
            ),
        });
    }
    let why = match sandbox_abi {
        None => Some("agents run without a sandbox".to_owned()),
        Some(a) if a < NET_ABI => Some(format!(
            "the sandbox has Landlock ABI {a}, without network rules"
        )),
        Some(_) if !support.socket_filter => {
            Some("the kernel takes no seccomp filter (no socket filter)".to_owned())
        }
        Some(_) => None,
    };
    let Some(why) = why else {
        return Ok(NetDecision {
            pinned: true,
            ..NetDecision::default()
        });
    };
    let needs = format!(
        "pinning agents to the gateway needs the sandbox with Landlock ABI {NET_ABI} (Linux 6.7) or later and seccomp"
    );
    match enforce {
        Enforce::Required => Err(format!(
            "network: enforce: required, but {why}; {needs}. Set `network: {{enforce: auto}}` to run with the gateway's proxy alone"
        )),
        Enforce::Auto => Ok(NetDecision {
            pinned: false,
            notice: sandbox_abi.map(|_| format!(
                "network: {why}: the network is UNCONFINED (the gateway filters only what agents send through their proxy; {needs}). Set `network: {{enforce: required}}` to refuse to run instead"
            )),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: NetworkSupport = NetworkSupport {
        tcp_ports: true,
        socket_filter: true,
    };

    #[test]
    fn pinned_from_abi_4_with_seccomp_else_refused_or_unconfined() {
        for enforce in [Enforce::Auto, Enforce::Required] {
            let d = decide_network(enforce, false, Some(4), FULL).unwrap();
            assert!(d.pinned && d.notice.is_none(), "{d:?}");
            // `network: open`: nothing to pin, and said
            let open = decide_network(enforce, true, None, FULL).unwrap();
            assert!(!open.pinned, "{open:?}");
            assert!(open.notice.unwrap().starts_with("network: open: "));
        }
        let no_seccomp = NetworkSupport {
            tcp_ports: true,
            socket_filter: false,
        };
        for (abi, support, says) in [
            (Some(3), FULL, "Landlock ABI 3, without network rules"),
            (None, FULL, "agents run without a sandbox"),
            (Some(6), no_seccomp, "no seccomp filter"),
        ] {
            let e = decide_network(Enforce::Required, false, abi, support).unwrap_err();
            assert!(
                e.starts_with("network: enforce: required, but ")
                    && e.contains(says)
                    && e.contains("ABI 4 (Linux 6.7)"),
                "{e}"
            );
            let d = decide_network(Enforce::Auto, false, abi, support).unwrap();
            assert!(!d.pinned, "{d:?}");
            match (abi, d.notice) {
                // the sandbox's own notice says agents run unconfined
                (None, n) => assert_eq!(n, None),
                (Some(_), n) => {
                    let n = n.unwrap();
                    assert!(n.contains(says) && n.contains("UNCONFINED"), "{n}");
                }
            }
        }
    }
}
