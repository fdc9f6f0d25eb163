//! The run's gateway ([`crate::gateway`]) as a run uses it: started from fanout's
//! environment before the first worker, one door per worker, closed after the last.
//!
//! **Providers and keys.** A provider is configured when its key is in fanout's
//! environment: Anthropic's from `ANTHROPIC_API_KEY`, OpenAI's from `OPENAI_API_KEY`
//! ([`KEY_VARS`]). Each goes to the provider's API host, or wherever the user already
//! points the CLIs: `ANTHROPIC_BASE_URL`; `OPENAI_BASE_URL`, else `OPENAI_API_BASE`,
//! else `ARCHITECT_API_BASE` (a trailing `/v1` dropped: the gateway's OpenAI base URL
//! has its own). Those keys
//! then reach no process fanout starts for a worker ([`without_keys`]): agents, setup
//! commands and checks alike; the built-in adapters are pointed at the worker's door
//! with its placeholder key instead ([`crate::agent::door`]).
//!
//! **Every process of a worker** gets the door as its proxy ([`proxy_vars`]):
//! `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and their lower-case forms; `NO_PROXY`
//! names loopback only (a dev server the worker starts stays reachable).
//!
//! **The network the proxy lets through** is, until the run's `network:` says more,
//! the providers' API hosts ([`DEFAULT_HOSTS`]: both, whether or not fanout holds a
//! key, so that a CLI logged in by itself still reaches its provider).
//!
//! The record of a worker's traffic in its result is [`record`].

use std::collections::BTreeMap;
use std::ffi::OsString;

use crate::gateway::{GatewayConfig, Network, Provider, Usage, Wire};
use crate::model::{DeniedTarget, GatewayRecord};
use crate::plan::Plan;

/// The variables that hold a provider's real key, by provider.
pub const KEY_VARS: [(&str, &str); 2] = [
    ("anthropic", "ANTHROPIC_API_KEY"),
    ("openai", "OPENAI_API_KEY"),
];

/// The hosts the proxy lets through by default.
pub const DEFAULT_HOSTS: [&str; 2] = ["api.anthropic.com", "api.openai.com"];

/// What a gateway for `plan` is started with, from `env` (fanout's environment): the
/// providers whose key is set, the plan's prices and `budget_total`.
pub fn for_plan(env: &[(OsString, OsString)], plan: &Plan) -> Result<GatewayConfig, String> {
    let mut prices = BTreeMap::new();
    for a in plan.agents_used() {
        prices.extend(a.prices.clone());
    }
    let mut c = config(env)?;
    c.prices = prices;
    c.budget_total = plan.limits.budget_total;
    Ok(c)
}

/// The providers whose key is in `env`, and the default network. An upstream the
/// gateway refuses names the variable that set it.
pub fn config(env: &[(OsString, OsString)]) -> Result<GatewayConfig, String> {
    let get = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.to_str())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let mut providers = Vec::new();
    for (name, key_var) in KEY_VARS {
        let Some(key) = get(key_var) else { continue };
        let (wire, url_vars, default): (Wire, &[&str], &str) = match name {
            "anthropic" => (
                Wire::Anthropic,
                &["ANTHROPIC_BASE_URL"],
                "https://api.anthropic.com",
            ),
            _ => (
                Wire::OpenAi,
                &["OPENAI_BASE_URL", "OPENAI_API_BASE", "ARCHITECT_API_BASE"],
                "https://api.openai.com",
            ),
        };
        let set = url_vars.iter().find_map(|v| get(v).map(|u| (*v, u)));
        let upstream = match set {
            Some((var, url)) => {
                let url = url.trim_end_matches('/');
                let url = url.strip_suffix("/v1").unwrap_or(url).to_owned();
                check_upstream(var, name, &url)?;
                url
            }
            None => default.to_owned(),
        };
        providers.push(Provider {
            name: name.to_owned(),
            wire,
            upstream,
            key: secrecy::SecretString::from(key.to_owned()),
        });
    }
    Ok(GatewayConfig {
        providers,
        network: Network::Allow(DEFAULT_HOSTS.map(str::to_owned).to_vec()),
        ..GatewayConfig::default()
    })
}

