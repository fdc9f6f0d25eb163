//! What a gateway is started with: the providers it forwards to (their real keys),
//! the network allow-list, prices and the run's budget.

use std::collections::BTreeMap;

use secrecy::SecretString;

use super::allow::Network;
use super::wire::Wire;
use crate::agent::prices::Price;

/// A model provider the gateway forwards to.
#[derive(Debug, Clone)]
pub struct Provider {
    /// Its name, the first segment of its base URL's path (`anthropic`, `openai`).
    pub name: String,
    /// Its wire format.
    pub wire: Wire,
    /// Where its API is: `https://…`, or `http://` to a loopback address (tests).
    pub upstream: String,
    /// The real API key.
    pub key: SecretString,
    /// Send the key as `Authorization: Bearer` whatever the wire (Anthropic's
    /// `ANTHROPIC_AUTH_TOKEN`); else in the wire's own header.
    pub bearer: bool,
}

impl Provider {
    /// Anthropic's API (`https://api.anthropic.com`) with `key`.
    pub fn anthropic(key: SecretString) -> Provider {
        Provider {
            name: "anthropic".into(),
            wire: Wire::Anthropic,
            upstream: "https://api.anthropic.com".into(),
            key,
            bearer: false,
        }
    }

    /// OpenAI's API (`https://api.openai.com`) with `key`.
    pub fn openai(key: SecretString) -> Provider {
        Provider {
            name: "openai".into(),
            wire: Wire::OpenAi,
            upstream: "https://api.openai.com".into(),
            key,
            bearer: false,
        }
    }
}

/// What a gateway is started with.
#[derive(Debug, Clone, Default)]
pub struct GatewayConfig {
    /// The providers, each with its key.
    pub providers: Vec<Provider>,
    /// Which hosts the proxy lets through.
    pub network: Network,
    /// Hosts the proxy never lets through, listed or open (`host`: on any port;
    /// `host:port`), besides each provider's upstream, which is refused too: a provider
    /// whose key the gateway holds is reached through the door only, where its calls
    /// are metered and budgeted (its public API host when the upstream is elsewhere).
    pub refused: Vec<String>,
    /// Prices over the shipped table (`prices:` in fanout.yml).
    pub prices: BTreeMap<String, Price>,
    /// The run's budget, USD.
    pub budget_total: Option<f64>,
}
