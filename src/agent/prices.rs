//! Token prices: cost for agents that report token usage but no USD figure.
//!
//! fanout ships list prices for common models (`prices.json`, embedded); `prices:` in
//! `fanout.yml` overrides or adds models. A model without a price gets no cost: an
//! unknown cost is reported as unknown, never as zero.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub use crate::config::Price;

/// Tokens used, as agents report them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, including the cached ones.
    pub input: u64,
    /// Of which read from a cache.
    pub cached_input: u64,
    /// Output tokens (including reasoning).
    pub output: u64,
}

impl Usage {
    /// Sum of two usages.
    pub fn add(&mut self, other: Usage) {
        self.input = self.input.saturating_add(other.input);
        self.cached_input = self.cached_input.saturating_add(other.cached_input);
        self.output = self.output.saturating_add(other.output);
    }

    /// Whether any token was counted.
    pub fn is_empty(&self) -> bool {
        self.input == 0 && self.output == 0
    }
}

fn shipped() -> &'static BTreeMap<String, Price> {
    static TABLE: OnceLock<BTreeMap<String, Price>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let raw: BTreeMap<String, serde_json::Value> =
            serde_json::from_str(include_str!("prices.json")).expect("prices.json is valid");
        raw.into_iter()
            .filter(|(k, _)| !k.starts_with('_'))
            .map(|(k, v)| {
                (
                    k,
                    serde_json::from_value(v).expect("prices.json entries are prices"),
                )
            })
            .collect()
    })
}

/// The price of `model`: the user's table first, then the shipped one; exact name, else
/// the entry it is a snapshot of (`<entry>-2025-04-16`, `<entry>-20250514`,
/// `<entry>-latest`). Any other suffix is another model (`o3-pro` is not `o3`, and
/// costs ten times as much): no price.
pub fn price_of(model: &str, overrides: &BTreeMap<String, Price>) -> Option<Price> {
    let model = model.trim();
    let bare = model.rsplit_once('/').map_or(model, |(_, m)| m);
    for table in [overrides, shipped()] {
        for name in [model, bare] {
            if let Some(p) = table.get(name) {
                return Some(*p);
            }
        }
    }
    for table in [overrides, shipped()] {
        let best = table
            .iter()
            .filter(|(k, _)| {
                bare.strip_prefix(k.as_str())
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(is_snapshot)
            })
            .max_by_key(|(k, _)| k.len());
        if let Some((_, p)) = best {
            return Some(*p);
        }
    }
    None
}

/// Whether `suffix` names a snapshot of a model: a date (`2025-04-16`, `20250514`) or
/// `latest`.
fn is_snapshot(suffix: &str) -> bool {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let dashed = || {
        let mut parts = suffix.split('-');
        matches!(
            (parts.next(), parts.next(), parts.next(), parts.next()),
            (Some(y), Some(m), Some(d), None) if digits(y, 4) && digits(m, 2) && digits(d, 2)
        )
    };
    suffix == "latest" || digits(suffix, 8) || dashed()
}

/// Cost of `usage` on `model`, when the model has a price.
pub fn cost(model: &str, usage: Usage, overrides: &BTreeMap<String, Price>) -> Option<f64> {
    let p = price_of(model, overrides)?;
    let cached = usage.cached_input.min(usage.input);
    let fresh = usage.input - cached;
    let c = (fresh as f64 * p.input
        + cached as f64 * p.cached_input.unwrap_or(p.input)
        + usage.output as f64 * p.output)
        / 1_000_000.0;
    c.is_finite().then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_and_cost() {
        let none = BTreeMap::new();
        let u = Usage {
            input: 2000,
            cached_input: 1000,
            output: 200,
        };
        // gpt-4o: 1000 × 2.5 + 1000 × 1.25 + 200 × 10 per million.
        let c = cost("gpt-4o", u, &none).unwrap();
        assert!((c - 0.00575).abs() < 1e-12, "{c}");
        assert_eq!(
            price_of("gpt-4o-2024-08-06", &none),
            price_of("gpt-4o", &none)
        );
        assert_eq!(
            price_of("gpt-4o-mini-2024-07-18", &none).unwrap().input,
            0.15
        );
        assert_eq!(price_of("openai/gpt-4o", &none), price_of("gpt-4o", &none));
        assert!(price_of("gpt-4", &none).is_none());
        assert!(price_of("gpt-4ox", &none).is_none());
        // Snapshots have their model's price; other models sharing a prefix have none.
        assert_eq!(price_of("o3-2025-04-16", &none), price_of("o3", &none));
        assert_eq!(
            price_of("claude-sonnet-4-20250514", &none),
            price_of("claude-sonnet-4", &none)
        );
        assert_eq!(
            price_of("claude-3-5-haiku-latest", &none),
            price_of("claude-3-5-haiku", &none)
        );
        for other in [
            "o3-pro",
            "gpt-5-pro",
            "o3-deep-research",
            "gpt-4o-2024-08",
            "o3-20250416x",
        ] {
            assert!(price_of(other, &none).is_none(), "{other}");
        }
        assert!(cost("my-local-model", u, &none).is_none());
        let mut mine = BTreeMap::new();
        mine.insert(
            "gpt-4o".to_owned(),
            Price {
                input: 1.0,
                output: 2.0,
                cached_input: None,
            },
        );
        mine.insert(
            "my-local-model".to_owned(),
            Price {
                input: 0.0,
                output: 0.0,
                cached_input: None,
            },
        );
        let c = cost("gpt-4o", u, &mine).unwrap();
        assert!((c - 0.0024).abs() < 1e-12, "{c}");
        // A configured zero is a known zero.
        assert_eq!(cost("my-local-model", u, &mine), Some(0.0));
    }
}
