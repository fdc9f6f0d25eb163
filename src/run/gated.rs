//! The run's gateway ([`crate::gateway`]) as a run uses it: started from fanout's
//! environment before the first worker, one door per worker, closed after the last.
//!
//! **Providers and keys.** A provider is configured when its key is in fanout's
//! environment: Anthropic's from `ANTHROPIC_API_KEY`, else `ANTHROPIC_AUTH_TOKEN`
//! (sent upstream as `Authorization: Bearer`); OpenAI's from `OPENAI_API_KEY`. Each
//! goes to the provider's API host, or wherever the user already points the CLIs:
//! `ANTHROPIC_BASE_URL`; `OPENAI_BASE_URL`, else `OPENAI_API_BASE`, else
//! `ARCHITECT_API_BASE` (a trailing `/v1` dropped: the gateway's OpenAI base URL has
//! its own). No model credential ([`crate::secret::MODEL_CREDENTIALS`]: those keys,
//! and other providers' and clouds' keys and tokens) reaches a process fanout starts
//! for a worker ([`without_keys`]): agents, setup commands and checks alike; the
//! built-in adapters are pointed at the worker's door with its placeholder key
//! instead ([`crate::agent::door`]).
//!
//! **Every process of a worker** gets the door as its proxy ([`proxy_vars`]):
//! `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and their lower-case forms; `NO_PROXY`
//! names loopback only (a dev server the worker starts stays reachable).
//!
//! **The network the proxy lets through** is the plan's `network:` ([`for_plan`]):
//! `open`, or its `allow:` list plus the API host of each provider fanout holds no
//! key for ([`PROVIDER_HOSTS`]: a CLI logged in by itself still reaches its
//! provider). A provider fanout holds the key of is never reached through the proxy
//! (its API host and its upstream are refused, listed or open): its calls go
//! through the door, metered and budgeted, not tunnelled with a credential an agent
//! found.
//!
//! The record of a worker's traffic in its result is [`record`].

use std::collections::BTreeMap;
use std::ffi::OsString;

use crate::gateway::{GatewayConfig, Network, Provider, Usage, Wire};
use crate::model::{DeniedTarget, GatewayRecord};
use crate::plan::Plan;

/// Each built-in provider's API host, by provider.
pub const PROVIDER_HOSTS: [(&str, &str); 2] = [
    ("anthropic", "api.anthropic.com"),
    ("openai", "api.openai.com"),
];

/// What a gateway for `plan` is started with, from `env` (fanout's environment): the
/// providers whose key is set, the plan's network, prices and `budget_total`.
pub fn for_plan(env: &[(OsString, OsString)], plan: &Plan) -> Result<GatewayConfig, String> {
    let mut prices = BTreeMap::new();
    for a in plan.agents_used() {
        prices.extend(a.prices.clone());
    }
    let mut c = config(env)?;
    c.network = with_unheld_hosts(plan.network.network(), &c.providers);
    c.prices = prices;
    c.budget_total = plan.limits.budget_total;
    Ok(c)
}

/// `network` with the API host of each provider not in `held` added (`open` stays
/// open).
fn with_unheld_hosts(network: Network, held: &[Provider]) -> Network {
    match network {
        Network::Open => Network::Open,
        Network::Allow(mut entries) => {
            let unheld = PROVIDER_HOSTS
                .iter()
                .filter(|(name, _)| !held.iter().any(|p| p.name == *name));
            entries.extend(unheld.map(|(_, host)| (*host).to_owned()));
            Network::Allow(entries)
        }
    }
}

/// The providers whose key is in `env`, and the default network (the API hosts of
/// the others; those of the held ones refused). An upstream the gateway refuses
/// names the variable that set it.
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
    for (name, host) in PROVIDER_HOSTS {
        let (wire, key_vars, url_vars): (Wire, &[&str], &[&str]) = match name {
            "anthropic" => (
                Wire::Anthropic,
                &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
                &["ANTHROPIC_BASE_URL"],
            ),
            _ => (
                Wire::OpenAi,
                &["OPENAI_API_KEY"],
                &["OPENAI_BASE_URL", "OPENAI_API_BASE", "ARCHITECT_API_BASE"],
            ),
        };
        let Some((key_var, key)) = key_vars.iter().find_map(|v| get(v).map(|k| (*v, k))) else {
            continue;
        };
        let upstream = match url_vars.iter().find_map(|v| get(v).map(|u| (*v, u))) {
            Some((var, url)) => {
                let url = url.trim_end_matches('/');
                let url = url.strip_suffix("/v1").unwrap_or(url).to_owned();
                check_upstream(var, name, &url)?;
                url
            }
            None => format!("https://{host}"),
        };
        providers.push(Provider {
            name: name.to_owned(),
            wire,
            upstream,
            key: secrecy::SecretString::from(key.to_owned()),
            bearer: key_var == "ANTHROPIC_AUTH_TOKEN",
        });
    }
    let refused = PROVIDER_HOSTS
        .iter()
        .filter(|(name, _)| providers.iter().any(|p| p.name == *name))
        .map(|(_, host)| (*host).to_owned())
        .collect();
    Ok(GatewayConfig {
        network: with_unheld_hosts(Network::default(), &providers),
        refused,
        providers,
        ..GatewayConfig::default()
    })
}

