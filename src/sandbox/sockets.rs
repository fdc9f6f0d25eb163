//! The Unix sockets that hand out more than an agent should get — root through the
//! Docker, containerd or podman daemon, the user's session through D-Bus or systemd,
//! the user's keys through ssh-agent — as `fanout sandbox` reports them: where each
//! is, who may open it (mode, owner, group and this user's groups), whether this user
//! connects; whether a confined agent does is [`super::agents_refused`]'s.
//!
//! Looked for: `$DOCKER_HOST` and `$CONTAINER_HOST` (`unix://` ones),
//! `/var/run/docker.sock`, `/run/docker.sock`, `~/.docker/run/docker.sock`,
//! `$XDG_RUNTIME_DIR/docker.sock`, `/run/containerd/containerd.sock`,
//! `/run/podman/podman.sock`, `$XDG_RUNTIME_DIR/podman/podman.sock`, the session bus
//! (`$DBUS_SESSION_BUS_ADDRESS`'s `unix:path=`, `$XDG_RUNTIME_DIR/bus`), the user's
//! systemd (`$XDG_RUNTIME_DIR/systemd/private`) and `$SSH_AUTH_SOCK`. An abstract
//! D-Bus address is not checked (a confined agent cannot reach one from ABI 6, and
//! the socket filter makes no Unix socket at all).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr};
use serde::Serialize;

/// One socket found.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    /// `docker`, `containerd`, `podman`, `dbus`, `systemd`, `ssh-agent`.
    pub name: &'static str,
    /// What connecting gives.
    pub gives: &'static str,
    /// Where it is (as found, before links).
    pub path: PathBuf,
    /// Its permission bits, `0660`.
    pub mode: String,
    /// Its owner's name (or uid).
    pub owner: String,
    /// Its group's name (or gid).
    pub group: String,
    /// Why its mode lets this user connect (`owner`, `group docker`, `everyone`,
    /// `root`), or `None`.
    pub permits_you: Option<String>,
    /// This user connected (`None`), or why not.
    pub you_refused: Option<String>,
}

/// The sockets of the module docs that exist, each once.
pub fn find() -> Vec<Found> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (name, gives, path) in candidates(&|k| std::env::var_os(k)) {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if !meta.file_type().is_socket() || seen.contains(&real) {
            continue;
        }
        seen.push(real);
        out.push(Found {
            name,
            gives,
            mode: format!("{:04o}", meta.mode() & 0o7777),
            owner: user_name(meta.uid()),
            group: group_name(meta.gid()),
            permits_you: permits_you(&meta),
            you_refused: connect_path(&path).err().map(|e| e.to_string()),
            path,
        });
    }
    out
}

const ROOT: &str = "root on this machine (unless the daemon is rootless)";
const SESSION: &str = "runs programs as you, outside any sandbox";

