//! The `aider` adapter (PyPI `aider-chat`), headless.
//!
//! Command: `aider --message TASK --yes-always --no-auto-commits --no-gitignore
//! --no-check-update --analytics-disable --no-show-model-warnings --no-pretty
//! --no-fancy-input --no-stream [--model M] [args…]`. fanout commits aider's edits
//! itself (`--no-auto-commits`), and its `.aider*` files are never committed
//! (`--no-gitignore` keeps it from adding them to `.gitignore`). `--no-stream` makes
//! aider take token counts from the API's usage rather than its own estimate, so its
//! cost is the provider's; it also means aider prints nothing while a response is
//! generated — keep `inactivity_timeout` above the slowest response.
//!
//! Outcome, from its plain-text output:
//!
//! | output | status | reason |
//! |---|---|---|
//! | exit code ≠ 0 | failed | the last error line, or the exit code |
//! | a `litellm.…Error` / `APIError` line | failed | that line (aider exits 0 on API errors) |
//! | `Only N reflections allowed, stopping.` | partial | "aider stopped after N reflections" |
//! | otherwise | success | |
//!
//! Steps are the model exchanges (`Tokens:` lines). Cost is aider's own session figure
//! (the last `Cost: $X message, $Y session.` line); when it prints tokens but no cost
//! (a model it has no price for), the tokens × the price table; otherwise unknown. The
//! `Cost:` lines are watched live, for the budget.

use std::collections::BTreeMap;

use super::prices::{self, Usage};
use super::{
    Adapter, AgentOutcome, AgentSpec, AgentStatus, CommandLine, CostSource, Observed, Progress,
    StreamWatch, WorkerContext, clean_reason,
};

pub(super) struct AiderAdapter {
    spec: AgentSpec,
}

impl AiderAdapter {
    pub(super) fn new(spec: AgentSpec) -> Self {
        AiderAdapter { spec }
    }
}

/// A token count as aider prints it: `100`, `1.0k`, `2.5M`.
fn tokens(s: &str) -> Option<u64> {
    let s = s.trim().trim_end_matches(',');
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1e3),
        'm' | 'M' => (&s[..s.len() - 1], 1e6),
        _ => (s, 1.0),
    };
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * mult).round() as u64)
}

/// What aider's output says.
#[derive(Debug, Default, Clone, PartialEq)]
struct Tally {
    exchanges: u32,
    usage: Usage,
    session_cost: Option<f64>,
    error: Option<String>,
    reflections: Option<String>,
    last_line: Option<String>,
}

impl Tally {
    fn line(&mut self, raw: &str) {
        let line = raw.trim();
        if line.is_empty() {
            return;
        }
        self.last_line = Some(clean_reason(line));
        if let Some(rest) = line.strip_prefix("Tokens:") {
            self.exchanges = self.exchanges.saturating_add(1);
            // "2.3k sent, 1.2k cache write, 500 cache hit, 300 received."
            let mut u = Usage::default();
            let words: Vec<&str> = rest
                .split("Cost:")
                .next()
                .unwrap_or("")
                .split_whitespace()
                .map(|w| w.trim_end_matches(['.', ',']))
                .collect();
            for (i, w) in words.iter().enumerate() {
                let n = || i.checked_sub(1).and_then(|j| tokens(words[j]));
                match *w {
                    "sent" => u.input = n().unwrap_or(u.input),
                    "received" => u.output = n().unwrap_or(u.output),
                    "hit" if i >= 2 && words[i - 1] == "cache" => {
                        u.cached_input = tokens(words[i - 2]).unwrap_or(0);
                    }
                    _ => {}
                }
            }
            self.usage.add(u);
            if let Some(c) = rest.split("Cost:").nth(1) {
                self.cost_text(c);
            }
        } else if let Some(c) = line.strip_prefix("Cost:") {
            self.cost_text(c);
        } else if (line.starts_with("litellm.") && line.contains("Error"))
            || line.contains("APIError")
            || line.starts_with("openai.") && line.contains("Error")
        {
            if self.error.is_none() {
                self.error = Some(clean_reason(line));
            }
        } else if line.starts_with("Only ") && line.contains("reflections allowed") {
            self.reflections = Some(
                match line.split_whitespace().nth(1).map(str::parse::<u32>) {
                    Some(Ok(n)) => format!("aider stopped after {n} reflections"),
                    _ => "aider stopped reflecting".to_owned(),
                },
            );
        }
    }

    /// `$0.0012 message, $0.0048 session.`
    fn cost_text(&mut self, text: &str) {
        for part in text.split(',') {
            let part = part.trim().trim_end_matches('.');
            if let Some(v) = part.strip_suffix(" session")
                && let Some(v) = v.trim().strip_prefix('$')
                && let Ok(c) = v.parse::<f64>()
                && c.is_finite()
                && c >= 0.0
            {
                self.session_cost = Some(c);
            }
        }
    }

    fn of(text: &[u8]) -> Tally {
        let mut t = Tally::default();
        for line in String::from_utf8_lossy(text).lines() {
            t.line(line);
        }
        t
    }

