//! Fuzzing entry points (hidden from the docs): one function per reader of input that
//! an agent or a job can write — agent output, live output streams, `results.json`,
//! the journal, bundle headers, `fanout.yml`, plan files, matrix artifacts and the
//! run directory's records. The cargo-fuzz targets under `fuzz/` call them, and so
//! does `tests/it/fuzz_corpus.rs`, which replays the kept corpus on the stable toolchain.
//!
//! Each entry takes arbitrary bytes and drives the same public code fanout runs on
//! such input. It must not panic, hang or allocate without bound, and it asserts the
//! promises the readers make (a cost is finite and not negative, a reason is one
//! bounded line, what is read back serializes again): a failed assertion is a finding.
//!
//! It calls into every stage, so it comes last in the module order, after [`crate::cli`].

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use crate::agent::{
    AgentOutcome, AgentSpec, AgentStatus, Observed, Progress, WATCH_LINE_MAX, WorkerContext,
};
use crate::config::AgentDef;
use crate::plan::Plan;
use crate::run::process::{LastLine, LineSplitter};
use crate::run::results::RunReport;

/// A fuzz target: the name of its directory under `fuzz/corpus/` and its entry.
#[derive(Clone, Copy)]
pub struct Target {
    /// Name (also the cargo-fuzz binary's name).
    pub name: &'static str,
    /// Entry point.
    pub run: fn(&[u8]),
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "agent_claude",
        run: agent_claude,
    },
    Target {
        name: "agent_codex",
        run: agent_codex,
    },
    Target {
        name: "agent_aider",
        run: agent_aider,
    },
    Target {
        name: "agent_architect",
        run: agent_architect,
    },
    Target {
        name: "agent_command",
        run: agent_command,
    },
    Target {
        name: "agent_stream",
        run: agent_stream,
    },
    Target {
        name: "results_json",
        run: results_json,
    },
    Target {
        name: "journal_json",
        run: journal_json,
    },
    Target {
        name: "bundle_header",
        run: bundle_header,
    },
    Target {
        name: "config_yml",
        run: config_yml,
    },
    Target {
        name: "plan_json",
        run: plan_json,
    },
    Target {
        name: "worker_artifact",
        run: worker_artifact,
    },
    Target {
        name: "run_records",
        run: run_records,
    },
    Target {
        name: "git_config",
        run: git_config,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().copied().find(|t| t.name == name)
}

// ---------------------------------------------------------------------------------
// Agent output.

/// Models a worker may be given: none, priced ones (token usage gets a cost), and one
/// without a price.
const MODELS: [Option<&str>; 4] = [
    None,
    Some("gpt-4o"),
    Some("claude-sonnet-4-5"),
    Some("local/unpriced-model"),
];

/// What fanout observed, from a control byte: bits 0–1 the exit (0, 1, 2, or killed
/// by signal 9), bits 2–3 the model.
fn observed<'a>(how: u8, stdout: &'a [u8], result_file: Option<&'a [u8]>) -> Observed<'a> {
    let exit = [Some(0), Some(1), Some(2), None][usize::from(how & 3)];
    Observed {
        exit_code: exit,
        signal: exit.is_none().then_some(9),
        stdout_tail: stdout,
        result_file,
        model: MODELS[usize::from((how >> 2) & 3)],
    }
}

/// The promises an adapter makes about an outcome.
fn check_outcome(what: &str, o: &AgentOutcome, source_known: bool) {
    if let Some(c) = o.cost {
        assert!(c.is_finite() && c >= 0.0, "{what}: cost {c}");
    }
    assert_eq!(
        o.cost.is_some(),
        source_known,
        "{what}: a cost and its source go together ({o:?})"
    );
    if let Some(r) = &o.reason {
        assert!(
            r.chars().count() <= 1000 && !r.chars().any(char::is_control),
            "{what}: reason {r:?}"
        );
    }
}

fn check_progress(what: &str, p: Progress) {
    if let Some(c) = p.cost {
        assert!(c.is_finite() && c >= 0.0, "{what}: live cost {c}");
    }
}

