//! How each adapter's CLI is pointed at the run's gateway: by the CLI's own setting
//! for its provider's base URL, with the worker's placeholder key where the CLI reads
//! its API key. The gateway adds the real key; no agent ever has it.
//!
//! - claude: `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`.
//! - codex: a provider of its own on the command line (`-c model_provider=fanout`,
//!   `-c model_providers.fanout={…base_url…, env_key="OPENAI_API_KEY"}`: codex reads
//!   no base URL from the environment), `OPENAI_API_KEY`.
//! - aider (litellm): `OPENAI_API_BASE`, `OPENAI_BASE_URL`, `OPENAI_API_KEY`,
//!   `ANTHROPIC_API_BASE`, `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`.
//! - architect (litellm): the same, and `ARCHITECT_API_BASE`.
//! - command: only with `gateway: {base_url_env, key_env, provider}` in its definition.
//!
//! A provider the gateway does not hold (no key in fanout's environment) gets no
//! variable: the CLI is left as it is, logged in by itself. One it holds: the login
//! the adapter seeded into the CLI's private configuration is removed
//! ([`drop_login`]).

use std::collections::BTreeMap;

use super::{AgentSpec, CommandLine, WorkerContext};
use crate::config::AdapterKind;

/// What the gateway gives a worker's agent for model calls (borrowed from the
/// worker's credential in the gateway).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelDoor<'a> {
    /// Each provider's base URL through the gateway, by name (`anthropic`, `openai`).
    pub base_urls: &'a BTreeMap<String, String>,
    /// The worker's placeholder key.
    pub key: &'a str,
}

/// `cmd` (built for `spec`) pointed at the gateway through `door`: the variables set
/// last (they win over the definition's `env:`), codex's provider before its
/// subcommand.
pub fn route_through(spec: &AgentSpec, door: ModelDoor<'_>, cmd: &mut CommandLine) {
    let url = |p: &str| door.base_urls.get(p).cloned();
    let (anthropic, openai) = (url("anthropic"), url("openai"));
    let mut set = |k: &str, v: &str| {
        cmd.env.retain(|(name, _)| name != k);
        cmd.env.push((k.to_owned(), v.to_owned()));
    };
    match spec.adapter {
        AdapterKind::Claude => {
            if let Some(u) = &anthropic {
                set("ANTHROPIC_BASE_URL", u);
                set("ANTHROPIC_API_KEY", door.key);
            }
        }
        AdapterKind::Codex => {
            if let Some(u) = &openai {
                set("OPENAI_API_KEY", door.key);
                let provider = format!(
                    "model_providers.fanout={{name=\"fanout\",base_url=\"{u}\",env_key=\"OPENAI_API_KEY\",wire_api=\"responses\"}}"
                );
                let head = ["-c", "model_provider=\"fanout\"", "-c", provider.as_str()];
                cmd.args.splice(0..0, head.map(str::to_owned));
            }
        }
        AdapterKind::Aider | AdapterKind::Architect => {
            if let Some(u) = &openai {
                for k in ["OPENAI_API_BASE", "OPENAI_BASE_URL"] {
                    set(k, u);
                }
                if spec.adapter == AdapterKind::Architect {
                    set("ARCHITECT_API_BASE", u);
                }
                set("OPENAI_API_KEY", door.key);
            }
            if let Some(u) = &anthropic {
                for k in ["ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"] {
                    set(k, u);
                }
                set("ANTHROPIC_API_KEY", door.key);
            }
        }
        AdapterKind::Command => {
            if let Some(g) = &spec.gateway
                && let Some(u) = url(&g.provider)
            {
                set(&g.base_url_env, &u);
                set(&g.key_env, door.key);
            }
        }
    }
}

/// Remove the user's login from the private configuration the adapter seeded for
/// `ctx` when `door` holds its CLI's provider (Claude Code's `.credentials.json` and
/// the `primaryApiKey` of its `.claude.json` for Anthropic, Codex's `auth.json` for
/// OpenAI): the CLI calls the door with the placeholder key, and its agents have no
/// login to use past the gateway. Left as it is when the definition's `env:` moves the
/// configuration directory.
pub fn drop_login(
    spec: &AgentSpec,
    door: ModelDoor<'_>,
    ctx: &WorkerContext<'_>,
) -> std::io::Result<()> {
    let held = |p: &str| door.base_urls.contains_key(p);
    match spec.adapter {
        AdapterKind::Claude if held("anthropic") && !spec.env.contains_key("CLAUDE_CONFIG_DIR") => {
            remove(&super::claude::login_file(ctx))?;
            super::claude::drop_stored_key(ctx)
        }
        AdapterKind::Codex if held("openai") && !spec.env.contains_key("CODEX_HOME") => {
            remove(&super::codex::login_file(ctx))
        }
        _ => Ok(()),
    }
}

