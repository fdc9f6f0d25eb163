//! What one confined process may write, what it may not read, and which network
//! it may reach.

use std::path::PathBuf;

/// The lowest Landlock ABI with network rules (Linux 6.7), which a [`NetPolicy`] needs.
pub const NET_ABI: u8 = 4;

/// What one confined process may do besides reading and executing anything outside
/// [`Policy::hide`]: write (create, remove, rename, truncate…) beneath
/// [`Policy::write`], open for writing the files in [`Policy::write_files`], and —
/// with [`Policy::network`] — reach only the network that says.
///
/// Every confined process (`abi > 0`) also gets the socket filter (see
/// [`crate::sandbox`]): no Unix, raw, netlink or packet socket, whatever `network` says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// The Landlock ABI to use; 0: no Landlock (the child only drops a root fanout's capabilities).
    pub abi: u8,
    /// Directories (or files) with every write right beneath them.
    pub write: Vec<PathBuf>,
    /// Files that may be opened for writing (and truncated), nothing more: `/dev/null`.
    pub write_files: Vec<PathBuf>,
    /// Paths nothing beneath may be read or executed (their parent directories may
    /// still be listed): fanout's record key ([`crate::util::sign::key_dir`]), the
    /// user's credentials ([`crate::sandbox::hidden::credentials`]) and `hidden:`.
    pub hide: Vec<PathBuf>,
    /// The network: `None`, TCP and UDP to anywhere (today's behaviour); `Some`, only
    /// what [`NetPolicy`] allows.
    pub network: Option<NetPolicy>,
}

/// A closed network: what a confined process may still do with TCP, and whether it
/// may send UDP at all. Enforced by Landlock's network rules (ABI 4, Linux 6.7, or
/// later: [`crate::sandbox::prepare`] refuses a `NetPolicy` below that) and by the
/// socket filter.
///
/// Landlock's rules name ports, not addresses: an allowed port is allowed on every
/// address (the gateway listens on loopback; a worker's `ports:` too). Only TCP
/// sockets can be made (`SOCK_STREAM`, protocol TCP: no MPTCP or SCTP, which
/// Landlock's rules do not cover).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetPolicy {
    /// The TCP ports `connect` may reach (the gateway's, the worker's own `ports:`);
    /// every other `connect` fails with `EACCES`.
    pub connect_ports: Vec<u16>,
    /// The TCP ports `bind` may take (the worker's `ports:`); every other `bind`,
    /// port 0 (an ephemeral port) included unless listed, fails with `EACCES`.
    pub bind_ports: Vec<u16>,
    /// Deny UDP sockets (`SOCK_DGRAM` on IPv4 and IPv6, ICMP "ping" sockets too:
    /// `EPERM`), so that no datagram — DNS included — carries data out.
    pub deny_udp: bool,
}

impl NetPolicy {
    /// A worker pinned to its door: TCP `connect` only to the gateway's port
    /// (`gateway`) and to the worker's own `ports`, `bind` only its own `ports`, no UDP.
    /// Everything else it reaches, it reaches through the gateway.
    pub fn pinned(gateway: u16, ports: impl IntoIterator<Item = u16>) -> NetPolicy {
        let mut bind_ports: Vec<u16> = ports.into_iter().collect();
        bind_ports.sort_unstable();
        bind_ports.dedup();
        let mut connect_ports = bind_ports.clone();
        if !connect_ports.contains(&gateway) {
            connect_ports.insert(0, gateway);
        }
        NetPolicy {
            connect_ports,
            bind_ports,
            deny_udp: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_worker_connects_to_its_door_and_its_ports_and_binds_only_its_ports() {
        let p = NetPolicy::pinned(41000, [20012, 20010, 20011, 20010]);
        assert_eq!(p.connect_ports, [41000, 20010, 20011, 20012]);
        assert_eq!(p.bind_ports, [20010, 20011, 20012]);
        assert!(p.deny_udp);
        let alone = NetPolicy::pinned(41000, []);
        assert_eq!(
            (alone.connect_ports, alone.bind_ports),
            (vec![41000], vec![])
        );
    }
}
