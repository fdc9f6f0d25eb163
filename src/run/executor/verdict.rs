//! A worker's verdict: its status and reason from what its agent did (how it ended,
//! what it reported, whether it changed anything, against its limits), a findings
//! task's own rule, and, for an agent that ran and did not succeed, the log lines
//! (and the sandbox's refusal) its reason quotes.

use crate::agent::{AgentOutcome, AgentStatus};
use crate::model::{Reason, Status, WorkerResult, timed_out_after};
use crate::run::process::{Ending, Supervised};
use crate::util::duration::format_secs;

/// What separates a reason from the log lines quoted after it.
pub const LOG_QUOTE: &str = " — log: ";

/// The reason of a worker whose agent ran and did not succeed quotes the last
/// meaningful lines of its log ([`crate::run::excerpt`]); not for a worker interrupted or
/// whose agent never started (setup failed: its reason quotes the setup's output; or
/// not started: fanout's own reason, which resume and dependents read).
pub(super) fn quote_log(result: &mut WorkerResult) {
    let agent_ran = result.exit_code.is_some() || result.signal.is_some();
    if !agent_ran
        || result.status.is_good()
        || result.status == Status::Skipped
        || result.reason.as_ref().is_some_and(|r| !r.is_final())
    {
        return;
    }
    let reason = result.reason.as_deref().unwrap_or_default().to_owned();
    let Some(log) = &result.log_path else { return };
    let reason = match sandbox_denial(result, log) {
        Some(why) if reason.is_empty() => why,
        Some(why) => format!("{reason}; {why}"),
        None => reason,
    };
    result.reason = (!reason.is_empty()).then(|| reason.clone().into());
    if let Some(lines) = crate::run::excerpt::log_excerpt(log, &reason) {
        result.reason = Some(if reason.is_empty() {
            format!("log: {lines}").into()
        } else {
            format!("{reason}{LOG_QUOTE}{lines}").into()
        });
    }
}

/// For a sandboxed worker whose log says "Permission denied": which path the sandbox
/// refused (when a line names one) and what allows it; for a refused connection, what
/// lets the worker reach the network.
fn sandbox_denial(result: &WorkerResult, log: &std::path::Path) -> Option<String> {
    use crate::run::excerpt::Denial;
    if !result.sandboxed {
        return None;
    }
    let what = match crate::run::excerpt::denied(log, result.worktree_path.as_deref())? {
        Denial::Network => return Some(crate::run::excerpt::NETWORK_ADVICE.to_owned()),
        Denial::Write(Some(p)) => format!("the sandbox denied writing {p}"),
        Denial::Write(None) => {
            "a write was denied (\"Permission denied\"), perhaps by the sandbox".to_owned()
        }
    };
    Some(format!(
        "{what}: the agent may write only its worktree and the paths of its `writable:` list; add the directory to `writable:` under `agents: {}:` in fanout.yml, or run with `--sandbox off`",
        result.agent
    ))
}

/// A findings task: succeeding without changing a file is its normal outcome; no final
/// message is worth a note.
pub(super) fn findings_outcome(result: &mut WorkerResult, notes: &mut Vec<Reason>) {
    if result.status == Status::Unchanged {
        result.status = Status::Success;
    }
    if result.status == Status::Success && result.findings.is_none() {
        notes.push("the agent gave no final message (no findings)".into());
    }
}

/// How fanout's stop went, when it stopped the agent.
fn how_stopped(sup: &Supervised) -> &'static str {
    if sup.killed {
        "; killed after the grace period"
    } else if sup.termed {
        "; the agent honoured SIGTERM"
    } else {
        ""
    }
}