    /// The cost and where it came from.
    fn cost(
        &self,
        model: Option<&str>,
        table: &BTreeMap<String, prices::Price>,
    ) -> Option<(f64, CostSource)> {
        if let Some(c) = self.session_cost {
            return Some((c, CostSource::Agent));
        }
        if self.usage.is_empty() {
            return None;
        }
        prices::cost(model?, self.usage, table).map(|c| (c, CostSource::PriceTable))
    }
}

impl Adapter for AiderAdapter {
    fn command(&self, ctx: &WorkerContext<'_>) -> Result<CommandLine, String> {
        let mut args: Vec<String> = [
            "--message",
            ctx.task,
            "--yes-always",
            "--no-auto-commits",
            "--no-gitignore",
            "--no-check-update",
            "--analytics-disable",
            "--no-show-model-warnings",
            "--no-pretty",
            "--no-fancy-input",
            "--no-stream",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        if let Some(m) = ctx.model {
            args.extend(["--model".into(), m.to_owned()]);
        }
        let mut defaults = Vec::new();
        // aider writes a placeholder user.name/user.email into the repository's config
        // when git has none, and the config is shared by every worktree: the user's
        // checkout would change, and concurrent workers race on `.git/config.lock`
        // (aider then crashes). Give its git an identity through the environment.
        if std::env::var_os("GIT_CONFIG_COUNT").is_none() {
            for (k, v) in [
                ("GIT_CONFIG_COUNT", "2"),
                ("GIT_CONFIG_KEY_0", "user.name"),
                ("GIT_CONFIG_VALUE_0", "fanout agent"),
                ("GIT_CONFIG_KEY_1", "user.email"),
                ("GIT_CONFIG_VALUE_1", "fanout@users.noreply.github.com"),
            ] {
                defaults.push((k.to_owned(), v.to_owned()));
            }
        }
        super::builtin::command_line(&self.spec, ctx, args, Vec::new(), defaults)
    }

    /// aider's last reply: the lines before its last `Tokens:` line, back to the
    /// previous one (or its banner).
    fn findings(&self, observed: &Observed<'_>) -> Option<String> {
        last_reply(&String::from_utf8_lossy(observed.stdout_tail))
    }

    fn outcome(&self, observed: &Observed<'_>) -> AgentOutcome {
        let t = Tally::of(observed.stdout_tail);
        let cost = t.cost(observed.model, &self.spec.prices).map(|(c, _)| c);
        let steps = Some(t.exchanges);
        let (status, reason) = match (observed.exit_code, observed.signal) {
            (Some(0), _) => match (&t.error, &t.reflections) {
                (Some(e), _) => (AgentStatus::Failed, Some(e.clone())),
                (None, Some(r)) => (AgentStatus::Partial, Some(r.clone())),
                (None, None) => (AgentStatus::Success, None),
            },
            (Some(code), _) => (
                AgentStatus::Failed,
                Some(match t.error.as_ref().or(t.last_line.as_ref()) {
                    Some(l) => format!("exit code {code}: {l}"),
                    None => format!("exit code {code}"),
                }),
            ),
            (None, Some(sig)) => (AgentStatus::Failed, Some(format!("killed by signal {sig}"))),
            (None, None) => (
                AgentStatus::Failed,
                Some("aider did not exit normally".into()),
            ),
        };
        AgentOutcome {
            status,
            steps,
            cost,
            reason,
        }
    }

    fn cost_source(&self, _outcome: &AgentOutcome, observed: &Observed<'_>) -> Option<CostSource> {
        Tally::of(observed.stdout_tail)
            .cost(observed.model, &self.spec.prices)
            .map(|(_, source)| source)
    }

    fn watch(&self, model: Option<&str>) -> Option<Box<dyn StreamWatch>> {
        Some(Box::new(AiderWatch {
            tally: Tally::default(),
            model: model.map(str::to_owned),
            prices: self.spec.prices.clone(),
        }))
    }
}

struct AiderWatch {
    tally: Tally,
    model: Option<String>,
    prices: BTreeMap<String, prices::Price>,
}

impl StreamWatch for AiderWatch {
    fn line(&mut self, line: &[u8]) {
        self.tally.line(&String::from_utf8_lossy(line));
    }

    fn progress(&self) -> Progress {
        Progress {
            cost: self
                .tally
                .cost(self.model.as_deref(), &self.prices)
                .map(|(c, _)| c),
            steps: Some(self.tally.exchanges),
        }
    }

