//! `network:` resolved for a run: the gateway's allow-list ([`crate::gateway::Network`])
//! and how the sandbox enforces it ([`crate::sandbox::Enforce`]), checked at the
//! file's line ([`check_file`]) and carried in the plan, so that a matrix job filters
//! and pins as the plan job read it.

use serde::{Deserialize, Serialize};

use crate::config::error::key;
use crate::config::{ConfigFile, KeySeg, NetworkDef, Problem};
use crate::gateway::Network;
use crate::sandbox::Enforce;

/// A run's network, as the plan carries it. The default: only the providers' API
/// hosts, enforced where the kernel can.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkPlan {
    /// `network: open`: no filter.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open: bool,
    /// Hosts and presets allowed besides the providers' API hosts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Pin workers to the gateway where the kernel can (`auto`) or refuse to run
    /// without (`required`).
    #[serde(default, skip_serializing_if = "Enforce::is_auto")]
    pub enforce: Enforce,
}

impl NetworkPlan {
    /// From the file's `network:` (checked by [`check_file`]).
    pub fn of(file: &ConfigFile) -> NetworkPlan {
        match &file.network {
            None => NetworkPlan::default(),
            Some(NetworkDef::Open(_)) => NetworkPlan {
                open: true,
                ..NetworkPlan::default()
            },
            Some(NetworkDef::Allow(spec)) => NetworkPlan {
                open: false,
                allow: spec.allow.iter().map(|a| a.trim().to_owned()).collect(),
                enforce: spec.enforce,
            },
        }
    }

    /// What the gateway's proxy lets through.
    pub fn network(&self) -> Network {
        if self.open {
            Network::Open
        } else {
            Network::Allow(self.allow.clone())
        }
    }

    /// Whether this is the default, for `skip_serializing_if`.
    pub fn is_default(&self) -> bool {
        *self == NetworkPlan::default()
    }
}

/// Each `network.allow` entry is a preset or a host pattern; the problem is located
/// at the entry.
pub fn check_file(file: &ConfigFile) -> Result<(), Problem> {
    let Some(NetworkDef::Allow(spec)) = &file.network else {
        return Ok(());
    };
    for (i, entry) in spec.allow.iter().enumerate() {
        crate::gateway::check_allow_entry(entry).map_err(|e| {
            Problem::at(vec![key("network"), key("allow"), KeySeg::Index(i)], e).in_value()
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn plan_of(text: &str) -> NetworkPlan {
        NetworkPlan::of(&crate::config::parse(text, Path::new("f.yml")).unwrap())
    }

    #[test]
    fn the_file_becomes_the_gateways_network() {
        assert_eq!(plan_of("tasks: [a]\n").network(), Network::Allow(vec![]));
        assert!(plan_of("tasks: [a]\n").is_default());
        let open = plan_of("network: open\n");
        assert_eq!(
            (open.network(), open.enforce),
            (Network::Open, Enforce::Auto)
        );
        let listed = plan_of("network: {allow: [npm, ' a.example.com'], enforce: required}\n");
        assert_eq!(
            listed.network(),
            Network::Allow(vec!["npm".into(), "a.example.com".into()])
        );
        assert_eq!(listed.enforce, Enforce::Required);
        let json = serde_json::to_string(&listed).unwrap();
        assert_eq!(
            serde_json::from_str::<NetworkPlan>(&json).unwrap(),
            listed,
            "{json}"
        );
        assert_eq!(
            serde_json::to_string(&NetworkPlan::default()).unwrap(),
            "{}"
        );
    }
}