fn remove(file: &std::path::Path) -> std::io::Result<()> {
    match std::fs::remove_file(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        done => done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("anthropic".into(), "http://127.0.0.1:9/anthropic".into()),
            ("openai".into(), "http://127.0.0.1:9/openai/v1".into()),
        ])
    }

    fn door(base_urls: &BTreeMap<String, String>) -> ModelDoor<'_> {
        ModelDoor {
            base_urls,
            key: "fanout-gateway-w1-x",
        }
    }

    fn routed(name: &str, env: &[(&str, &str)]) -> CommandLine {
        let spec = AgentSpec::resolve(name, &BTreeMap::new(), "fanout.yml", true).unwrap();
        let mut cmd = CommandLine {
            program: spec.program.clone(),
            args: vec!["exec".into()],
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        };
        route_through(&spec, door(&urls()), &mut cmd);
        cmd
    }

    fn var<'a>(cmd: &'a CommandLine, k: &str) -> Option<&'a str> {
        let mut found = cmd.env.iter().filter(|(n, _)| n == k);
        let v = found.next().map(|(_, v)| v.as_str());
        assert!(found.next().is_none(), "{k} set twice");
        v
    }

    #[test]
    fn each_cli_gets_the_gateway_by_its_own_setting_and_the_placeholder_wins() {
        let c = routed("claude", &[("ANTHROPIC_API_KEY", "from-env-config")]);
        assert_eq!(
            var(&c, "ANTHROPIC_BASE_URL"),
            Some("http://127.0.0.1:9/anthropic")
        );
        assert_eq!(var(&c, "ANTHROPIC_API_KEY"), Some("fanout-gateway-w1-x"));
        let c = routed("codex", &[]);
        assert_eq!(var(&c, "OPENAI_API_KEY"), Some("fanout-gateway-w1-x"));
        assert_eq!(c.args[..2], ["-c", "model_provider=\"fanout\""]);
        assert!(c.args[3].contains("base_url=\"http://127.0.0.1:9/openai/v1\""));
        assert_eq!(c.args[4], "exec");
        let a = routed("aider", &[]);
        assert_eq!(
            var(&a, "OPENAI_API_BASE"),
            Some("http://127.0.0.1:9/openai/v1")
        );
        assert_eq!(var(&a, "ANTHROPIC_API_KEY"), Some("fanout-gateway-w1-x"));
        let a = routed("architect", &[]);
        assert_eq!(
            var(&a, "ARCHITECT_API_BASE"),
            Some("http://127.0.0.1:9/openai/v1")
        );
    }

    fn context(dir: &std::path::Path) -> WorkerContext<'_> {
        WorkerContext {
            sandboxed: true,
            ..WorkerContext::for_test(dir)
        }
    }

    #[test]
    fn the_seeded_login_is_dropped_only_for_a_provider_the_door_holds() {
        let d = tempfile::tempdir().unwrap();
        let ctx = context(d.path());
        let openai = BTreeMap::from([("openai".into(), "http://127.0.0.1:9/openai/v1".into())]);
        let (none, both) = (BTreeMap::new(), urls());
        for (cli, file) in [
            ("claude", "claude/.credentials.json"),
            ("codex", "codex/auth.json"),
        ] {
            let spec = AgentSpec::resolve(cli, &BTreeMap::new(), "fanout.yml", true).unwrap();
            let login = d.path().join(file);
            std::fs::create_dir_all(login.parent().unwrap()).unwrap();
            std::fs::write(&login, "{}").unwrap();
            drop_login(&spec, door(&none), &ctx).unwrap();
            assert!(login.exists(), "{cli}: no provider held");
            drop_login(&spec, door(&openai), &ctx).unwrap();
            assert_eq!(login.exists(), cli == "claude", "{cli}: only OpenAI held");
            drop_login(&spec, door(&both), &ctx).unwrap();
            assert!(!login.exists(), "{cli}: both held");
            drop_login(&spec, door(&both), &ctx).unwrap();
        }
    }

    #[test]
    fn claude_codes_stored_api_key_is_dropped_from_the_private_state_file_when_anthropic_is_held() {
        let d = tempfile::tempdir().unwrap();
        let ctx = context(d.path());
        let spec = AgentSpec::resolve("claude", &BTreeMap::new(), "fanout.yml", true).unwrap();
        let state = d.path().join("claude/.claude.json");
        std::fs::create_dir_all(state.parent().unwrap()).unwrap();
        let seeded = r#"{"primaryApiKey": "sk-ant-real", "numStartups": 7}"#;
        std::fs::write(&state, seeded).unwrap();
        let openai = BTreeMap::from([("openai".into(), "http://127.0.0.1:9/openai/v1".into())]);
        drop_login(&spec, door(&openai), &ctx).unwrap();
        assert_eq!(std::fs::read_to_string(&state).unwrap(), seeded);
        drop_login(&spec, door(&urls()), &ctx).unwrap();
        let kept: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
        assert_eq!(kept, serde_json::json!({"numStartups": 7}));
        // a state file that is not a JSON object cannot be shown to hold no key
        std::fs::write(&state, "primaryApiKey: sk-ant-real").unwrap();
        drop_login(&spec, door(&urls()), &ctx).unwrap();
        assert!(!state.exists());
    }

    #[test]
    fn a_command_agent_gets_the_gateway_only_when_it_opts_in() {
        let yaml = "command: [run]\ngateway: {base_url_env: MY_URL, key_env: MY_KEY, provider: anthropic}\n";
        let def: crate::config::AgentDef = serde_saphyr::from_str(yaml).unwrap();
        let defs = BTreeMap::from([("mine".to_owned(), def.clone())]);
        let spec = AgentSpec::resolve("mine", &defs, "fanout.yml", true).unwrap();
        let mut cmd = CommandLine {
            program: "run".into(),
            args: Vec::new(),
            env: Vec::new(),
        };
        route_through(&spec, door(&urls()), &mut cmd);
        assert_eq!(var(&cmd, "MY_URL"), Some("http://127.0.0.1:9/anthropic"));
        assert_eq!(var(&cmd, "MY_KEY"), Some("fanout-gateway-w1-x"));
        let plain = AgentSpec {
            gateway: None,
            ..spec
        };
        let mut cmd = CommandLine {
            program: "run".into(),
            args: Vec::new(),
            env: Vec::new(),
        };
        route_through(&plain, door(&urls()), &mut cmd);
        assert!(cmd.env.is_empty());
    }
}
