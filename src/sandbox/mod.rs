//! The agent sandbox: what the kernel offers, what the user asked for, and
//! the confinement of one process — a leaf every stage may use.
//!
//! - [`Mode`]: `sandbox: auto|required|off` in `fanout.yml` (`--sandbox` on `run`,
//!   `plan`, `worker`); `auto` by default.
//! - [`probe`]: Linux's Landlock and its ABI version (`landlock_create_ruleset` with
//!   `LANDLOCK_CREATE_RULESET_VERSION`), lowered by `FANOUT_LANDLOCK_MAX_ABI` (a testing
//!   knob that can only downgrade); [`decide`] turns a mode and the probe into the ABI
//!   a run confines its processes with, or a refusal (`required` where the kernel has
//!   less than [`REQUIRED_ABI`]), or a notice (`auto` without Landlock);
//!   [`network_support`]: what the kernel can enforce of a closed network;
//!   [`decide_network`]: with `network.enforce:` ([`Enforce`]), whether a run's
//!   workers are pinned to the gateway ([`NetPolicy::pinned`]), or a refusal, or a
//!   notice that the network is unconfined.
//! - [`Policy`]: what one confined process may write, what it may not read
//!   ([`hidden`]: the user's credentials by default), and, with a [`NetPolicy`], which
//!   network it reaches.
//! - [`prepare`] and [`Restrictions::apply`]: fanout builds the policy's Landlock ruleset
//!   (handling every file-system right of the ABI; from ABI 6, scoping signals and
//!   abstract unix sockets to the sandbox; with a [`NetPolicy`], TCP `bind` and
//!   `connect` by port) and its socket filter (`seccomp.rs`: no Unix, raw, netlink or
//!   packet socket, no io_uring, and with a [`NetPolicy`] no UDP when
//!   [`NetPolicy::deny_udp`] says so; denied calls fail with `EPERM`) in its own
//!   process; the child of every agent, setup command and check applies both between
//!   fork and exec — after `setsid`, it drops every capability when fanout has any
//!   (root), sets `no_new_privs`, restricts itself and installs the filter — then
//!   executes the program. Without the sandbox (policy ABI 0) it only drops a root
//!   fanout's capabilities: root could otherwise read fanout's memory, token included.
//! - [`sockets`]: the Unix sockets that hand out root or the user's session (Docker,
//!   containerd, podman, D-Bus, systemd, ssh-agent), for `fanout sandbox`;
//!   [`agents_refused`]: whether a process confined as an agent connects to them.
//!
//! **The network API** (for the per-run gateway, issue #31): set
//! [`Policy::network`] to `Some(NetPolicy { connect_ports, bind_ports, deny_udp })` —
//! [`NetPolicy::pinned`]: the gateway's port and the worker's `ports:` in
//! `connect_ports`, the worker's `ports:` in `bind_ports`, `deny_udp: true` — and a
//! confined process connects over
//! TCP only to those ports (`EACCES` otherwise), binds only those, and makes no UDP
//! socket (`EPERM`). `None` is the open network. [`prepare`] refuses a `NetPolicy`
//! below [`NET_ABI`]; [`network_support`] says up front whether this kernel can
//! enforce one. Landlock's rules name ports, not addresses: an allowed port is allowed
//! on every address.
//!
//! ABI levels: 1 (Linux 5.13) handles the basic rights but refuses every rename or
//! link across directories, which git needs to store an object, so fanout confines
//! nothing below [`MIN_ABI`] = 2 (5.19, `Refer`); `required` needs [`REQUIRED_ABI`] = 3
//! (6.2, `Truncate`): below it a confined process may still truncate any file its user
//! can write — outside the worktree, user data would be lost. 4 adds network rules
//! (used with a [`NetPolicy`]), 5 device ioctls (handled: closes terminal injection
//! with `TIOCSTI`), 6 signal and abstract-socket scoping (used: an agent cannot signal
//! fanout or any process outside its sandbox), 9 connecting to socket files (handled:
//! only beneath the paths a process may write; the socket filter denies Unix sockets
//! at every ABI anyway).