/// The final status from what was observed and what the agent reported.
pub fn decide(
    sup: &Supervised,
    outcome: &AgentOutcome,
    no_changes: bool,
    budget: Option<f64>,
    timeout: Option<f64>,
    inactivity: Option<f64>,
) -> (Status, Option<Reason>) {
    let how = how_stopped(sup);
    if let Some(why) = sup.gateway_stop {
        let why = format!("stopped: by the gateway's measure of its model calls, {why}{how}");
        return (Status::Partial, Some(why.into()));
    }
    let (status, why) = match sup.ending {
        Ending::Interrupted => return (Status::Failed, Some(Reason::interrupted_with(how))),
        Ending::Exited => {
            let (status, why) = agent_verdict(outcome, no_changes, budget);
            return (status, why.map(Reason::from));
        }
        Ending::TimedOut => (
            Status::Timeout,
            format!(
                "{}{how}",
                timed_out_after(&format_secs(timeout.unwrap_or(sup.duration.as_secs_f64())))
            ),
        ),
        Ending::OverBudget => {
            let spent = sup.progress.cost.or(outcome.cost).unwrap_or(0.0);
            (
                Status::Partial,
                format!(
                    "budget exceeded (${spent:.4} of ${:.4}); stopped",
                    budget.unwrap_or(0.0)
                ),
            )
        }
        Ending::RunBudget => {
            // A cost the agent never reported is unknown, never $0.
            let spent = match sup.progress.cost.or(outcome.cost) {
                Some(c) => format!("this worker had spent ${c:.4}"),
                None => "this worker's cost is unknown".to_owned(),
            };
            (
                Status::Partial,
                format!("the run's budget_total was reached; stopped ({spent})"),
            )
        }
        Ending::MaxSteps => (
            Status::Partial,
            format!(
                "max steps reached ({} steps); stopped",
                sup.progress.steps.unwrap_or(0)
            ),
        ),
        Ending::Inactive => (
            Status::Timeout,
            format!(
                "no output for {} (inactivity timeout); stopped",
                format_secs(inactivity.unwrap_or(0.0))
            ),
        ),
    };
    (status, Some(why.into()))
}

