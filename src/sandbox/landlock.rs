//! Linux: the Landlock version query, the ruleset of a [`Policy`] (the `landlock`
//! crate, every right required: a ruleset the kernel cannot enforce in full is an
//! error, never a weaker sandbox) and its socket filter ([`super::seccomp`]), both
//! built in fanout's process, and what the child does with them between fork and exec
//! ([`Restrictions::apply`]: dropping capabilities, `no_new_privs`,
//! `landlock_restrict_self`, the filter; system calls only).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};
use nix::libc;
use seccompiler::BpfProgram;

use super::policy::{NET_ABI, Policy};

/// The kernel's Landlock ABI version, or why there is none.
pub(super) fn kernel_abi() -> Result<u8, String> {
    // SAFETY: the documented version query (`attr` NULL, `size` 0,
    // LANDLOCK_CREATE_RULESET_VERSION): nothing is read or written through pointers.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    if v >= 1 {
        return Ok(u8::try_from(v).unwrap_or(u8::MAX));
    }
    let e = std::io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel has no Landlock (ENOSYS)".into(),
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built into the kernel but not enabled (EOPNOTSUPP; see the `lsm=` boot parameter)"
                .into()
        }
        _ => format!("Landlock's version query failed: {e}"),
    })
}

/// A confinement made ready in fanout's own process, applied in the child between
/// fork and exec ([`Restrictions::apply`]): the Landlock ruleset with all its rules, the
/// socket filter, and whether the child must give up capabilities.
#[derive(Debug, Clone)]
pub struct Restrictions {
    /// The ruleset (close-on-exec: it never reaches the program); `None` for ABI 0.
    /// Shared: every process of a worker restricts itself with the same one.
    ruleset: Option<Arc<OwnedFd>>,
    /// The socket filter, with the ruleset.
    filter: Option<Arc<BpfProgram>>,
    /// fanout holds capabilities (root): the child drops them all.
    drop_caps: bool,
}

/// Build `policy`'s ruleset (every rule added, every right required) and socket
/// filter, and find out whether capabilities must go.
pub(super) fn prepare(policy: &Policy) -> Result<Restrictions, String> {
    if policy.network.is_some() && policy.abi < NET_ABI {
        return Err(format!(
            "a closed network needs Landlock ABI {} (Linux 6.7) or later; fanout uses ABI {} here",
            NET_ABI, policy.abi
        ));
    }
    let (ruleset, filter) = if policy.abi > 0 {
        let fd: Option<OwnedFd> = ruleset(policy)?.into();
        let filter = super::seccomp::program(policy.network.as_ref())?;
        (
            Some(Arc::new(fd.ok_or("Landlock gave no ruleset")?)),
            Some(Arc::new(filter)),
        )
    } else {
        (None, None)
    };
    Ok(Restrictions {
        ruleset,
        filter,
        drop_caps: holds_capabilities(),
    })
}

impl Restrictions {
    /// Confine the calling process: drop every capability when fanout had any, set
    /// `no_new_privs`, restrict with the ruleset, install the socket filter. Only
    /// system calls, no allocation: safe between fork and exec.
    pub fn apply(&self) -> std::io::Result<()> {
        if self.drop_caps {
            drop_capabilities()?;
        }
        let Some(fd) = &self.ruleset else {
            return Ok(());
        };
        // SAFETY: prctl and landlock_restrict_self take integers only; `fd` is open
        // (owned by `self`).
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        match &self.filter {
            Some(filter) => super::seccomp::install(filter),
            None => Ok(()),
        }
    }

