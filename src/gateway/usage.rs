//! What the gateway measures and decides per worker: its limits, the tokens and cost
//! it used, what it was denied, and why it must stop (plain data, shared by every
//! part of the gateway).

use std::time::{Duration, Instant};

/// A worker's limits.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WorkerLimits {
    /// Its budget, USD.
    pub budget: Option<f64>,
    /// When it ends (its timeout): no rate-limit wait lasts past it. Unknown at
    /// registration (`None`: no wait is cut short), it is set when it is known
    /// ([`super::Gateway::set_deadline`]).
    pub deadline: Option<Instant>,
}

/// Why a worker must stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// Its budget is reached.
    Budget {
        /// Spent, USD.
        spent: f64,
        /// Its budget, USD.
        budget: f64,
    },
    /// The run's `budget_total` is reached.
    RunBudget {
        /// The run's spending, USD.
        spent: f64,
        /// `budget_total`, USD.
        budget: f64,
    },
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Budget { spent, budget } => write!(
                f,
                "the worker's budget of ${budget:.4} is reached (${spent:.4} spent)"
            ),
            Stop::RunBudget { spent, budget } => write!(
                f,
                "the run's budget_total of ${budget:.4} is reached (${spent:.4} spent)"
            ),
        }
    }
}

/// Tokens, by how they are priced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Input no cache touched.
    pub input: u64,
    /// Input read from a cache.
    pub cache_read: u64,
    /// Input written to a cache.
    pub cache_write: u64,
    /// Of those, written for an hour.
    pub cache_write_1h: u64,
    /// Output, reasoning included.
    pub output: u64,
}

impl Tokens {
    pub(super) fn plus(self, o: Tokens) -> Tokens {
        Tokens {
            input: self.input.saturating_add(o.input),
            cache_read: self.cache_read.saturating_add(o.cache_read),
            cache_write: self.cache_write.saturating_add(o.cache_write),
            cache_write_1h: self.cache_write_1h.saturating_add(o.cache_write_1h),
            output: self.output.saturating_add(o.output),
        }
    }

    pub(super) fn minus(self, o: Tokens) -> Tokens {
        Tokens {
            input: self.input.saturating_sub(o.input),
            cache_read: self.cache_read.saturating_sub(o.cache_read),
            cache_write: self.cache_write.saturating_sub(o.cache_write),
            cache_write_1h: self.cache_write_1h.saturating_sub(o.cache_write_1h),
            output: self.output.saturating_sub(o.output),
        }
    }
}

/// What a worker did through the gateway, as it measured it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Model calls sent upstream (a retry is the same call).
    pub requests: u64,
    /// Of their sendings, those repeated after a rate-limit refusal.
    pub retries: u64,
    /// Tokens the responses reported.
    pub tokens: Tokens,
    /// Their cost, USD (responses of unpriced models count nothing: see `unpriced`).
    pub cost: f64,
    /// Responses whose usage was read.
    pub metered: u64,
    /// Successful responses to model calls whose usage could not be read.
    pub unmetered: u64,
    /// Responses of a model without a price.
    pub unpriced: u64,
    /// Model calls refused because a budget was reached.
    pub refused: u64,
    /// Time its requests waited for a provider's rate limits.
    pub waited: Duration,
    /// Attempts denied (credential, endpoint, host), in all.
    pub denied_total: u64,
    /// The first distinct targets denied, with their counts.
    pub denied: Vec<Denial>,
}

/// A target the gateway denied a worker, and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// Why.
    pub kind: Denied,
    /// `host:port`, or `METHOD /path`.
    pub target: String,
    /// Attempts.
    pub count: u64,
}

/// Why an attempt was denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// A model call without the worker's placeholder key.
    Credential,
    /// A path of a provider's API the gateway does not let through, or no provider.
    Endpoint,
    /// A host not in the allow-list (`CONNECT` or plain HTTP).
    Host,
}