fn builtin(name: &str) -> AgentSpec {
    AgentSpec::resolve(name, &BTreeMap::new(), "fanout.yml", true).expect("a built-in agent")
}

/// Read `out` as agent `spec`'s output: the outcome, then the live watch over the
/// same lines.
fn read_agent_output(spec: &AgentSpec, how: u8, out: &[u8], result_file: Option<&[u8]>) {
    let adapter = spec.adapter();
    let seen = observed(how, out, result_file);
    let o = adapter.outcome(&seen);
    let source = adapter.cost_source(&o, &seen);
    check_outcome(&spec.name, &o, source.is_some());
    if o.status == AgentStatus::Success {
        assert_eq!(seen.exit_code, Some(0), "success needs exit code 0");
    }
    if let Some(mut w) = adapter.watch(seen.model) {
        for line in out.split(|b| *b == b'\n') {
            w.line(&line[..line.len().min(WATCH_LINE_MAX)]);
            check_progress(&spec.name, w.progress());
        }
        assert_eq!(w.progress().cost.is_some(), w.cost_source().is_some());
    }
}

/// Claude Code's `--output-format stream-json` or `json`: a control byte (see
/// [`observed`]), then stdout.
pub fn agent_claude(data: &[u8]) {
    builtin_output("claude", data);
}

/// Codex's JSON lines: a control byte, then stdout.
pub fn agent_codex(data: &[u8]) {
    builtin_output("codex", data);
}

/// aider's plain text: a control byte, then stdout.
pub fn agent_aider(data: &[u8]) {
    builtin_output("aider", data);
}

/// architect's JSON report among log lines: a control byte, then stdout.
pub fn agent_architect(data: &[u8]) {
    builtin_output("architect", data);
}

fn builtin_output(name: &str, data: &[u8]) {
    let Some((&how, out)) = data.split_first() else {
        return;
    };
    read_agent_output(&builtin(name), how, out, None);
}