    /// Whether a process confined by this connects to the Unix socket at `path`: a
    /// child forked for it applies the confinement and tries. `Ok(())`: it connected
    /// (or the listener's queue was full); `Err`: why not.
    pub fn connect_unix(&self, path: &Path) -> std::io::Result<()> {
        use nix::sys::wait::{WaitStatus, waitpid};
        let addr = nix::sys::socket::UnixAddr::new(path).map_err(std::io::Error::from)?;
        // SAFETY: the child makes system calls only (no allocation, no lock) and
        // leaves with `_exit`.
        match unsafe { nix::unistd::fork() }.map_err(std::io::Error::from)? {
            nix::unistd::ForkResult::Child => {
                let code = match self.apply() {
                    Err(_) => 255,
                    Ok(()) => match super::sockets::connect(&addr) {
                        Ok(()) => 0,
                        Err(e) => (e as i32).clamp(1, 254),
                    },
                };
                // SAFETY: `_exit` ends the child at once (no handler, no flush).
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                match waitpid(child, None).map_err(std::io::Error::from)? {
                    WaitStatus::Exited(_, 0) => Ok(()),
                    WaitStatus::Exited(_, 255) => Err(std::io::Error::other(
                        "the confinement could not be applied",
                    )),
                    WaitStatus::Exited(_, errno) => Err(std::io::Error::from_raw_os_error(errno)),
                    other => Err(std::io::Error::other(format!("the check ended: {other:?}"))),
                }
            }
        }
    }
}

/// Whether this process holds any capability (root, or a binary given some).
fn holds_capabilities() -> bool {
    use caps::CapSet;
    let holds = |set| caps::read(None, set).map_or(true, |c| !c.is_empty());
    nix::unistd::geteuid().is_root() || holds(CapSet::Permitted) || holds(CapSet::Ambient)
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Give up every capability: the bounding set first (so that no later `execve` hands
/// them back), then ambient, then inheritable, effective and permitted (one
/// `capset`). Only system calls (safe between fork and exec).
fn drop_capabilities() -> std::io::Result<()> {
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl with integer arguments; capset reads the header and two data
    // structs, both live on this stack for the call.
    unsafe {
        // Up to the first number the kernel does not know (EINVAL).
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINVAL) {
                    break;
                }
                return Err(e);
            }
        }
        let clear_all = libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        // EINVAL: a kernel without ambient capabilities (< 4.3), nothing to clear.
        if clear_all != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            return Err(std::io::Error::last_os_error());
        }
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The ruleset of `policy`, every rule added.
fn ruleset(policy: &Policy) -> Result<RulesetCreated, String> {
    let abi = ABI::from(i32::from(policy.abi));
    let err = |e: landlock::RulesetError| e.to_string();
    let all = AccessFs::from_all(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(err)?;
    if policy.abi >= 6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(err)?;
    }
    if policy.network.is_some() {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(err)?;
    }
    // Every directory may be listed; files read and executed everywhere but beneath
    // the hidden paths (Landlock only allows: reading is granted on each subtree that
    // holds no hidden path, see `readable`).
    let mut created = ruleset
        .create()
        .map_err(err)?
        .add_rule(PathBeneath::new(open("/")?, AccessFs::ReadDir))
        .map_err(err)?;
    let read = AccessFs::from_read(abi);
    for (p, dir) in readable(&policy.hide) {
        let rights = if dir {
            read
        } else {
            read & AccessFs::from_file(abi)
        };
        // An entry gone since it was listed has nothing to grant.
        if let Ok(fd) = PathFd::new(&p) {
            created = created
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(err)?;
        }
    }
    for p in &policy.write {
        let rights = if p.is_dir() {
            all
        } else {
            AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(open(p)?, rights))
            .map_err(err)?;
    }
    let file_write: BitFlags<AccessFs> =
        AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    for p in &policy.write_files {
        let rights = AccessFs::from_file(abi) & file_write;
        created = created
            .add_rule(PathBeneath::new(open(p)?, rights))
            .map_err(err)?;
    }
    if let Some(net) = &policy.network {
        for (ports, access) in [
            (&net.connect_ports, AccessNet::ConnectTcp),
            (&net.bind_ports, AccessNet::BindTcp),
        ] {
            for port in ports {
                created = created.add_rule(NetPort::new(*port, access)).map_err(err)?;
            }
        }
    }
    Ok(created)
}

