//! Why a worker ended as it did ([`Reason`]): its cause, typed ([`Cause`]: the run
//! was interrupted, fanout did not start it, fanout failed, or the worker's own
//! account), and the words shown for it. A worker's result carries both, side by side
//! (`cause` and `reason` in `results.json` and the run's records: [`fields`]), so a
//! record read back never takes its cause from words — an agent's words included.
//! Decisions (resume, dependents, the report's count of workers the budget kept back)
//! read the cause, never the words.

use serde::{Deserialize, Serialize};

/// What ended a worker, as far as the run's bookkeeping cares (`cause` in a worker's
/// result). Its display is the words a reason of that cause begins with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The worker's own account: the agent's, its setup's or its checks' words, or
    /// fanout's notes on them. Final: resume keeps it. Its reason is those words alone.
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

impl Cause {
    /// The words a reason of this cause begins with (none for the worker's own
    /// account: its reason is its words); the only place they are written.
    pub const fn words(self) -> &'static str {
        match self {
            Cause::Worker => "",
            Cause::Interrupted => "interrupted",
            Cause::BudgetSpent | Cause::SnapshotFailed => "not started",
            Cause::InternalError => "internal error",
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.words())
    }
}

/// The words for something stopped at its time limit, `how_long` after it started
/// ("timed out after 300s"): a worker, a setup step, a check. The only place they are
/// written.
pub fn timed_out_after(how_long: &str) -> String {
    format!("timed out after {how_long}")
}

/// A worker's reason: its [`Cause`] and the words shown for it.
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
        Self::of(Cause::Interrupted, rest)
    }

    /// The run's budget `total` was spent (`spent`) before the worker started.
    pub fn budget_spent(total: f64, spent: f64) -> Self {
        let rest = format!(": the run's budget of ${total:.4} was spent (${spent:.4})");
        Self::of(Cause::BudgetSpent, &rest)
    }

    /// The run's tamper snapshot could not be taken (`why`): the worker did not start.
    pub fn snapshot_failed(why: &str) -> Self {
        let rest = format!(": the tamper snapshot could not be taken: {why}");
        Self::of(Cause::SnapshotFailed, &rest)
    }

    /// fanout itself failed: `what`.
    pub fn internal_error(what: &str) -> Self {
        Self::of(Cause::InternalError, &format!(": {what}"))
    }

    /// A reason of `cause`: its words, then `rest`.
    fn of(cause: Cause, rest: &str) -> Self {
        let text = format!("{cause}{rest}");
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
        Some(Self {
            cause,
            text: texts.join("; "),
        })
    }
}

/// The worker's own words.
impl From<String> for Reason {
    fn from(text: String) -> Self {
        Self {
            cause: Cause::Worker,
            text,
        }
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

/// A worker's reason as two fields of its result (`#[serde(flatten, with =
/// "fields")]`): `reason`, the words (`null` when there is none), and beside it
/// `cause`. A record without `cause` (written before it existed) is the worker's own
/// account: resume keeps it rather than delete its branch.
pub mod fields {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{Cause, Reason};

    #[derive(Serialize)]
    struct Out<'a> {
        reason: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cause: Option<Cause>,
    }

    #[derive(Deserialize)]
    struct In {
        #[serde(default)]
        reason: Option<String>,
        #[serde(default)]
        cause: Option<Cause>,
    }

    /// Write `reason` and `cause`.
    pub fn serialize<S: Serializer>(r: &Option<Reason>, s: S) -> Result<S::Ok, S::Error> {
        let out = Out {
            reason: r.as_ref().map(Reason::as_str),
            cause: r.as_ref().map(Reason::cause),
        };
        out.serialize(s)
    }

    /// Read `reason` and `cause`: the cause as written, never from the words.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Reason>, D::Error> {
        let In { reason, cause } = In::deserialize(d)?;
        Ok(reason.map(|text| Reason {
            cause: cause.unwrap_or(Cause::Worker),
            text,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Row {
        id: u32,
        #[serde(flatten, with = "fields")]
        reason: Option<Reason>,
    }

    fn round_trip(r: Option<Reason>) -> Row {
        let row = Row { id: 7, reason: r };
        let json = serde_json::to_string(&row).unwrap();
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn each_cause_survives_the_record_it_is_written_in() {
        for r in [
            Reason::interrupted(),
            Reason::interrupted_with(" during checks"),
            Reason::budget_spent(1.0, 1.2),
            Reason::snapshot_failed("disk full"),
            Reason::internal_error("worker task panicked"),
            Reason::from("exit code 3"),
        ] {
            assert_eq!(round_trip(Some(r.clone())).reason, Some(r));
        }
        assert_eq!(round_trip(None).reason, None);
        assert_eq!(
            Reason::budget_spent(1.0, 1.2).as_str(),
            "not started: the run's budget of $1.0000 was spent ($1.2000)"
        );
    }

    #[test]
    fn a_workers_words_stay_its_own_whatever_they_say() {
        for words in [
            "interrupted",
            "interrupted by the user",
            "not started: x",
            "not started: the run's budget of $1 was spent",
            "internal error: y",
        ] {
            let back = round_trip(Some(Reason::from(words))).reason.unwrap();
            assert_eq!((back.cause(), back.as_str()), (Cause::Worker, words));
            assert!(back.is_final());
        }
    }

    #[test]
    fn a_record_says_its_cause_beside_its_words() {
        let row = Row {
            id: 1,
            reason: Some(Reason::interrupted_with(" during checks")),
        };
        assert_eq!(
            serde_json::to_value(&row).unwrap(),
            serde_json::json!({"id": 1, "reason": "interrupted during checks", "cause": "interrupted"})
        );
        let none = Row {
            id: 1,
            reason: None,
        };
        assert_eq!(
            serde_json::to_value(&none).unwrap(),
            serde_json::json!({"id": 1, "reason": null})
        );
        // Written before `cause` existed: the words are the worker's own.
        let old: Row = serde_json::from_str(r#"{"id": 1, "reason": "interrupted"}"#).unwrap();
        assert_eq!(old.reason.unwrap().cause(), Cause::Worker);
        let bad = serde_json::from_str::<Row>(r#"{"id": 1, "reason": "x", "cause": "nope"}"#);
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("unknown variant `nope`")
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