/// Whether the gateway takes `url` (set by `var`) as provider `name`'s upstream,
/// said with the variable's name when it does not.
fn check_upstream(var: &str, name: &str, url: &str) -> Result<(), String> {
    crate::gateway::check_upstream(name, url).map_err(|e| format!("{var}={url}: {e}"))
}

/// `env` less every model credential ([`crate::secret::is_model_credential`]): what
/// every process of a worker starts from.
pub fn without_keys(env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
    env.into_iter()
        .filter(|(k, _)| !k.to_str().is_some_and(crate::secret::is_model_credential))
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

    /// A plan of `fanout.yml` text `yml`.
    fn plan(yml: &str) -> Plan {
        crate::plan::assign::of_text(yml, &Default::default())
    }

    #[test]
    fn the_plans_network_reaches_the_gateway_and_held_providers_are_refused() {
        let anthropic = env(&[("ANTHROPIC_API_KEY", "k")]);
        let c = for_plan(
            &anthropic,
            &plan(
                "network: {allow: [npm, x.example]}
tasks: [t]
",
            ),
        )
        .unwrap();
        let listed = ["npm", "x.example", "api.openai.com"].map(String::from);
        assert_eq!(c.network, Network::Allow(listed.to_vec()));
        assert_eq!(c.refused, ["api.anthropic.com"]);
        let c = for_plan(
            &anthropic,
            &plan(
                "network: open
tasks: [t]
",
            ),
        )
        .unwrap();
        assert_eq!((c.network, c.refused.len()), (Network::Open, 1));
        // no key held: both providers' hosts pass, none refused
        let c = for_plan(
            &[],
            &plan(
                "tasks: [t]
",
            ),
        )
        .unwrap();
        let both = ["api.anthropic.com", "api.openai.com"].map(String::from);
        assert_eq!(c.network, Network::Allow(both.to_vec()));
        assert!(c.refused.is_empty());
        let both = env(&[("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "o")]);
        let c = for_plan(
            &both,
            &plan(
                "tasks: [t]
",
            ),
        )
        .unwrap();
        assert_eq!(c.network, Network::Allow(vec![]));
        assert_eq!(c.refused, ["api.anthropic.com", "api.openai.com"]);
    }

    #[test]
    fn anthropics_auth_token_is_its_bearer_key_when_its_api_key_is_unset() {
        let c = config(&env(&[("ANTHROPIC_AUTH_TOKEN", "tok")])).unwrap();
        let p = &c.providers[0];
        assert_eq!((p.name.as_str(), p.bearer), ("anthropic", true));
        assert_eq!(secrecy::ExposeSecret::expose_secret(&p.key), "tok");
        let c = config(&env(&[
            ("ANTHROPIC_AUTH_TOKEN", "tok"),
            ("ANTHROPIC_API_KEY", "key"),
        ]))
        .unwrap();
        let p = &c.providers[0];
        assert!(!p.bearer);
        assert_eq!(secrecy::ExposeSecret::expose_secret(&p.key), "key");
    }

    #[test]
    fn keys_never_pass_and_mismatches_are_flagged_past_the_tolerance() {
        let mut all: Vec<(&str, &str)> = crate::secret::MODEL_CREDENTIALS
            .iter()
            .map(|k| (*k, "secret"))
            .collect();
        all.push(("PATH", "/bin"));
        all.push(("ANTHROPIC_BASE_URL", "http://127.0.0.1:1"));
        let left = without_keys(env(&all));
        let kept = [
            ("PATH", "/bin"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:1"),
        ];
        assert_eq!(left, env(&kept));
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