/// The paths to grant reading beneath so that everything is readable but what lies
/// beneath `hide`: `/` itself when nothing is hidden; else, walking down from `/`, each
/// entry of a directory on the way to a hidden path that is not on that way (a
/// symbolic link whose target is, or holds, a hidden path is left out: the rule would
/// land on its target). Each with whether it is (or leads to) a directory.
pub(super) fn readable(hide: &[PathBuf]) -> Vec<(PathBuf, bool)> {
    let hide: Vec<PathBuf> = hide.iter().map(|h| super::hidden::real(h)).collect();
    let mut out = Vec::new();
    readable_beneath(Path::new("/"), true, &hide, &mut out);
    out
}

/// [`readable`] from `path`, a real path (walked down from `/` through no link) that is
/// a directory or not (`dir`). Only links are resolved: an entry of a real directory
/// that is no link is a real path too, and its type comes with the listing.
fn readable_beneath(path: &Path, dir: bool, hide: &[PathBuf], out: &mut Vec<(PathBuf, bool)>) {
    if hide.iter().any(|h| h.starts_with(path) && h != path) {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        for entry in entries.flatten() {
            let entry_path = entry.path();
            match entry.file_type() {
                Ok(t) if !t.is_symlink() => readable_beneath(&entry_path, t.is_dir(), hide, out),
                _ => {
                    let Ok(real) = std::fs::canonicalize(&entry_path) else {
                        continue; // a dangling link: nothing to read through it
                    };
                    if !hide
                        .iter()
                        .any(|h| h.starts_with(&real) || real.starts_with(h))
                    {
                        out.push((entry_path, real.is_dir()));
                    }
                }
            }
        }
    } else if !hide.iter().any(|h| path.starts_with(h)) {
        out.push((path.to_owned(), dir));
    }
}

fn open(p: impl AsRef<Path>) -> Result<PathFd, String> {
    PathFd::new(p.as_ref()).map_err(|e| format!("{}: {e}", p.as_ref().display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_but_the_hidden_directory_stays_readable() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let state = base.join("home/.local/state");
        let hidden = state.join("fanout");
        for d in [&hidden, &state.join("other"), &base.join("home/src")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(hidden.join("record.key"), "k").unwrap();
        std::fs::write(state.join("notes"), "n").unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, state.join(name)).unwrap();
        };
        link(&hidden, "to-key");
        link(&hidden.join("record.key"), "to-key-file");
        link(&base.join("home"), "to-an-ancestor");
        link(&base.join("home/src"), "to-src");
        link(&base.join("gone"), "dangling");

        let granted = readable(std::slice::from_ref(&hidden));
        // what is a directory is granted as one
        for (p, dir) in &granted {
            assert_eq!(*dir, p.is_dir(), "{}", p.display());
        }
        let got: Vec<PathBuf> = granted.into_iter().map(|(p, _)| p).collect();
        for p in [
            state.join("other"),
            state.join("notes"),
            state.join("to-src"),
            base.join("home/src"),
        ] {
            assert!(got.contains(&p), "{} not readable: {got:?}", p.display());
        }
        // the way down is walked, never granted whole; the hidden path and links into
        // it or above it are left out
        for p in [
            PathBuf::from("/"),
            base.clone(),
            state.clone(),
            hidden.clone(),
            state.join("to-key"),
            state.join("to-key-file"),
            state.join("to-an-ancestor"),
            state.join("dangling"),
        ] {
            assert!(!got.contains(&p), "{} granted: {got:?}", p.display());
        }
        assert!(got.iter().all(|p| !p.starts_with(&hidden)), "{got:?}");
        // outside the way down, whole subtrees: `/` has entries of its own
        assert!(got.iter().any(|p| p.parent() == Some(Path::new("/"))));
        assert_eq!(readable(&[]), [(PathBuf::from("/"), true)]);
    }
}
