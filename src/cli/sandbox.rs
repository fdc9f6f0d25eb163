//! `fanout sandbox`: which sandbox this machine gives agents — Landlock's ABI, what
//! `sandbox: auto` and `sandbox: required` do here, what the kernel can enforce of a
//! closed network and what `network.enforce: auto` and `required` do with it, and the root-equivalent sockets found and whether agents reach
//! them — for people and for the Action's self-test.

use clap::Args;

use super::common::CliError;
use crate::sandbox::{self, Enforce, Mode, sockets};
use crate::util::out::outln;

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # Landlock's ABI here, what `sandbox: auto` and `sandbox: required` would do, and
  # whether agents can be pinned to the gateway (`network.enforce`), and
  # which daemon sockets (docker, podman, D-Bus, ssh-agent…) you and agents can reach
  fanout sandbox
  # The same as JSON, for a script or a CI step
  fanout sandbox --json | jq .landlock_abi";

/// `fanout sandbox`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
pub struct SandboxArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Entry point of `fanout sandbox`.
pub fn sandbox(args: &SandboxArgs) -> Result<i32, CliError> {
    let probe = sandbox::probe();
    let auto = sandbox::decide(Mode::Auto, &probe).expect("auto never refuses");
    let required = sandbox::decide(Mode::Required, &probe);
    let network = sandbox::network_support(&probe);
    let pin = |enforce| sandbox::decide_network(enforce, false, auto.abi, network);
    let (net_auto, net_required) = (pin(Enforce::Auto), pin(Enforce::Required));
    let found = sockets::find();
    let agents = sandbox::agents_refused(&found, auto.abi);
    if args.json {
        let sockets: Vec<serde_json::Value> = (found.iter().zip(&agents))
            .map(|(f, a)| {
                let mut v = serde_json::to_value(f).expect("serializes");
                v["agents_refused"] = serde_json::json!(a);
                v
            })
            .collect();
        let v = serde_json::json!({
            "landlock_abi": probe.abi,
            "kernel_abi": probe.kernel_abi,
            "note": probe.note,
            "auto": {"confined": auto.abi.is_some(), "abi": auto.abi, "notice": auto.notice},
            "required": {"ok": required.is_ok(), "error": required.as_ref().err()},
            "network": {
                "tcp_ports": network.tcp_ports,
                "socket_filter": network.socket_filter,
                "closed_network": network.closed_network(),
                "auto": {
                    "pinned": net_auto.as_ref().is_ok_and(|d| d.pinned),
                    "notice": net_auto.as_ref().ok().and_then(|d| d.notice.clone()),
                },
                "required": {"ok": net_required.is_ok(), "error": net_required.as_ref().err()},
            },
            "sockets": sockets,
        });
        crate::util::out::stdout_json(&v);
        return Ok(0);
    }
    match (probe.abi, probe.kernel_abi) {
        (Some(a), Some(k)) if a == k => outln!("Landlock: ABI {a}"),
        (Some(a), Some(k)) => outln!("Landlock: ABI {a} (the kernel's: {k})"),
        _ => outln!("Landlock: unavailable"),
    }
    if let Some(n) = &probe.note {
        outln!("  {n}");
    }
    match auto.abi {
        Some(a) => outln!("sandbox: auto     → agents confined (Landlock ABI {a})"),
        None => outln!("sandbox: auto     → agents run WITHOUT a sandbox"),
    }
    match &required {
        Ok(_) => outln!("sandbox: required → agents confined"),
        Err(_) => outln!("sandbox: required → fanout refuses to run (exit 2)"),
    }
    let yes = |b: bool| if b { "yes" } else { "no" };
    outln!(
        "network: TCP connect/bind by port (Landlock ABI {}+): {}; socket filter (seccomp): {} → a closed network {} be enforced",
        sandbox::NET_ABI,
        yes(network.tcp_ports),
        yes(network.socket_filter),
        if network.closed_network() {
            "can"
        } else {
            "cannot"
        }
    );
    if net_auto.is_ok_and(|d| d.pinned) {
        outln!(
            "network: enforce: auto     → agents pinned to the gateway (TCP to its port and their ports: only, no UDP)"
        );
    } else {
        outln!("network: enforce: auto     → the gateway's proxy alone: the network is UNCONFINED");
    }
    match &net_required {
        Ok(_) => outln!("network: enforce: required → agents pinned to the gateway"),
        Err(_) => outln!("network: enforce: required → fanout refuses to run (exit 2)"),
    }
    print_sockets(&found, &agents);
    Ok(0)
}

/// The sockets found, who may connect, and whether agents do.
fn print_sockets(found: &[sockets::Found], agents: &[Option<String>]) {
    if found.is_empty() {
        outln!("sockets: no docker, containerd, podman, D-Bus, systemd or ssh-agent socket found");
        return;
    }
    outln!("sockets that give more than an agent should have:");
    for (f, agents) in found.iter().zip(agents) {
        outln!(
            "  {} {} ({} {}:{}): {}",
            f.name,
            f.path.display(),
            f.mode,
            f.owner,
            f.group,
            f.gives
        );
        let you = match (&f.you_refused, &f.permits_you) {
            (None, Some(via)) => format!("you connect ({via})"),
            (None, None) => "you connect".to_owned(),
            (Some(e), _) => format!("you cannot connect ({e})"),
        };
        let agents = match agents {
            None => "agents CAN connect".to_owned(),
            Some(e) => format!("agents cannot ({e})"),
        };
        outln!("    {you}; {agents}");
    }
}
