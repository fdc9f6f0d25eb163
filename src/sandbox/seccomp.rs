//! Linux: the socket filter every confined process gets beside Landlock — a seccomp
//! program (the `seccompiler` crate) compiled in fanout's process and installed by
//! the child between fork and exec ([`super::Restrictions::apply`]).
//!
//! It answers `EPERM` (the process goes on) to:
//! - `socket()` of any family but IPv4 and IPv6: no Unix socket (Landlock does not
//!   mediate connecting to a socket file, so a Unix socket could reach the Docker
//!   daemon, the user's ssh-agent or D-Bus), no netlink, packet, vsock… socket.
//!   `socketpair()` stays allowed (programs talk to their children through one): a
//!   stream pair reaches nothing outside; a datagram pair can still `sendto` a Unix
//!   datagram socket by path (the system log) until Landlock ABI 9 mediates that.
//! - `socket()` of any type but `SOCK_STREAM` and `SOCK_DGRAM` (no raw socket); with a
//!   closed network ([`NetPolicy::deny_udp`]) `SOCK_DGRAM` too, and, under any
//!   [`NetPolicy`], a stream socket of another protocol than TCP (MPTCP, SCTP: not
//!   covered by Landlock's TCP rules).
//! - `io_uring_setup`, `io_uring_enter`, `io_uring_register`: io_uring makes sockets
//!   without the `socket` system call.
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