    fn cost_source(&self) -> Option<CostSource> {
        self.tally
            .cost(self.model.as_deref(), &self.prices)
            .map(|(_, s)| s)
    }
}

/// The text of aider's last reply: what it printed before its last `Tokens:` line,
/// back to the `Tokens:` line before that, or to the end of its banner.
fn last_reply(out: &str) -> Option<String> {
    let lines: Vec<&str> = out.lines().collect();
    let end = lines.iter().rposition(|l| l.starts_with("Tokens:"))?;
    let start = lines[..end]
        .iter()
        .rposition(|l| {
            l.starts_with("Tokens:")
                || l.starts_with("https://aider.chat/")
                || l.starts_with("Repo-map:")
        })
        .map_or(0, |i| i + 1);
    let reply = lines[start..end].join("\n");
    let reply = reply.trim();
    (!reply.is_empty()).then(|| reply.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tests_support::{builtin, observed_with_model, recorded};

    fn adapter() -> Box<dyn Adapter> {
        builtin("aider")
    }

    #[test]
    fn recorded_outputs_map_onto_outcomes() {
        // Cost: aider's own session figure (the recording priced the fake model).
        assert_eq!(
            recorded("aider", "success.txt", None),
            AgentOutcome {
                status: AgentStatus::Success,
                steps: Some(1),
                cost: Some(0.0012),
                reason: None
            }
        );
        // Exit 0, but it gave up after 3 reflections: partial; 4 exchanges, and the
        // last `Cost:` line's session figure.
        assert_eq!(
            recorded("aider", "max_turns.txt", None),
            AgentOutcome {
                status: AgentStatus::Partial,
                steps: Some(4),
                cost: Some(0.0048),
                reason: Some("aider stopped after 3 reflections".into())
            }
        );
        // Exit 0 on an API error: the litellm error line makes it a failure.
        assert_eq!(
            recorded("aider", "api_error.txt", None),
            AgentOutcome {
                status: AgentStatus::Failed,
                steps: Some(0),
                cost: None,
                reason: Some(
                    "litellm.BadRequestError: OpenAIException - fake-model: scripted API error"
                        .into()
                )
            }
        );
    }

    #[test]
    fn command_line() {
        let dir = std::path::Path::new("/w");
        let ctx = WorkerContext {
            task: "fix it",
            model: Some("openai/gpt-4o"),
            max_steps: 7,
            ..WorkerContext::for_test(dir)
        };
        let c = adapter().command(&ctx).unwrap();
        assert_eq!(c.program, "aider");
        assert_eq!(
            c.args,
            [
                "--message",
                "fix it",
                "--yes-always",
                "--no-auto-commits",
                "--no-gitignore",
                "--no-check-update",
                "--analytics-disable",
                "--no-show-model-warnings",
                "--no-pretty",
                "--no-fancy-input",
                "--no-stream",
                "--model",
                "openai/gpt-4o"
            ]
        );
        // aider's git gets an identity from the environment, so it never writes one
        // into the repository's shared config.
        if std::env::var_os("GIT_CONFIG_COUNT").is_none() {
            let env: BTreeMap<_, _> = c.env.iter().cloned().collect();
            assert_eq!(env["GIT_CONFIG_COUNT"], "2");
            assert_eq!(env["GIT_CONFIG_KEY_0"], "user.name");
            assert_eq!(env["GIT_CONFIG_KEY_1"], "user.email");
        }
    }

    #[test]
    fn token_counts_and_cost_fallbacks() {
        assert_eq!(tokens("1.0k"), Some(1000));
        assert_eq!(tokens("2.5M"), Some(2_500_000));
        assert_eq!(tokens("16"), Some(16));
        assert_eq!(tokens("x"), None);
        let t = Tally::of(b"Tokens: 2.0k sent, 300 received.\nTokens: 1k sent, 100 received.\n");
        assert_eq!(t.exchanges, 2);
        assert_eq!(t.usage.input, 3000);
        assert_eq!(t.usage.output, 400);
        assert_eq!(t.session_cost, None);
        let none = BTreeMap::new();
        // No cost printed: price table for a known model, unknown otherwise.
        let t2 = Tally::of(b"Tokens: 2.3k sent, 1.2k cache write, 500 cache hit, 300 received.\n");
        assert_eq!(
            t2.usage,
            Usage {
                input: 2300,
                cached_input: 500,
                output: 300
            }
        );
        let (c, src) = t.cost(Some("openai/gpt-4o"), &none).unwrap();
        assert_eq!(src, CostSource::PriceTable);
        assert!((c - (3000.0 * 2.5 + 400.0 * 10.0) / 1e6).abs() < 1e-12);
        assert_eq!(t.cost(Some("local-llama"), &none), None);
        assert_eq!(t.cost(None, &none), None);
        // A failing exit code names the last line.
        let a = adapter();
        let o = a.outcome(&observed_with_model(b"Model foo not found\n", 1, None));
        assert_eq!(
            o.reason.as_deref(),
            Some("exit code 1: Model foo not found")
        );
    }

    #[test]
    fn live_cost_follows_the_session_figure() {
        let a = adapter();
        let mut w = a.watch(None).unwrap();
        assert_eq!(w.progress().cost, None);
        w.line(b"Tokens: 1.0k sent, 100 received. Cost: $0.0012 message, $0.0012 session.");
        assert_eq!(w.progress().cost, Some(0.0012));
        w.line(b"Tokens: 1.0k sent, 100 received. Cost: $0.0012 message, $0.0024 session.");
        assert_eq!(
            w.progress(),
            Progress {
                cost: Some(0.0024),
                steps: Some(2)
            }
        );
    }
}