/// Where to look, in order: (name, what it gives, path).
fn candidates(
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Vec<(&'static str, &'static str, PathBuf)> {
    let var = |k: &str| env(k).map(|v| v.to_string_lossy().into_owned());
    let path = |k: &str| var(k).map(PathBuf::from).filter(|p| p.is_absolute());
    let url = |k: &str| {
        var(k)
            .and_then(|v| v.strip_prefix("unix://").map(PathBuf::from))
            .filter(|p| p.is_absolute())
    };
    let run = path("XDG_RUNTIME_DIR");
    let home = path("HOME");
    let dbus = var("DBUS_SESSION_BUS_ADDRESS").and_then(|a| {
        a.split(';')
            .filter_map(|one| one.strip_prefix("unix:"))
            .flat_map(|kv| kv.split(','))
            .find_map(|kv| kv.strip_prefix("path=").map(PathBuf::from))
    });
    let mut out: Vec<(&'static str, &'static str, Option<PathBuf>)> = vec![
        ("docker", ROOT, url("DOCKER_HOST")),
        ("docker", ROOT, Some("/var/run/docker.sock".into())),
        ("docker", ROOT, Some("/run/docker.sock".into())),
        (
            "docker",
            ROOT,
            home.map(|h| h.join(".docker/run/docker.sock")),
        ),
        ("docker", ROOT, run.as_ref().map(|r| r.join("docker.sock"))),
        (
            "containerd",
            ROOT,
            Some("/run/containerd/containerd.sock".into()),
        ),
        ("podman", ROOT, url("CONTAINER_HOST")),
        ("podman", ROOT, Some("/run/podman/podman.sock".into())),
        (
            "podman",
            ROOT,
            run.as_ref().map(|r| r.join("podman/podman.sock")),
        ),
        ("dbus", SESSION, dbus),
        ("dbus", SESSION, run.as_ref().map(|r| r.join("bus"))),
        (
            "systemd",
            SESSION,
            run.as_ref().map(|r| r.join("systemd/private")),
        ),
    ];
    out.push((
        "ssh-agent",
        "signs with your ssh keys",
        path("SSH_AUTH_SOCK"),
    ));
    out.into_iter()
        .filter_map(|(n, g, p)| Some((n, g, p?)))
        .collect()
}

/// Why the socket's mode lets this user connect (connecting needs write permission).
fn permits_you(meta: &std::fs::Metadata) -> Option<String> {
    let (uid, mode) = (nix::unistd::geteuid(), meta.mode());
    if uid.is_root() {
        return Some("root".into());
    }
    if meta.uid() == uid.as_raw() {
        return (mode & 0o200 != 0).then(|| "owner".into());
    }
    let gid = nix::unistd::Gid::from_raw(meta.gid());
    if nix::unistd::getegid() == gid || in_group(gid) {
        return (mode & 0o020 != 0).then(|| format!("group {}", group_name(meta.gid())));
    }
    (mode & 0o002 != 0).then(|| "everyone".into())
}

/// Whether this process has `gid` among its supplementary groups.
#[cfg(not(target_vendor = "apple"))]
fn in_group(gid: nix::unistd::Gid) -> bool {
    nix::unistd::getgroups().is_ok_and(|g| g.contains(&gid))
}

/// Whether this user is a member of `gid` (macOS has no `getgroups` in nix).
#[cfg(target_vendor = "apple")]
fn in_group(gid: nix::unistd::Gid) -> bool {
    let me = user_name(nix::unistd::geteuid().as_raw());
    matches!(nix::unistd::Group::from_gid(gid), Ok(Some(g)) if g.mem.contains(&me))
}

fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => u.name,
        _ => uid.to_string(),
    }
}

fn group_name(gid: u32) -> String {
    match nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)) {
        Ok(Some(g)) => g.name,
        _ => gid.to_string(),
    }
}

/// Connect to the socket at `path` from this process.
fn connect_path(path: &Path) -> Result<(), Errno> {
    connect(&UnixAddr::new(path)?)
}

/// Connect a fresh non-blocking Unix stream socket to `addr` and close it: `Ok` when
/// it connected or the listener's queue is full (`EAGAIN`: something listens). System
/// calls only (safe in a forked child).
pub(super) fn connect(addr: &UnixAddr) -> Result<(), Errno> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let fd = nix::sys::socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )?;
    fcntl(&fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    match nix::sys::socket::connect(std::os::fd::AsRawFd::as_raw_fd(&fd), addr) {
        Ok(()) | Err(Errno::EAGAIN) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_come_from_the_environment_and_the_usual_places() {
        let env = |k: &str| -> Option<std::ffi::OsString> {
            Some(match k {
                "DOCKER_HOST" => "unix:///custom/docker.sock".into(),
                "CONTAINER_HOST" => "tcp://host:1".into(),
                "XDG_RUNTIME_DIR" => "/run/user/7".into(),
                "DBUS_SESSION_BUS_ADDRESS" => "unix:guid=1,path=/run/user/7/dbus".into(),
                "SSH_AUTH_SOCK" => "/tmp/ssh-x/agent.1".into(),
                _ => return None,
            })
        };
        let got: Vec<(&str, PathBuf)> = candidates(&env)
            .into_iter()
            .map(|(n, _, p)| (n, p))
            .collect();
        for (name, path) in [
            ("docker", "/custom/docker.sock"),
            ("docker", "/var/run/docker.sock"),
            ("docker", "/run/user/7/docker.sock"),
            ("containerd", "/run/containerd/containerd.sock"),
            ("podman", "/run/user/7/podman/podman.sock"),
            ("dbus", "/run/user/7/dbus"),
            ("dbus", "/run/user/7/bus"),
            ("systemd", "/run/user/7/systemd/private"),
            ("ssh-agent", "/tmp/ssh-x/agent.1"),
        ] {
            assert!(
                got.contains(&(name, PathBuf::from(path))),
                "{name} {path}: {got:?}"
            );
        }
        // a TCP CONTAINER_HOST is no socket file
        assert!(!got.iter().any(|(_, p)| p.starts_with("tcp:")), "{got:?}");
    }
}