/// Whether the gateway takes `url` (set by `var`) as provider `name`'s upstream,
/// said with the variable's name when it does not.
fn check_upstream(var: &str, name: &str, url: &str) -> Result<(), String> {
    crate::gateway::check_upstream(name, url).map_err(|e| format!("{var}={url}: {e}"))
}

/// `env` less the real keys ([`KEY_VARS`]): what every process of a worker starts
/// from.
pub fn without_keys(env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
    env.into_iter()
        .filter(|(k, _)| !KEY_VARS.iter().any(|(_, v)| k == v))
        .collect()
}

/// The variables that make `proxy_url` the proxy of every process of a worker.
pub fn proxy_vars(proxy_url: &str) -> Vec<(OsString, OsString)> {
    let loopback = "localhost,127.0.0.1,::1";
    [
        ("HTTP_PROXY", proxy_url),
        ("HTTPS_PROXY", proxy_url),
        ("ALL_PROXY", proxy_url),
        ("http_proxy", proxy_url),
        ("https_proxy", proxy_url),
        ("all_proxy", proxy_url),
        ("NO_PROXY", loopback),
        ("no_proxy", loopback),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect()
}

/// A worker's record of what the gateway measured (`usage`), beside the cost its
/// agent claimed (`claimed`).
pub fn record(usage: &Usage, claimed: Option<f64>) -> GatewayRecord {
    let t = usage.tokens;
    let mut r = GatewayRecord {
        requests: usage.requests,
        retries: usage.retries,
        input_tokens: t.input,
        output_tokens: t.output,
        cache_read_tokens: t.cache_read,
        cache_write_tokens: t.cache_write,
        cost: usage.cost,
        unmetered: usage.unmetered,
        unpriced: usage.unpriced,
        refused: usage.refused,
        rate_limit_wait: usage.waited.as_secs_f64(),
        denied_total: usage.denied_total,
        denied: usage
            .denied
            .iter()
            .map(|d| DeniedTarget {
                kind: match d.kind {
                    crate::gateway::Denied::Credential => "credential",
                    crate::gateway::Denied::Endpoint => "endpoint",
                    crate::gateway::Denied::Host => "host",
                }
                .to_owned(),
                target: d.target.clone(),
                count: d.count,
            })
            .collect(),
        cost_mismatch: false,
    };
    r.cost_mismatch = r.mismatched(claimed);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        vars.iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn providers_come_from_the_keys_and_the_users_base_urls() {
        let c = config(&env(&[
            ("ANTHROPIC_API_KEY", "sk-ant-x"),
            ("OPENAI_API_KEY", "sk-o"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/"),
        ]))
        .unwrap();
        let ups: Vec<(&str, &str)> = c
            .providers
            .iter()
            .map(|p| (p.name.as_str(), p.upstream.as_str()))
            .collect();
        assert_eq!(
            ups,
            [
                ("anthropic", "https://api.anthropic.com"),
                ("openai", "http://127.0.0.1:8080")
            ]
        );
        let none = config(&env(&[("ANTHROPIC_API_KEY", " ")])).unwrap();
        assert!(none.providers.is_empty());
        let e = config(&env(&[
            ("ANTHROPIC_API_KEY", "k"),
            ("ANTHROPIC_BASE_URL", "http://example.com"),
        ]))
        .unwrap_err();
        assert!(
            e.starts_with("ANTHROPIC_BASE_URL=http://example.com: "),
            "{e}"
        );
    }

    #[test]
    fn keys_never_pass_and_mismatches_are_flagged_past_the_tolerance() {
        let left = without_keys(env(&[
            ("ANTHROPIC_API_KEY", "a"),
            ("OPENAI_API_KEY", "b"),
            ("PATH", "/bin"),
        ]));
        assert_eq!(left, env(&[("PATH", "/bin")]));
        let r = GatewayRecord {
            cost: 1.0,
            ..GatewayRecord::default()
        };
        assert!(!r.mismatched(None));
        assert!(!r.mismatched(Some(1.04)));
        assert!(r.mismatched(Some(1.06)));
        assert!(r.mismatched(Some(0.5)));
    }
}