/// A `command` agent: a control byte, a format byte (`json`, `jsonl`, `file`,
/// `exit-code`), a line of tab-separated result paths and values (status, steps,
/// cost, reason, then comma-separated success and partial values; empty is the
/// default), then its stdout — which is also its `$FANOUT_RESULT` file when bit 4 of
/// the control byte is set.
pub fn agent_command(data: &[u8]) {
    let [how, format, rest @ ..] = data else {
        return;
    };
    let (header, out) = match rest.iter().position(|b| *b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let Ok(header) = std::str::from_utf8(header) else {
        return;
    };
    let mut fields = header.split('\t');
    let mut path = || fields.next().filter(|s| !s.is_empty()).map(str::to_owned);
    let (status, steps, cost, reason) = (path(), path(), path(), path());
    let list = |s: Option<String>| -> Vec<String> {
        s.map(|s| s.split(',').map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let (success, partial) = (list(path()), list(path()));
    let format = ["json", "jsonl", "file", "exit-code"][usize::from(format & 3)];
    let def: AgentDef = serde_json::from_value(json!({
        "command": ["agent", "{task}"],
        "result": {
            "format": format, "status": status, "steps": steps, "cost": cost,
            "reason": reason, "success": success, "partial": partial,
        },
    }))
    .expect("an agent definition");
    let defs = BTreeMap::from([("fuzzed".to_owned(), def)]);
    // A definition the checks refuse never reaches the adapter.
    let Ok(spec) = AgentSpec::resolve("fuzzed", &defs, "fanout.yml", true) else {
        return;
    };
    let file = (how & 0x10 != 0).then_some(out);
    read_agent_output(&spec, *how, out, file);
}

/// The live reading of an agent's stdout as it streams: an adapter byte, a byte that
/// seeds how the stream is cut into reads, a byte that picks the longest line kept
/// (small, so lines longer than it are common), then the stream. Every built-in and
/// a `jsonl` command agent (the adapters that watch) read it through the splitter and
/// the last-line display the supervisor uses.
pub fn agent_stream(data: &[u8]) {
    let [adapter, seed, max, stream @ ..] = data else {
        return;
    };
    let spec = match adapter % 4 {
        0 => builtin("claude"),
        1 => builtin("codex"),
        2 => builtin("aider"),
        _ => {
            let def: AgentDef = serde_json::from_value(json!({
                "command": ["agent"],
                "result": {"format": "jsonl", "cost": "usage.cost", "steps": "turns"},
            }))
            .expect("an agent definition");
            let defs = BTreeMap::from([("jsonl".to_owned(), def)]);
            AgentSpec::resolve("jsonl", &defs, "fanout.yml", true).expect("a valid definition")
        }
    };
    let model = MODELS[usize::from(adapter >> 5 & 3)];
    let line_max = if *max == 0 {
        WATCH_LINE_MAX
    } else {
        usize::from(*max)
    };
    let mut watch = spec
        .adapter()
        .watch(model)
        .expect("an adapter that watches");
    // As the supervisor reads stdout: lines (cut at the longest kept) to the watch,
    // and the last complete line for the progress display.
    let mut splitter = LineSplitter::with_max(line_max);
    let mut last = LastLine::default();
    let mut rng = u64::from(*seed) | 0x9e37_79b9_7f4a_7c00;
    let mut rest = stream;
    while !rest.is_empty() {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let n = (rng % 97) as usize + 1;
        let (chunk, tail) = rest.split_at(n.min(rest.len()));
        splitter.feed(chunk, |line| {
            assert!(
                line.len() <= line_max,
                "a line longer than the splitter keeps"
            );
            watch.line(line);
        });
        check_progress(&spec.name, watch.progress());
        last.feed(chunk);
        assert!(last.last().chars().count() <= LastLine::MAX);
        rest = tail;
    }
    splitter.flush(|line| watch.line(line));
    check_progress(&spec.name, watch.progress());
    assert_eq!(
        watch.progress().cost.is_some(),
        watch.cost_source().is_some()
    );
}

// ---------------------------------------------------------------------------------
// Run records.

/// `results.json`, then everything fanout does with a report it read back: the
/// summary (whole and cut to a limit), the terminal and PR tables, the totals,
/// selection, the integration branch's name and each pull request's title and body.
pub fn results_json(data: &[u8]) {
    let Ok(mut report) = RunReport::parse(data) else {
        return;
    };
    let _ = serde_json::to_vec_pretty(&report).expect("a report read back serializes");
    let _ = crate::report::summary::render_summary(&report, None);
    let _ = crate::report::summary::render_summary(&report, Some(2000));
    let _ = crate::report::summary::render_pull_requests(&report);
    let _ = crate::report::table::table(&report.results);
    let _ = crate::model::Totals::of(&report.results);
    let _ = crate::fanin::conflicts::integration_branch(&report);
    let _ = crate::fanin::conflicts::integration_result(&report);
    let templates = crate::publish::body::Templates::default();
    for r in &report.results {
        if let Ok((title, body)) =
            templates.render_titled(r, &report.results, (&report.run_id, None), None)
        {
            assert!(title.chars().count() <= crate::publish::body::TITLE_LIMIT);
            assert!(body.chars().count() <= crate::publish::body::BODY_LIMIT);
        }
        let _ = crate::fanin::select::not_selected(r, &report.results);
    }
    let plan = report.plan.clone();
    crate::fanin::select::apply(&plan, &mut report.results, None);
}

/// The run journal (`journal.json`), as cleanup and resume read it.
pub fn journal_json(data: &[u8]) {
    let Ok(journal) = crate::run::journal::Journal::parse(data) else {
        return;
    };
    let _ = serde_json::to_vec_pretty(&journal).expect("a journal read back serializes");
}

/// A git bundle's header, as the aggregate job reads a worker job's bundle and checks
/// it against the plan before importing it.
pub fn bundle_header(data: &[u8]) {
    use crate::fanin::bundle::{check_header, parse_header};
    match parse_header(data) {
        Ok(h) => {
            // The planned branch: one the fuzzer cannot guess, and the bundle's own
            // first branch (so the checks past the branch's name are reached too).
            let own = h
                .refs
                .first()
                .and_then(|(_, n)| n.strip_prefix("refs/heads/"));
            for branch in ["fanout/r1/w1-task"].into_iter().chain(own) {
                if let Ok(tip) = check_header(&h, branch, BASE_COMMIT) {
                    assert_eq!(h.refs.len(), 1);
                    assert_eq!(tip, h.refs[0].0);
                    assert!(h.prerequisites.iter().all(|p| p == BASE_COMMIT));
                }
            }
        }
        Err(e) => assert!(e.chars().count() <= 1000, "an unbounded message: {e:?}"),
    }
}

/// The base commit of the plans the targets make up.
const BASE_COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// `fanout.yml`: parsed and checked, its errors rendered, then the settings resolved
/// from it and a plan built from them (with its matrix chunks).
pub fn config_yml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fanout.yml");
    let file = match crate::plan::settings::parse_config(text, path) {
        Ok(f) => f,
        Err(e) => {
            let _ = e.to_string();
            let _ = e.snippet();
            return;
        }
    };
    let flags = crate::plan::settings::PlanFlags {
        allow_empty: true,
        ..Default::default()
    };
    let settings = match crate::plan::settings::Settings::resolve(&file, path, &flags) {
        Ok(s) => s,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let base = crate::repo::Base {
        requested: "HEAD".into(),
        branch: Some("main".into()),
        commit: BASE_COMMIT.into(),
    };
    let plan = crate::plan::assign::build(&settings, base, "20260101-000000-abcdef");
    plan_uses(&plan);
}

/// A plan file (`fanout worker --plan`, a run directory's `plan.json`), then what a
/// worker job does with it: matrix chunks and each worker's command line.
pub fn plan_json(data: &[u8]) {
    if let Ok(plan) = Plan::parse(data) {
        plan_uses(&plan);
    }
}

fn plan_uses(plan: &Plan) {
    let _ = serde_json::to_vec(plan).expect("a plan serializes");
    let _ = crate::plan::matrix::matrix_chunks(plan);
    for w in plan.workers.iter().take(64) {
        let adapter = plan.agent_of(w).adapter();
        let limits = plan.limits_of(w);
        let ctx = WorkerContext {
            run_id: &plan.run_id,
            worker_id: w.id,
            task: &w.task.prompt,
            model: w.model.as_deref(),
            branch: &w.branch,
            worktree: Path::new("/tmp/wt"),
            max_steps: limits.max_steps,
            budget: limits.budget,
            timeout: limits
                .timeout
                .and_then(|t| std::time::Duration::try_from_secs_f64(t).ok()),
            result_file: Path::new("/tmp/result.json"),
            private_dir: Path::new("/tmp/private"),
            // Both command lines: confined and not.
            sandboxed: w.id % 2 == 0,
        };
        let _ = adapter.command(&ctx);
    }
}

/// A matrix worker job's `result.json`, as the aggregate job reads it.
pub fn worker_artifact(data: &[u8]) {
    if let Ok(a) = crate::fanin::artifact::WorkerArtifact::parse(data) {
        let _ = serde_json::to_vec(&a).expect("an artifact serializes");
        let _ = crate::report::table::table(std::slice::from_ref(&a.result));
    }
}

/// The run directory's small records, by a selector byte: a worker's resume record
/// (`records/w<id>.json`), a process-group record (`logs/w<id>.pgid`), the attempt
/// counter, and setup's baseline (`.git/worktrees/<name>/fanout-setup.json`).
pub fn run_records(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            if let Ok(r) = crate::run::resume::parse_record(rest) {
                let _ = crate::run::resume::finished(&r);
                let _ = crate::report::table::table(&[r]);
            }
        }
        1 => {
            if let Some((pgid, program)) = crate::run::resume::parse_group_record(rest) {
                assert!(
                    pgid > 1,
                    "a group record never names pid 0, 1 or a negative"
                );
                assert!(!program.contains('\n'));
            }
        }
        2 => {
            let n = crate::run::resume::parse_attempt(rest);
            assert!(n >= 1);
        }
        _ => {
            let _ = crate::run::setup::Baseline::parse(rest);
        }
    }
}

// ---------------------------------------------------------------------------------
// The repository's git configuration.

/// `git config --list --show-scope -z` output (an agent can write the repository's
/// configuration): a flag byte (bit 0: scoped; bit 1: trust the protected `filter.*`
/// entries, as a run that captured the user's own drivers does), then the listing. Its
/// `submodule.*` entries also stand for a `.gitmodules`. Unless the overrides are
/// refused, the configuration git ends up with — the repository's entries, then the
/// overrides, then what is trusted, each later one winning — runs nothing the
/// repository named that the caller did not vouch for.
pub fn git_config(data: &[u8]) {
    use crate::git::harden::{Entry, Scope, neutralise, parse_list};
    let Some((&flags, listing)) = data.split_first() else {
        return;
    };
    let entries = parse_list(listing, flags & 1 != 0, Scope::Repository);
    let gitmodules: Vec<Entry> = entries
        .iter()
        .filter(|e| e.key.starts_with("submodule."))
        .cloned()
        .collect();
    let trusted: Vec<(String, String)> = if flags & 2 != 0 {
        entries
            .iter()
            .filter(|e| e.scope == Scope::Protected && e.key.starts_with("filter."))
            .map(|e| (e.key.clone(), e.value.clone()))
            .collect()
    } else {
        Vec::new()
    };
    let Ok(overrides) = neutralise(&entries, &gitmodules, &trusted) else {
        return;
    };
    // As `Git::invocation` passes them: the fixed options, the overrides, the trusted.
    let everything: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_str()))
        .chain(crate::git::harden::FIXED.iter().copied())
        .chain(overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .chain(trusted.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .collect();
    let effective = |key: &str| {
        let want = git_key(key);
        everything
            .iter()
            .rev()
            .find(|(k, _)| git_key(k) == want)
            .map(|(_, v)| *v)
    };
    let vouched = |key: &str, value: &str| {
        trusted
            .iter()
            .any(|(k, v)| git_key(k) == git_key(key) && v == value)
    };
    for e in entries.iter().filter(|e| e.scope == Scope::Repository) {
        let (section, sub, var) = git_key(&e.key);
        let wanted: &[&str] = match (section.as_str(), sub.is_some(), var.as_str()) {
            ("filter", true, "clean" | "smudge" | "process") => &[""],
            ("diff", true, "textconv") => &["cat"],
            ("core", false, "fsmonitor") => &["false"],
            ("core", false, "hookspath") => &["/dev/null"],
            ("credential", false, "helper") => &[""],
            ("diff", true, "command")
            | ("merge", true, "driver")
            | ("hook", true, "command")
            | ("credential", true, "helper")
            | ("http", true, "extraheader")
            | ("core", false, "alternaterefscommand") => &[""],
            ("submodule", true, "update") => {
                let v = effective(&e.key).unwrap_or_default();
                assert!(
                    !v.trim_start().starts_with('!'),
                    "{}: still {v:?} after {overrides:?}",
                    e.key
                );
                continue;
            }
            _ => continue,
        };
        let v = effective(&e.key).unwrap_or_default();
        assert!(
            wanted.contains(&v) || vouched(&e.key, v),
            "{} = {:?} from the repository: git would run {v:?} (overrides {overrides:?})",
            e.key,
            e.value
        );
    }
}

/// A configuration key as git compares them: section and variable in any case, the
/// subsection exactly.
fn git_key(key: &str) -> (String, Option<String>, String) {
    let (section, rest) = key.split_once('.').unwrap_or((key, ""));
    let (sub, var) = match rest.rsplit_once('.') {
        Some((sub, var)) => (Some(sub.to_owned()), var),
        None => (None, rest),
    };
    (section.to_ascii_lowercase(), sub, var.to_ascii_lowercase())
}