/// The status of an agent that exited on its own, from what it reported (and its
/// cost against `budget`), with the words why.
fn agent_verdict(
    outcome: &AgentOutcome,
    no_changes: bool,
    budget: Option<f64>,
) -> (Status, Option<String>) {
    let over_budget = match (budget, outcome.cost) {
        (Some(b), Some(c)) if c > b => Some(format!("budget exceeded: ${c:.4} of ${b:.4}")),
        _ => None,
    };
    match outcome.status {
        // What the agent noted (e.g. tools it was denied) may say why.
        // A tool it was denied is why it changed nothing: that is a failure. Otherwise
        // it decided nothing needed changing.
        AgentStatus::Success if no_changes => match &outcome.reason {
            Some(r) if r.starts_with(crate::agent::PERMISSION_DENIED) => (
                Status::Failed,
                Some(format!("agent finished but changed no files; {r}")),
            ),
            r => (Status::Unchanged, r.clone()),
        },
        AgentStatus::Success => match over_budget {
            Some(r) => (Status::Partial, Some(r)),
            None => (Status::Success, outcome.reason.clone()),
        },
        AgentStatus::Partial => (Status::Partial, outcome.reason.clone().or(over_budget)),
        AgentStatus::Failed => (Status::Failed, outcome.reason.clone()),
        AgentStatus::Timeout => (Status::Timeout, outcome.reason.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sup(ending: Ending) -> Supervised {
        Supervised {
            exit_code: Some(0),
            signal: None,
            ending,
            duration: Duration::from_secs(1),
            stdout_tail: vec![],
            stragglers: false,
            termed: false,
            killed: false,
            supervisor_lost: false,
            pipes_leaked: false,
            progress: crate::agent::Progress::default(),
            progress_source: None,
            gateway_stop: None,
        }
    }
    fn out(status: AgentStatus, cost: Option<f64>) -> AgentOutcome {
        AgentOutcome {
            status,
            steps: None,
            cost,
            reason: None,
        }
    }

    #[test]
    fn nothing_to_change_is_unchanged_unless_a_tool_was_denied() {
        let s = sup(Ending::Exited);
        let ok = out(AgentStatus::Success, None);
        assert_eq!(
            decide(&s, &ok, true, None, None, None),
            (Status::Unchanged, None)
        );
        let denied = AgentOutcome {
            reason: Some("permission denied: Write".into()),
            ..ok
        };
        assert_eq!(
            decide(&s, &denied, true, None, None, None).0,
            Status::Failed
        );
    }

    #[test]
    fn a_stopped_agent_s_reason_says_how_it_stopped() {
        let ok = out(AgentStatus::Success, None);
        let honoured = Supervised {
            termed: true,
            ..sup(Ending::Interrupted)
        };
        let (status, reason) = decide(&honoured, &ok, false, None, None, None);
        assert_eq!(status, Status::Failed);
        assert_eq!(
            reason.as_deref(),
            Some("interrupted; the agent honoured SIGTERM")
        );
        let killed = Supervised {
            termed: true,
            killed: true,
            ..sup(Ending::TimedOut)
        };
        let (status, reason) = decide(&killed, &ok, false, None, Some(5.0), None);
        assert_eq!(status, Status::Timeout);
        assert_eq!(
            reason.as_deref(),
            Some("timed out after 5s; killed after the grace period")
        );
    }

    #[test]
    fn status_rules() {
        let s = sup(Ending::Exited);
        let ok = out(AgentStatus::Success, None);
        assert_eq!(decide(&s, &ok, false, None, None, None).0, Status::Success);
        // Claude Code denied the write: the reason says so.
        let denied = AgentOutcome {
            reason: Some("permission denied: Write".into()),
            ..out(AgentStatus::Success, Some(0.01))
        };
        let mut over = sup(Ending::OverBudget);
        over.progress.cost = Some(1.25);
        let mut steps = sup(Ending::MaxSteps);
        steps.progress.steps = Some(4);
        let cases: [Case<'_>; 7] = [
            (
                &s,
                &denied,
                true,
                [None, None, None],
                Status::Failed,
                "agent finished but changed no files; permission denied: Write",
            ),
            (
                &s,
                &out(AgentStatus::Success, Some(2.0)),
                false,
                [Some(1.0), None, None],
                Status::Partial,
                "budget exceeded: $2.0000 of $1.0000",
            ),
            (
                &sup(Ending::TimedOut),
                &ok,
                false,
                [None, Some(5.0), None],
                Status::Timeout,
                "timed out after 5s",
            ),
            (
                &sup(Ending::Interrupted),
                &ok,
                false,
                [None, None, None],
                Status::Failed,
                "interrupted",
            ),
            (
                &over,
                &ok,
                false,
                [Some(1.0), None, None],
                Status::Partial,
                "budget exceeded ($1.2500 of $1.0000); stopped",
            ),
            (
                &steps,
                &out(AgentStatus::Failed, None),
                false,
                [None, None, None],
                Status::Partial,
                "max steps reached (4 steps); stopped",
            ),
            (
                &sup(Ending::Inactive),
                &ok,
                false,
                [None, None, Some(30.0)],
                Status::Timeout,
                "no output for 30s (inactivity timeout); stopped",
            ),
        ];
        for case in cases {
            assert_decides(case);
        }
    }

    /// What the agent was seen doing, what it said, whether it changed nothing, the
    /// limits (budget, timeout, inactivity); the status and reason expected.
    type Case<'a> = (
        &'a Supervised,
        &'a AgentOutcome,
        bool,
        [Option<f64>; 3],
        Status,
        &'a str,
    );

    fn assert_decides((seen, said, empty, [budget, timeout, idle], status, reason): Case<'_>) {
        let (got, why) = decide(seen, said, empty, budget, timeout, idle);
        assert_eq!((got, why.as_deref()), (status, Some(reason)), "{reason}");
    }
}