pub mod hidden;
#[cfg(target_os = "linux")]
mod landlock;
mod network;
mod policy;
#[cfg(target_os = "linux")]
mod seccomp;
pub mod sockets;

pub use network::{Enforce, NetDecision, NetworkSupport, decide_network};
pub use policy::{NET_ABI, NetPolicy, Policy};

use serde::{Deserialize, Serialize};

/// The lowest Landlock ABI fanout confines with (`auto`).
pub const MIN_ABI: u8 = 2;
/// The lowest Landlock ABI `sandbox: required` accepts.
pub const REQUIRED_ABI: u8 = 3;
/// The environment variable that lowers the ABI fanout uses (testing knob; it never
/// raises it).
pub const MAX_ABI_VAR: &str = "FANOUT_LANDLOCK_MAX_ABI";

/// `sandbox:` in `fanout.yml`, `--sandbox` on the command line.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Confine agents where the kernel has Landlock (ABI 2 or later); elsewhere run them
    /// unconfined and say so.
    #[default]
    Auto,
    /// Confine agents; refuse to run (exit 2, before anything is made) where the kernel
    /// lacks Landlock ABI 3.
    Required,
    /// Never confine agents.
    Off,
}

impl Mode {
    /// `auto`, `required`, `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Required => "required",
            Mode::Off => "off",
        }
    }

    /// Whether this is the default (`auto`), for `skip_serializing_if`.
    pub fn is_auto(&self) -> bool {
        *self == Mode::Auto
    }
}

/// What the kernel offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// The Landlock ABI fanout may use: the kernel's, capped by what fanout knows and
    /// by [`MAX_ABI_VAR`]; `None` when there is none.
    pub abi: Option<u8>,
    /// The kernel's own ABI, when it has Landlock.
    pub kernel_abi: Option<u8>,
    /// Why there is no Landlock, or why the ABI is lower than the kernel's.
    pub note: Option<String>,
}

/// Probe the kernel (and [`MAX_ABI_VAR`]).
pub fn probe() -> Probe {
    let kernel = kernel_abi();
    let cap = std::env::var(MAX_ABI_VAR).ok();
    cap_probe(kernel, cap.as_deref())
}

#[cfg(target_os = "linux")]
fn kernel_abi() -> Result<u8, String> {
    landlock::kernel_abi()
}

#[cfg(not(target_os = "linux"))]
fn kernel_abi() -> Result<u8, String> {
    Err("Landlock is a Linux feature; this system has no sandbox fanout can use".into())
}

/// The highest ABI this build of fanout knows how to use.
pub const KNOWN_ABI: u8 = 10;

/// [`probe`]'s arithmetic: the kernel's answer, capped by fanout and the knob.
fn cap_probe(kernel: Result<u8, String>, cap: Option<&str>) -> Probe {
    let kernel = match kernel {
        Ok(v) => v,
        Err(why) => {
            return Probe {
                abi: None,
                kernel_abi: None,
                note: Some(why),
            };
        }
    };
    let mut abi = kernel.min(KNOWN_ABI);
    let mut note = None;
    match cap.map(|c| (c, c.trim().parse::<u8>())) {
        None => {}
        Some((_, Ok(max))) if max < abi => {
            abi = max;
            note = Some(format!(
                "{MAX_ABI_VAR}={max} lowers the kernel's ABI {kernel}"
            ));
        }
        Some((_, Ok(_))) => {}
        Some((given, Err(_))) => {
            note = Some(format!("{MAX_ABI_VAR}={given:?} is not a number (ignored)"));
        }
    }
    Probe {
        abi: (abi > 0).then_some(abi),
        kernel_abi: Some(kernel),
        note: if abi == 0 {
            Some(format!("{MAX_ABI_VAR}=0: Landlock treated as missing"))
        } else {
            note
        },
    }
}

/// How a run confines its agents: the ABI to use (`None`: unconfined), and a notice
/// to show once (on stderr and in the summary) when that is not what the user may expect.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// The Landlock ABI every confined process of the run uses.
    pub abi: Option<u8>,
    /// Said once: why agents run unconfined under `auto`, or what a low ABI leaves open.
    pub notice: Option<String>,
    /// Whether workers are pinned to the gateway (`network:`); set by the run with
    /// [`decide_network`] once the sandbox is decided.
    pub network: NetDecision,
}

