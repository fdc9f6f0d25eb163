//! Linux: the socket filter every confined process gets beside Landlock — a seccomp
//! program (the `seccompiler` crate) compiled in fanout's process and installed by
//! the child between fork and exec ([`super::Restrictions::apply`]).
//!
//! It answers `EPERM` (the process goes on) to:
//! - `socket()` of any family but IPv4 and IPv6: no Unix socket (Landlock does not
//!   mediate connecting to a socket file, so a Unix socket could reach the Docker
//!   daemon, the user's ssh-agent or D-Bus), no netlink, packet, vsock… socket.
//! - `socketpair()` of Unix *datagram* sockets: such a socket can still `sendto()` (or
//!   `connect()` to) any Unix datagram socket by path or abstract name — the system
//!   log, a daemon's — and seccomp cannot read the address a `sendto`/`sendmsg`/
//!   `connect` names. Stream and seqpacket pairs stay allowed (programs talk to their
//!   children through one: Node's and Python's subprocesses, Chromium): a connected
//!   stream or seqpacket socket cannot be pointed anywhere else (`connect` fails with
//!   `EISCONN`, a `sendto` address is refused or ignored).
//! - `socket()` of any type but `SOCK_STREAM` and `SOCK_DGRAM` (no raw socket); with a
//!   closed network ([`NetPolicy::deny_udp`]) `SOCK_DGRAM` too, and, under any
//!   [`NetPolicy`], a stream socket of another protocol than TCP (MPTCP, SCTP: not
//!   covered by Landlock's TCP rules).
//! - `io_uring_setup`, `io_uring_enter`, `io_uring_register`: io_uring makes sockets
//!   without the `socket` system call.
//! - under any [`NetPolicy`], `sendto`, `sendmsg` and `sendmmsg` with `MSG_FASTOPEN`:
//!   TCP Fast Open connects inside the send, where Landlock's TCP rules, which check
//!   `connect()`, never look (a pinned process reached any address so).
//!   (`TCP_FASTOPEN_CONNECT` then `connect()` still goes through the checked call.)
//!
//! x86_64's x32 numbers (bit 30) of the same calls are answered alike; a system call of
//! another architecture (a 32-bit program, `int 0x80`) kills the process: its
//! `socketcall` would pass unseen.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};

use super::policy::NetPolicy;

/// x86_64's x32 system call bit.
#[cfg(target_arch = "x86_64")]
const X32_BIT: i64 = 0x4000_0000;

/// The compiled filter for a confined process (`network`: its [`NetPolicy`], if any).
pub(super) fn program(network: Option<&NetPolicy>) -> Result<BpfProgram, String> {
    let err = |e: seccompiler::BackendError| format!("the socket filter: {e}");
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(err)?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let socket = socket_rules(network).map_err(err)?;
    for nr in numbers(libc::SYS_socket) {
        rules.insert(nr, socket.clone());
    }
    let pair = socketpair_rules().map_err(err)?;
    for nr in numbers(libc::SYS_socketpair) {
        rules.insert(nr, pair.clone());
    }
    if network.is_some() {
        // (system call, the index of its flags argument)
        for (call, flags) in [
            (libc::SYS_sendto, 3),
            (libc::SYS_sendmsg, 2),
            (libc::SYS_sendmmsg, 3),
        ] {
            let fast_open = fast_open_rule(flags).map_err(err)?;
            for nr in numbers(call) {
                rules.insert(nr, vec![fast_open.clone()]);
            }
        }
    }
    for call in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        for nr in numbers(call) {
            // no condition: always denied
            rules.insert(nr, Vec::new());
        }
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(err)?;
    filter.try_into().map_err(err)
}

/// The numbers of system call `nr` on this architecture (x86_64: also its x32 one).
fn numbers(nr: libc::c_long) -> Vec<i64> {
    #[cfg(target_arch = "x86_64")]
    {
        vec![nr, nr | X32_BIT]
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        vec![nr]
    }
}

/// The `socket(domain, type, protocol)` calls denied: any rule that matches denies.
fn socket_rules(
    network: Option<&NetPolicy>,
) -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    let arg = |i, op, v: i32| Cond::new(i, Len::Dword, op, v as u64);
    // The type's low four bits (flags such as SOCK_CLOEXEC above them).
    let kind = |t: i32| arg(1, Op::MaskedEq(0xf), t);
    let mut rules = vec![SeccompRule::new(vec![
        arg(0, Op::Ne, libc::AF_INET)?,
        arg(0, Op::Ne, libc::AF_INET6)?,
    ])?];
    let deny_udp = network.is_some_and(|n| n.deny_udp);
    for t in 0..=0xf {
        let allowed = t == libc::SOCK_STREAM || (t == libc::SOCK_DGRAM && !deny_udp);
        if !allowed {
            rules.push(SeccompRule::new(vec![kind(t)?])?);
        }
    }
    if network.is_some() {
        rules.push(SeccompRule::new(vec![
            kind(libc::SOCK_STREAM)?,
            arg(2, Op::Ne, 0)?,
            arg(2, Op::Ne, libc::IPPROTO_TCP)?,
        ])?);
    }
    Ok(rules)
}

/// A send whose flags (argument `index`) hold `MSG_FASTOPEN`.
fn fast_open_rule(index: u8) -> Result<SeccompRule, seccompiler::BackendError> {
    let bit = libc::MSG_FASTOPEN as u64;
    SeccompRule::new(vec![Cond::new(index, Len::Dword, Op::MaskedEq(bit), bit)?])
}

/// The `socketpair(domain, type, protocol)` calls denied: Unix datagram pairs (the
/// type's low four bits; flags such as `SOCK_CLOEXEC` above them).
fn socketpair_rules() -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    Ok(vec![SeccompRule::new(vec![
        Cond::new(0, Len::Dword, Op::Eq, libc::AF_UNIX as u64)?,
        Cond::new(1, Len::Dword, Op::MaskedEq(0xf), libc::SOCK_DGRAM as u64)?,
    ])?])
}

/// Install `program` in the calling process (`no_new_privs` is set first). System
/// calls only, no allocation: safe between fork and exec.
pub(super) fn install(program: &BpfProgram) -> std::io::Result<()> {
    seccompiler::apply_filter(program).map_err(|e| match e {
        seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
        _ => std::io::Error::from_raw_os_error(libc::EINVAL),
    })
}

/// Whether this kernel takes seccomp filters (`Seccomp:` in `/proc/self/status`,
/// present when the kernel has `CONFIG_SECCOMP`).
pub(super) fn available() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Seccomp:")))
}
