//! What a run spends: each worker's cost ([`spent_by`]) and the run's total against
//! `budget_total` ([`Spend`]), which the scheduler checks before each start and each
//! running agent watches. A leaf of the executor.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::model::WorkerResult;

/// What worker `r` spent: the larger of what its agent claimed and what the gateway
/// measured (`None` when neither is known).
pub fn spent_by(r: &WorkerResult) -> Option<f64> {
    let measured = r.gateway.as_ref().map(|g| g.cost);
    match (r.cost, measured) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// What the run has spent: finished workers' known costs plus running workers' live
/// costs, for `budget_total` — which, once reached, is said on [`Spend::reached`]: the
/// running agents are stopped (each watches it) and no other starts.
#[derive(Debug, Default)]
pub struct Spend {
    finished: Mutex<f64>,
    live: Mutex<BTreeMap<u32, f64>>,
    /// `budget_total`, and whether the spend has reached it.
    cap: Option<(f64, watch::Sender<bool>)>,
}

impl Spend {
    /// A run's spend, capped at `budget_total` when there is one.
    pub fn new(budget_total: Option<f64>) -> Spend {
        Spend {
            cap: budget_total.map(|t| (t, watch::channel(false).0)),
            ..Spend::default()
        }
    }

    /// Turns true once the spend reaches `budget_total` (`None` without one).
    pub fn reached(&self) -> Option<watch::Receiver<bool>> {
        self.cap.as_ref().map(|(_, tx)| tx.subscribe())
    }

    fn check_cap(&self) {
        if let Some((total, tx)) = &self.cap
            && self.total() >= *total
        {
            tx.send_if_modified(|r| !std::mem::replace(r, true));
        }
    }

    /// USD spent so far (known costs only).
    pub fn total(&self) -> f64 {
        let done = *self.finished.lock().unwrap_or_else(|e| e.into_inner());
        let live: f64 = self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .sum();
        done + live
    }

    /// Worker `id`'s live cost is now `cost`.
    pub(super) fn live(&self, id: u32, cost: f64) {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, cost);
        self.check_cap();
    }

    /// Worker `id` is done: its final `cost` (else its last live one) counts.
    pub(super) fn finish(&self, id: u32, cost: Option<f64>) {
        let live = self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        if let Some(c) = cost.or(live) {
            *self.finished.lock().unwrap_or_else(|e| e.into_inner()) += c;
        }
        self.check_cap();
    }
}
