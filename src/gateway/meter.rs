//! What each worker spent, as the gateway measured it: its live [`Usage`], the run's
//! total, the budgets, and the [`Stop`] sent on a worker's watch channel when its
//! budget or the run's is reached.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::usage::{Denial, Denied, Stop, Tokens, Usage, WorkerLimits};
use crate::agent::prices::Price;
use crate::agent::prices::price_of;

/// Distinct denied targets kept per worker (the count goes on past it).
const MAX_DENIALS: usize = 64;

/// Anthropic's price of a cache write, as a multiple of the input price: writes kept
/// 5 minutes, and writes kept an hour.
const CACHE_WRITE_5M: f64 = 1.25;
const CACHE_WRITE_1H: f64 = 2.0;

/// A registered worker.
#[derive(Debug)]
pub struct Worker {
    /// fanout's worker id.
    pub id: u32,
    /// The credential its agents present for model calls.
    pub placeholder: String,
    /// Its budget, USD.
    pub budget: Option<f64>,
    /// When it ends: no rate-limit wait lasts past it (none before it is set).
    deadline: Mutex<Option<Instant>>,
    /// Ends its listener and every connection and tunnel of it.
    pub cancel: CancellationToken,
    /// Its model calls sent upstream and not yet metered: they run on tasks of their
    /// own, so a worker killed (or a door closed) mid-call still has the call's cost
    /// counted ([`super::Gateway::end_worker`] waits for them).
    pub in_flight: TaskTracker,
    usage: Mutex<Usage>,
    stop: watch::Sender<Option<Stop>>,
}

impl Worker {
    /// Its deadline now.
    pub fn deadline(&self) -> Option<Instant> {
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Set its deadline.
    pub fn set_deadline(&self, deadline: Instant) {
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner()) = Some(deadline);
    }

    /// The stop already sent, if any.
    pub fn stopped(&self) -> Option<Stop> {
        *self.stop.borrow()
    }