impl Decision {
    /// The sandbox's notice and the network's, as one text (for the summary).
    pub fn notices(&self) -> Option<String> {
        match (&self.notice, &self.network.notice) {
            (Some(s), Some(n)) => Some(format!("{s}. {n}")),
            (s, n) => s.clone().or_else(|| n.clone()),
        }
    }
}

/// Decide for `mode` with what the kernel offers; an error (for `required`) says why
/// the run cannot start.
pub fn decide(mode: Mode, probe: &Probe) -> Result<Decision, String> {
    let why = || {
        let note = probe.note.as_deref();
        match (probe.abi, probe.kernel_abi, note) {
            (None, None, Some(n)) => n.to_owned(),
            (None, None, None) => "the kernel has no Landlock".to_owned(),
            (Some(a), _, None) => format!("Landlock ABI {a} is available"),
            (Some(a), _, Some(n)) => format!("Landlock ABI {a} is available ({n})"),
            (None, Some(_), n) => format!("Landlock is not usable ({})", n.unwrap_or("?")),
        }
    };
    match (mode, probe.abi) {
        (Mode::Off, _) => Ok(Decision::default()),
        (Mode::Required, Some(a)) if a >= REQUIRED_ABI => Ok(Decision {
            abi: Some(a),
            notice: None,
            ..Decision::default()
        }),
        (Mode::Required, _) => Err(format!(
            "sandbox: required, but {}; fanout needs Landlock ABI {REQUIRED_ABI} (Linux 6.2) or later to confine agents. Run with `sandbox: auto` (or --sandbox auto) to go on without it",
            why()
        )),
        (Mode::Auto, Some(a)) if a >= REQUIRED_ABI => Ok(Decision {
            abi: Some(a),
            notice: None,
            ..Decision::default()
        }),
        (Mode::Auto, Some(a)) if a >= MIN_ABI => Ok(Decision {
            abi: Some(a),
            notice: Some(format!(
                "sandbox: Landlock ABI {a}: agents are confined, but may still truncate files outside their worktree (that needs ABI {REQUIRED_ABI}, Linux 6.2)"
            )),
            ..Decision::default()
        }),
        (Mode::Auto, _) => Ok(Decision {
            abi: None,
            notice: Some(format!(
                "sandbox: {}; agents run WITHOUT a sandbox (fanout needs Landlock ABI {MIN_ABI}, Linux 5.19, or later). Set `sandbox: off` to silence this, or `sandbox: required` to refuse to run",
                why()
            )),
            ..Decision::default()
        }),
    }
}

/// What the kernel can enforce of a closed network, with `probe`'s ABI.
pub fn network_support(probe: &Probe) -> NetworkSupport {
    NetworkSupport {
        tcp_ports: probe.abi.is_some_and(|a| a >= NET_ABI),
        socket_filter: socket_filter_available(),
    }
}

#[cfg(target_os = "linux")]
fn socket_filter_available() -> bool {
    seccomp::available()
}

#[cfg(not(target_os = "linux"))]
fn socket_filter_available() -> bool {
    false
}

/// A confinement made ready in fanout's own process (the Landlock ruleset with every
/// rule), to apply in a child between fork and exec with [`Restrictions::apply`].
#[cfg(target_os = "linux")]
pub use landlock::Restrictions;

/// Off Linux there is nothing to apply.
#[cfg(not(target_os = "linux"))]
#[derive(Debug, Clone)]
pub struct Restrictions;

#[cfg(not(target_os = "linux"))]
impl Restrictions {
    /// Nothing to do.
    pub fn apply(&self) -> std::io::Result<()> {
        Ok(())
    }

    /// Unconfined: whatever this process reaches.
    pub fn connect_unix(&self, path: &std::path::Path) -> std::io::Result<()> {
        let addr = nix::sys::socket::UnixAddr::new(path)?;
        sockets::connect(&addr).map_err(std::io::Error::from)
    }
}

