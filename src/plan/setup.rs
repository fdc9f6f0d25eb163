//! The setup part of a plan ([`SetupPlan`]): what each new worktree gets before its
//! agent starts — files copied (`copy:` globs), `setup:` commands, submodules, a block
//! of ports — resolved from `fanout.yml`. Portable: globs and commands, no paths of
//! this machine. Running it is [`crate::run::setup`]'s job.

use serde::{Deserialize, Serialize};

use crate::config::{ConfigFile, SetupDef};

/// Seconds a setup command may run by default.
pub const DEFAULT_TIMEOUT: f64 = 300.0;
/// First port of the first block, unless `ports.base` says otherwise.
pub const DEFAULT_PORT_BASE: u16 = 20000;
/// Ports per worker, unless `ports.block` says otherwise.
pub const DEFAULT_PORT_BLOCK: u16 = 10;

/// The setup part of a plan: portable (globs and commands, no paths of this machine).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SetupPlan {
    /// `copy:` globs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copy: Vec<String>,
    /// `setup:` commands, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<SetupCommand>,
    /// `submodules:`; `None` means "when the base has a `.gitmodules`".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submodules: Option<bool>,
    /// Port blocks.
    #[serde(default, skip_serializing_if = "PortsPlan::is_default")]
    pub ports: PortsPlan,
}

impl SetupPlan {
    /// Nothing configured (the plan leaves the key out).
    pub fn is_default(&self) -> bool {
        *self == SetupPlan::default()
    }

    /// From the config file; `origin` names it in errors.
    pub fn resolve(file: &ConfigFile, origin: &str) -> Result<SetupPlan, String> {
        let commands = file
            .setup
            .iter()
            .map(|s| {
                let (run, timeout) = match s {
                    SetupDef::Command(r) => (r.clone(), None),
                    SetupDef::Detailed(d) => (d.run.clone(), d.timeout.map(|t| t.0)),
                };
                SetupCommand {
                    run,
                    timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
                }
            })
            .collect();
        let ports = match &file.ports {
            None => PortsPlan::default(),
            Some(p) => {
                let base = p.base.unwrap_or(DEFAULT_PORT_BASE);
                let block = p.block.unwrap_or(DEFAULT_PORT_BLOCK);
                if base == 0 || block == 0 || u32::from(base) + u32::from(block) - 1 > 65535 {
                    return Err(format!(
                        "{origin}: ports: a block of {block} ports from {base} does not fit in 1–65535"
                    ));
                }
                PortsPlan { base, block }
            }
        };
        Ok(SetupPlan {
            copy: file.copy.iter().map(|g| g.0.clone()).collect(),
            commands,
            submodules: file.submodules,
            ports,
        })
    }
}

/// One setup command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetupCommand {
    /// Run with `sh -c` in the worktree.
    pub run: String,
    /// Seconds before it is stopped (and fails its worker).
    pub timeout: f64,
}

/// Where port blocks start and how many ports each has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortsPlan {
    /// First port of the first block.
    pub base: u16,
    /// Ports per worker.
    pub block: u16,
}

impl Default for PortsPlan {
    fn default() -> Self {
        PortsPlan {
            base: DEFAULT_PORT_BASE,
            block: DEFAULT_PORT_BLOCK,
        }
    }
}

impl PortsPlan {
    /// The default blocks (the plan leaves the key out).
    pub fn is_default(&self) -> bool {
        *self == PortsPlan::default()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn resolve(yaml: &str) -> Result<SetupPlan, String> {
        let cfg = crate::config::parse(yaml, Path::new("fanout.yml")).unwrap();
        SetupPlan::resolve(&cfg, "fanout.yml")
    }

    #[test]
    fn plan_from_config() {
        let p = resolve(
            "copy: [.env, 'fixtures/local/']\nsetup:\n  - npm ci\n  - run: make db\n    timeout: 2m\nsubmodules: false\nports: {base: 30000, block: 4}\n",
        )
        .unwrap();
        assert_eq!(p.copy, [".env", "fixtures/local/"]);
        assert_eq!(
            p.commands,
            [
                SetupCommand {
                    run: "npm ci".into(),
                    timeout: DEFAULT_TIMEOUT
                },
                SetupCommand {
                    run: "make db".into(),
                    timeout: 120.0
                }
            ]
        );
        assert_eq!(p.submodules, Some(false));
        assert_eq!(
            p.ports,
            PortsPlan {
                base: 30000,
                block: 4
            }
        );
        assert!(resolve("tasks: [a]\n").unwrap().is_default());
        let e = resolve("ports: {base: 65530, block: 10}\n").unwrap_err();
        assert_eq!(
            e,
            "fanout.yml: ports: a block of 10 ports from 65530 does not fit in 1–65535"
        );
        assert!(resolve("ports: {block: 0}\n").is_err());
    }
}