    /// Change its usage.
    pub fn with_usage<T>(&self, f: impl FnOnce(&mut Usage) -> T) -> T {
        f(&mut self.usage.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A copy of its usage now.
    pub fn usage(&self) -> Usage {
        self.with_usage(|u| u.clone())
    }

    /// Count time spent waiting for a provider.
    pub fn waited(&self, d: Duration) {
        if !d.is_zero() {
            self.with_usage(|u| u.waited += d);
        }
    }

    /// Count a denied attempt at `target` (text an agent chose: kept short and
    /// printable).
    pub fn deny(&self, kind: Denied, target: &str) {
        let target: String = target
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect();
        tracing::debug!(worker = self.id, ?kind, %target, "gateway: denied");
        self.with_usage(|u| {
            u.denied_total += 1;
            if let Some(d) = u
                .denied
                .iter_mut()
                .find(|d| d.kind == kind && d.target == target)
            {
                d.count += 1;
            } else if u.denied.len() < MAX_DENIALS {
                u.denied.push(Denial {
                    kind,
                    target,
                    count: 1,
                });
            }
        });
    }

    fn stop(&self, why: Stop) {
        self.stop.send_if_modified(|s| {
            let first = s.is_none();
            if first {
                *s = Some(why);
            }
            first
        });
    }
}

/// Every worker's usage, the run's cost (what earlier attempts spent included), the
/// prices.
#[derive(Debug)]
pub struct Ledger {
    prices: BTreeMap<String, Price>,
    budget_total: Option<f64>,
    run_cost: Mutex<f64>,
    workers: Mutex<BTreeMap<u32, Arc<Worker>>>,
}

/// A response's usage so far, as it is read.
#[derive(Debug)]
pub struct Meter {
    worker: Arc<Worker>,
    /// The model the request named.
    asked: Option<String>,
    /// The model the response named, once it did.
    answered: Option<String>,
    so_far: Tokens,
    /// Whether any usage was read.
    pub seen: bool,
    unpriced: bool,
}

impl Meter {
    /// The worker whose response this is.
    pub fn worker(&self) -> &Arc<Worker> {
        &self.worker
    }
}

impl Ledger {
    /// A ledger with `prices` (the user's, over the shipped table), the run's budget,
    /// and what the run spent before it (`spent_before`: earlier attempts).
    pub fn new(
        prices: BTreeMap<String, Price>,
        budget_total: Option<f64>,
        spent_before: f64,
    ) -> Ledger {
        Ledger {
            prices,
            budget_total,
            run_cost: Mutex::new(spent_before),
            workers: Mutex::new(BTreeMap::new()),
        }
    }

    fn workers(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, Arc<Worker>>> {
        self.workers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Add worker `id`; `Err` when it already is.
    pub fn add(
        &self,
        id: u32,
        placeholder: String,
        limits: WorkerLimits,
    ) -> Result<(Arc<Worker>, watch::Receiver<Option<Stop>>), String> {
        let (stop, rx) = watch::channel(None);
        let w = Arc::new(Worker {
            id,
            placeholder,
            budget: limits.budget,
            deadline: Mutex::new(limits.deadline),
            cancel: CancellationToken::new(),
            in_flight: TaskTracker::new(),
            usage: Mutex::new(Usage::default()),
            stop,
        });
        {
            let mut all = self.workers();
            if all.contains_key(&id) {
                return Err(format!(
                    "worker {id} is already registered with the gateway"
                ));
            }
            all.insert(id, w.clone());
        }
        self.check(&w);
        Ok((w, rx))
    }

    /// Worker `id`, when registered.
    pub fn worker(&self, id: u32) -> Option<Arc<Worker>> {
        self.workers().get(&id).cloned()
    }

    /// Take worker `id` out.
    pub fn remove(&self, id: u32) -> Option<Arc<Worker>> {
        self.workers().remove(&id)
    }

    /// Every registered worker.
    pub fn all(&self) -> Vec<Arc<Worker>> {
        self.workers().values().cloned().collect()
    }

    /// What the run has spent, earlier attempts included.
    pub fn run_cost(&self) -> f64 {
        *self.run_cost.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a budget covers `w`'s model calls (so an unpriced model is refused).
    pub fn budgeted(&self, w: &Worker) -> bool {
        self.budget_total.is_some() || w.budget.is_some()
    }

    /// Whether `model` has a price.
    pub fn priced(&self, model: &str) -> bool {
        price_of(model, &self.prices).is_some()
    }

    /// Start metering a response to `w`'s request for `asked`.
    pub fn meter(&self, w: &Arc<Worker>, asked: Option<String>) -> Meter {
        Meter {
            worker: w.clone(),
            asked,
            answered: None,
            so_far: Tokens::default(),
            seen: false,
            unpriced: false,
        }
    }

    /// Record what a response reported (`model`, when it named one; its cumulative
    /// `tokens`): the new tokens, their cost, the budgets.
    pub fn record(&self, m: &mut Meter, model: Option<&str>, reported: super::wire::Reported) {
        if m.answered.is_none() {
            m.answered = model.map(str::to_owned);
        }
        let now = reported.over(m.so_far);
        let delta = now.minus(m.so_far);
        m.so_far = now;
        let first = !m.seen;
        m.seen = true;
        let price = [m.answered.as_deref(), m.asked.as_deref()]
            .into_iter()
            .flatten()
            .find_map(|name| price_of(name, &self.prices));
        let cost = price.map(|p| cost(&p, delta));
        let newly_unpriced = cost.is_none() && !m.unpriced;
        m.unpriced |= cost.is_none();
        m.worker.with_usage(|u| {
            u.tokens = u.tokens.plus(delta);
            u.cost += cost.unwrap_or(0.0);
            u.unpriced += u64::from(newly_unpriced);
            u.metered += u64::from(first);
        });
        if let Some(c) = cost {
            *self.run_cost.lock().unwrap_or_else(|p| p.into_inner()) += c;
        }
        self.check(&m.worker);
    }

    /// Send the stops the spending calls for: `w`'s budget, the run's (to every
    /// worker).
    fn check(&self, w: &Worker) {
        let spent = w.with_usage(|u| u.cost);
        if let Some(budget) = w.budget
            && spent >= budget
        {
            w.stop(Stop::Budget { spent, budget });
        }
        if let Some(budget) = self.budget_total {
            let spent = self.run_cost();
            if spent >= budget {
                for other in self.all() {
                    other.stop(Stop::RunBudget { spent, budget });
                }
            }
        }
    }
}

/// The cost of `t` at `p`, USD.
pub fn cost(p: &Price, t: Tokens) -> f64 {
    let long = t.cache_write_1h.min(t.cache_write);
    let short = t.cache_write - long;
    (t.input as f64 * p.input
        + t.cache_read as f64 * p.cached_input.unwrap_or(p.input)
        + short as f64 * p.input * CACHE_WRITE_5M
        + long as f64 * p.input * CACHE_WRITE_1H
        + t.output as f64 * p.output)
        / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::wire::Reported;

    fn price() -> Price {
        Price {
            input: 3.0,
            output: 15.0,
            cached_input: Some(0.3),
        }
    }

    #[test]
    fn cache_writes_cost_more_than_input_and_reads_less() {
        let t = Tokens {
            input: 1_000_000,
            cache_read: 1_000_000,
            cache_write: 3_000_000,
            cache_write_1h: 1_000_000,
            output: 1_000_000,
        };
        // 3 + 0.3 + 2 × 3 × 1.25 + 3 × 2 + 15
        let c = cost(&price(), t);
        assert!((c - 31.8).abs() < 1e-9, "{c}");
    }

    fn limits(budget: Option<f64>) -> WorkerLimits {
        WorkerLimits {
            budget,
            deadline: None,
        }
    }

    fn reported(input: u64, output: Option<u64>) -> Reported {
        Reported {
            input: Some(input),
            output,
            ..Reported::default()
        }
    }

    #[test]
    fn cumulative_reports_are_charged_once_and_budgets_stop_workers() {
        let mut prices = BTreeMap::new();
        prices.insert("m".to_owned(), price());
        let ledger = Ledger::new(prices, Some(0.1), 0.0);
        let (a, mut a_stop) = ledger.add(1, "pa".into(), limits(Some(0.05))).unwrap();
        let (b, b_stop) = ledger.add(2, "pb".into(), limits(None)).unwrap();
        assert!(ledger.add(2, "x".into(), limits(None)).is_err());
        let mut m = ledger.meter(&a, Some("m".into()));
        ledger.record(&mut m, Some("m-2025"), reported(10_000, Some(1)));
        // message_delta: only the output so far, cumulative.
        let delta = Reported {
            output: Some(1000),
            ..Reported::default()
        };
        ledger.record(&mut m, None, delta);
        let u = a.usage();
        assert_eq!(
            (u.tokens.input, u.tokens.output, u.metered),
            (10_000, 1000, 1)
        );
        // 10,000 × 3 + 1000 × 15 per million
        assert!((u.cost - 0.045).abs() < 1e-12, "{}", u.cost);
        assert_eq!(a.stopped(), None);
        assert!(!a_stop.has_changed().unwrap());
        let mut m2 = ledger.meter(&a, Some("m".into()));
        ledger.record(&mut m2, None, reported(2000, Some(0)));
        assert!(a_stop.has_changed().unwrap());
        assert!(matches!(
            *a_stop.borrow_and_update(),
            Some(Stop::Budget { budget, .. }) if budget == 0.05
        ));
        assert_eq!(b.stopped(), None);
        // The run's budget stops everyone, b included.
        let mut m3 = ledger.meter(&b, Some("m".into()));
        ledger.record(&mut m3, None, reported(20_000, None));
        assert!(matches!(b.stopped(), Some(Stop::RunBudget { .. })));
        assert!(matches!(*b_stop.borrow(), Some(Stop::RunBudget { .. })));
        // A's first stop stays what it was.
        assert!(matches!(a.stopped(), Some(Stop::Budget { .. })));
        // A worker added after the run's budget is reached starts stopped.
        let (c, _) = ledger.add(3, "pc".into(), limits(None)).unwrap();
        assert!(matches!(c.stopped(), Some(Stop::RunBudget { .. })));
    }

    #[test]
    fn an_unpriced_model_is_counted_as_such_once_per_response() {
        let ledger = Ledger::new(BTreeMap::new(), None, 0.0);
        let (w, _) = ledger.add(1, "p".into(), limits(None)).unwrap();
        assert!(!ledger.budgeted(&w));
        assert!(!ledger.priced("my-local-model"));
        assert!(ledger.priced("gpt-4o-2024-08-06"));
        let mut m = ledger.meter(&w, Some("my-local-model".into()));
        ledger.record(&mut m, None, reported(5, Some(1)));
        ledger.record(&mut m, None, reported(5, Some(9)));
        let u = w.usage();
        assert_eq!((u.unpriced, u.cost, u.tokens.output), (1, 0.0, 9));
        for _ in 0..(MAX_DENIALS + 5) {
            w.deny(Denied::Host, "same.example:443");
        }
        for i in 0..(MAX_DENIALS + 5) {
            w.deny(Denied::Host, &format!("h{i}\u{1b}.example:443"));
        }
        let u = w.usage();
        assert_eq!(u.denied_total, 2 * (MAX_DENIALS as u64 + 5));
        assert_eq!(u.denied.len(), MAX_DENIALS);
        assert_eq!(u.denied[0].count, MAX_DENIALS as u64 + 5);
        assert_eq!(u.denied[1].target, "h0.example:443");
    }
}