/// Make `policy` ready for a child to apply (see [`Restrictions`]); the error says what
/// could not be set up.
pub fn prepare(policy: &Policy) -> Result<Restrictions, String> {
    #[cfg(target_os = "linux")]
    {
        landlock::prepare(policy).map_err(|e| format!("Landlock: {e}"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        match policy.abi {
            0 => Ok(Restrictions),
            _ => Err("Landlock is a Linux feature".into()),
        }
    }
}

/// For each of `found`, why a process confined as an agent would be at Landlock ABI
/// `abi` (`None`: agents run unconfined) could not connect to it (`None`: it
/// connects). Confined, each is tried from a child that applies an agent's sandbox
/// (the hidden paths included) first.
pub fn agents_refused(found: &[sockets::Found], abi: Option<u8>) -> Vec<Option<String>> {
    let Some(abi) = abi else {
        return found.iter().map(|f| f.you_refused.clone()).collect();
    };
    let policy = Policy {
        abi,
        write_files: vec!["/dev/null".into()],
        hide: (hidden::credentials().into_iter())
            .filter(|h| hidden::exists(h))
            .collect(),
        ..Default::default()
    };
    match prepare(&policy) {
        Err(e) => vec![Some(format!("no sandbox could be made: {e}")); found.len()],
        Ok(p) => (found.iter())
            .map(|f| p.connect_unix(&f.path).err().map(|e| e.to_string()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(kernel: Result<u8, &str>, cap: Option<&str>) -> Probe {
        cap_probe(kernel.map_err(str::to_owned), cap)
    }

    #[test]
    fn the_knob_only_lowers_the_abi() {
        assert_eq!(p(Ok(7), None).abi, Some(7));
        assert_eq!(p(Ok(7), Some("3")).abi, Some(3));
        assert!(p(Ok(7), Some("3")).note.unwrap().contains("=3"));
        assert_eq!(p(Ok(4), Some("9")).abi, Some(4));
        assert_eq!(p(Ok(4), Some("9")).note, None);
        assert_eq!(p(Ok(12), None).abi, Some(KNOWN_ABI));
        assert_eq!(p(Ok(12), None).kernel_abi, Some(12));
        assert_eq!(p(Ok(7), Some("0")).abi, None);
        assert_eq!(p(Ok(7), Some("x")).abi, Some(7));
        assert!(p(Ok(7), Some("x")).note.unwrap().contains("not a number"));
        let none = p(Err("ENOSYS"), Some("3"));
        assert_eq!((none.abi, none.note.as_deref()), (None, Some("ENOSYS")));
    }

    #[test]
    fn decisions_by_mode_and_abi() {
        let at = |abi: Option<u8>| Probe {
            abi,
            kernel_abi: abi,
            note: None,
        };
        for mode in [Mode::Auto, Mode::Required, Mode::Off] {
            let d = decide(mode, &at(Some(7)));
            let want = if mode == Mode::Off { None } else { Some(7) };
            assert_eq!(d.unwrap().abi, want, "{mode:?}");
        }
        let e = decide(Mode::Required, &at(Some(2))).unwrap_err();
        assert!(
            e.contains("Landlock ABI 2 is available") && e.contains("ABI 3"),
            "{e}"
        );
        let e = decide(Mode::Required, &at(None)).unwrap_err();
        assert!(e.contains("no Landlock"), "{e}");
        let missing = p(Err("the kernel has no Landlock (ENOSYS)"), None);
        let e = decide(Mode::Required, &missing).unwrap_err();
        assert!(
            e.starts_with("sandbox: required, but the kernel has no Landlock (ENOSYS);"),
            "{e}"
        );
        let d = decide(Mode::Auto, &at(Some(2))).unwrap();
        assert_eq!(d.abi, Some(2));
        assert!(d.notice.unwrap().contains("truncate"));
        let d = decide(Mode::Auto, &at(Some(1))).unwrap();
        assert_eq!(d.abi, None);
        assert!(d.notice.unwrap().contains("WITHOUT a sandbox"));
        assert_eq!(decide(Mode::Off, &at(None)).unwrap(), Decision::default());
    }
}
