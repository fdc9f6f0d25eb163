//! Why a worker ended as it did ([`Reason`]): its cause, typed ([`Cause`]: the run
//! was interrupted, fanout did not start it, fanout failed, or the worker's own
//! account), and the text `results.json` shows. Decisions (resume, dependents, the
//! report's count of workers the budget kept back) read the cause, never the words;
//! the text is parsed back into a cause only when a record is read from disk.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How an interrupted worker's reason begins.
const INTERRUPTED: &str = "interrupted";
/// How the reason of a worker fanout did not start begins.
const NOT_STARTED: &str = "not started";
/// How the reason of a worker the run's budget kept from starting begins.
const BUDGET_SPENT: &str = "not started: the run's budget";
/// How the reason of a worker fanout itself failed begins.
const INTERNAL_ERROR: &str = "internal error";

/// What ended a worker, as far as the run's bookkeeping cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The worker's own account: the agent's, its setup's or its checks' words, or
    /// fanout's notes on them. Final: resume keeps it.
    Worker,
    /// The run was interrupted before the worker finished.
    Interrupted,
    /// The run's budget was spent before the worker started.
    BudgetSpent,
    /// The run's tamper snapshot could not be taken, so the worker did not start.
    SnapshotFailed,
    /// fanout itself failed (a worker task panicked).
    InternalError,
}

/// A worker's reason: its [`Cause`] and the words shown for it (`reason` in
/// `results.json`, where it is the words alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    cause: Cause,
    text: String,
}

impl Reason {
    /// The worker was interrupted before it finished.
    pub fn interrupted() -> Self {
        Self::interrupted_with("")
    }

    /// The worker was interrupted; `rest` follows the word (" during checks",
    /// "; killed after the grace period").
    pub fn interrupted_with(rest: &str) -> Self {
        Self::of(Cause::Interrupted, format!("{INTERRUPTED}{rest}"))
    }

    /// The run's budget `total` was spent (`spent`) before the worker started.
    pub fn budget_spent(total: f64, spent: f64) -> Self {
        let text = format!("{BUDGET_SPENT} of ${total:.4} was spent (${spent:.4})");
        Self::of(Cause::BudgetSpent, text)
    }

    /// The run's tamper snapshot could not be taken (`why`): the worker did not start.
    pub fn snapshot_failed(why: &str) -> Self {
        let text = format!("{NOT_STARTED}: the tamper snapshot could not be taken: {why}");
        Self::of(Cause::SnapshotFailed, text)
    }

    /// fanout itself failed: `what`.
    pub fn internal_error(what: &str) -> Self {
        Self::of(Cause::InternalError, format!("{INTERNAL_ERROR}: {what}"))
    }

    fn of(cause: Cause, text: String) -> Self {
        Self { cause, text }
    }

    /// Its cause.
    pub fn cause(&self) -> Cause {
        self.cause
    }

    /// Whether the worker's result is final (resume does not run it again): it ended
    /// by its own account, not because the run stopped or failed around it.
    pub fn is_final(&self) -> bool {
        self.cause == Cause::Worker
    }

    /// The words shown.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// `notes` joined with "; ", under the first one's cause; `None` when empty.
    pub fn join(notes: Vec<Reason>) -> Option<Self> {
        let cause = notes.first()?.cause;
        let texts: Vec<String> = notes.into_iter().map(|n| n.text).collect();
        Some(Self::of(cause, texts.join("; ")))
    }

    /// The same cause with its words changed by `f`.
    pub fn map(self, f: impl FnOnce(String) -> String) -> Self {
        Self::of(self.cause, f(self.text))
    }

    /// The cause of a reason read from disk, from how its words begin (the only place
    /// the words are read).
    fn parse(text: String) -> Self {
        let cause = if text.starts_with(INTERRUPTED) {
            Cause::Interrupted
        } else if text.starts_with(BUDGET_SPENT) {
            Cause::BudgetSpent
        } else if text.starts_with(NOT_STARTED) {
            Cause::SnapshotFailed
        } else if text.starts_with(INTERNAL_ERROR) {
            Cause::InternalError
        } else {
            Cause::Worker
        };
        Self::of(cause, text)
    }
}

/// The worker's own words.
impl From<String> for Reason {
    fn from(text: String) -> Self {
        Self::of(Cause::Worker, text)
    }
}

/// The worker's own words.
impl From<&str> for Reason {
    fn from(text: &str) -> Self {
        Self::from(text.to_owned())
    }
}

impl std::ops::Deref for Reason {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Self::parse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(r: &Reason) -> Reason {
        serde_json::from_str(&serde_json::to_string(r).unwrap()).unwrap()
    }

    #[test]
    fn each_cause_survives_the_text_it_is_written_as() {
        for r in [
            Reason::interrupted(),
            Reason::interrupted_with(" during checks"),
            Reason::budget_spent(1.0, 1.2),
            Reason::snapshot_failed("disk full"),
            Reason::internal_error("worker task panicked"),
            Reason::from("exit code 3"),
        ] {
            assert_eq!(round_trip(&r), r);
        }
        assert_eq!(
            Reason::budget_spent(1.0, 1.2).as_str(),
            "not started: the run's budget of $1.0000 was spent ($1.2000)"
        );
    }

    #[test]
    fn a_joined_reason_has_its_first_notes_cause() {
        let j = Reason::join(vec![Reason::interrupted_with(" during checks"), "x".into()]);
        let j = j.unwrap();
        assert_eq!(
            (j.cause(), j.as_str()),
            (Cause::Interrupted, "interrupted during checks; x")
        );
        assert!(Reason::join(Vec::new()).is_none());
        assert!(Reason::from("timed out").is_final() && !Reason::interrupted().is_final());
    }
}
