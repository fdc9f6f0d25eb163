//! Live progress, fed by the executor's typed [`Event`]s.
//!
//! * On a terminal: an indicatif multi-progress with a line per worker (spinner,
//!   status, elapsed time, the agent's last output line).
//! * Otherwise, or with `--quiet`: plain log lines on stderr.
//! * In GitHub Actions: plain lines, plus a `::group::` per finished worker holding the
//!   tail of its log, and an `::error`/`::warning` annotation per unsuccessful worker
//!   (all on stderr; the log tail, agent text, issues no workflow command:
//!   [`crate::util::out`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::table::{TASK_CHARS, format_cost, format_duration};
use crate::model::{Cause, Status, WorkerResult};
use crate::plan::Plan;
use crate::run::event::{Event, Reporter, StopLevel};
use crate::util::out::{command, errln, printable};

/// Lines of a worker's log shown in its Actions group.
const LOG_TAIL_LINES: usize = 40;
/// Most bytes of a worker's log read for those lines.
const LOG_TAIL_BYTES: u64 = 64 * 1024;

/// Which reporter to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// indicatif bars.
    Bars,
    /// Plain lines.
    Plain,
    /// Plain lines with GitHub Actions workflow commands.
    GitHub,
}

impl Style {
    /// Pick from the environment: Actions, a terminal, or plain.
    pub fn detect(quiet: bool) -> Style {
        use std::io::IsTerminal;
        if crate::util::in_actions() {
            Style::GitHub
        } else if !quiet && std::io::stderr().is_terminal() {
            Style::Bars
        } else {
            Style::Plain
        }
    }
}

/// Build a reporter for `plan`.
pub fn reporter(style: Style, plan: &Plan) -> Box<dyn Reporter> {
    match style {
        Style::Bars => Box::new(Bars::new(plan)),
        Style::Plain => Box::new(Plain::new(plan, false)),
        Style::GitHub => Box::new(Plain::new(plan, true)),
    }
}

fn finished_line(r: &WorkerResult) -> String {
    let mut s = format!(
        "{} in {}, {} file{}, cost {}",
        r.status,
        format_duration(r.duration),
        r.files_modified.len(),
        if r.files_modified.len() == 1 { "" } else { "s" },
        format_cost(r.cost)
    );
    if let Some(reason) = &r.reason {
        s.push_str(" — ");
        s.push_str(reason);
    }
    s
}

/// Plain lines on stderr.
struct Plain {
    labels: BTreeMap<u32, String>,
    github: bool,
    warned: BTreeSet<String>,
}

impl Plain {
    fn new(plan: &Plan, github: bool) -> Plain {
        errln!(
            "fanout: run {} — {}; {}, base {}",
            plan.run_id,
            plan.shape(),
            plan.agents_label(),
            crate::util::short(&plan.base.commit)
        );
        Plain {
            labels: plan
                .workers
                .iter()
                .map(|w| {
                    let task = w.task.label(TASK_CHARS);
                    let model = w.model_cell(plan.several_agents());
                    (w.id, format!("#{} {task} [{model}]", w.id))
                })
                .collect(),
            github,
            warned: BTreeSet::new(),
        }
    }

    fn label(&self, id: u32) -> &str {
        self.labels.get(&id).map(String::as_str).unwrap_or("?")
    }
}

impl Reporter for Plain {
    fn event(&mut self, ev: &Event) {
        match ev {
            Event::WorkerStarted { id, worktree, .. } => {
                errln!(
                    "fanout: {} started in {}",
                    self.label(*id),
                    worktree.display()
                );
            }
            Event::WorkerOutput { .. } => {}
            Event::Warning { message, .. } => {
                if self.warned.insert(message.clone()) {
                    errln!("fanout: warning: {message}");
                    if self.github {
                        command!("::warning title=fanout::{}", escape_workflow_data(message));
                    }
                }
            }
            Event::WorkerTimedOut { id } => {
                errln!("fanout: {} timed out, stopping it", self.label(*id));
            }
            Event::WorkerFinished(r) => {
                let line = finished_line(r);
                if self.github {
                    let title = format!("{} {} ({})", self.label(r.worker_id), r.status, r.branch);
                    command!("::group::{}", escape_workflow_data(&title));
                    if let Some(log) = &r.log_path {
                        print_tail(log);
                    }
                    command!("::endgroup::");
                    if !r.status.is_good() {
                        let kind = if r.status == Status::Partial {
                            "warning"
                        } else {
                            "error"
                        };
                        command!(
                            "::{kind} title=fanout worker {}::{}",
                            r.worker_id,
                            escape_workflow_data(&line)
                        );
                    }
                }
                errln!("fanout: {} {}", self.label(r.worker_id), line);
            }
            Event::Stopping(level) => errln!("fanout: {}", stopping_text(*level)),
        }
    }
}

fn stopping_text(level: StopLevel) -> String {
    let interrupted = Cause::Interrupted;
    match level {
        StopLevel::Graceful => {
            format!("{interrupted}: stopping workers gracefully (signal again to kill them now)")
        }
        StopLevel::Kill => format!("{interrupted} again: killing workers"),
        StopLevel::Run => String::new(),
    }
}

/// Escape `%`, CR and LF for a workflow command's data.
pub fn escape_workflow_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// The tail of a worker's log, in its group: agent text, which issues no workflow
/// command (a line that could is printed in a stop-commands block:
/// [`crate::util::out`]).
fn print_tail(log: &Path) {
    let tail = log_tail(log);
    if !tail.is_empty() {
        errln!("{}", tail.join("\n"));
    }
}

/// The last [`LOG_TAIL_LINES`] lines of a worker's log. The agent wrote it: only its
/// last [`LOG_TAIL_BYTES`] are read (a log of one endless line, or a FIFO in its
/// place, must not hold the report up).
fn log_tail(log: &Path) -> Vec<String> {
    let Ok(bytes) = crate::util::read_tail(log, LOG_TAIL_BYTES) else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..]
        .iter()
        .map(|l| (*l).to_owned())
        .collect()
}

/// indicatif bars on a terminal.
struct Bars {
    multi: MultiProgress,
    bars: BTreeMap<u32, ProgressBar>,
    labels: BTreeMap<u32, String>,
    warned: BTreeSet<String>,
}

impl Bars {
    fn new(plan: &Plan) -> Bars {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let _ = multi.println(format!(
            "fanout: run {} — {}; {}",
            plan.run_id,
            plan.shape(),
            plan.agents_label()
        ));
        let style =
            ProgressStyle::with_template("{spinner:.cyan} {prefix:.bold} {elapsed:>4} {wide_msg}")
                .expect("valid template")
                .tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ ");
        let mut bars = BTreeMap::new();
        let mut labels = BTreeMap::new();
        // A plan of several agents names each worker's agent after its model.
        let with_agent = plan.several_agents();
        let width = if with_agent { 24 } else { 14 };
        for w in &plan.workers {
            let label = format!(
                "#{:<2} {:<24} {:<width$}",
                w.id,
                w.task.label(TASK_CHARS),
                truncate(&w.model_cell(with_agent), width)
            );
            let bar = multi.add(ProgressBar::new_spinner());
            bar.set_style(style.clone());
            bar.set_prefix(label.clone());
            bar.set_message("queued");
            bars.insert(w.id, bar);
            labels.insert(w.id, label);
        }
        Bars {
            multi,
            bars,
            labels,
            warned: BTreeSet::new(),
        }
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

impl Reporter for Bars {
    fn event(&mut self, ev: &Event) {
        match ev {
            Event::WorkerStarted { id, .. } => {
                if let Some(b) = self.bars.get(id) {
                    b.reset_elapsed();
                    b.enable_steady_tick(Duration::from_millis(120));
                    b.set_message("running");
                }
            }
            Event::WorkerOutput { id, line } => {
                if let Some(b) = self.bars.get(id) {
                    b.set_message(format!("running · {}", printable(line)));
                }
            }
            Event::Warning { message, .. } => {
                if self.warned.insert(message.clone()) {
                    let _ = self
                        .multi
                        .println(format!("fanout: warning: {}", printable(message)));
                }
            }
            Event::WorkerTimedOut { id } => {
                if let Some(b) = self.bars.get(id) {
                    b.set_message("timed out · stopping");
                }
            }
            Event::WorkerFinished(r) => {
                if let Some(b) = self.bars.get(&r.worker_id) {
                    let mark = match r.status {
                        Status::Success => "✔",
                        Status::Unchanged => "=",
                        Status::Partial => "◐",
                        Status::Failed => "✘",
                        Status::Timeout => "⏱",
                        Status::Skipped => "↷",
                    };
                    b.set_style(
                        ProgressStyle::with_template("{prefix:.bold} {wide_msg}")
                            .expect("valid template"),
                    );
                    let label = self.labels.get(&r.worker_id).cloned().unwrap_or_default();
                    b.set_prefix(format!("{mark} {label}"));
                    b.finish_with_message(printable(&finished_line(r)).into_owned());
                }
            }
            Event::Stopping(level) => {
                let _ = self
                    .multi
                    .println(format!("fanout: {}", stopping_text(*level)));
            }
        }
    }

    fn finish(&mut self) {
        for b in self.bars.values() {
            if !b.is_finished() {
                b.finish();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_tail_reads_only_the_end_and_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("w1.log");
        // One 4 MiB line, then 50 short ones: the long line is cut, the last 40 shown.
        let mut bytes = vec![b'x'; 4 << 20];
        for i in 0..50 {
            bytes.extend_from_slice(format!("\nline {i}").as_bytes());
        }
        std::fs::write(&log, &bytes).unwrap();
        let tail = log_tail(&log);
        assert_eq!(tail.len(), LOG_TAIL_LINES);
        assert_eq!(tail[0], "line 10");
        assert_eq!(tail[LOG_TAIL_LINES - 1], "line 49");
        // All of a long line's end that fits.
        std::fs::write(&log, vec![b'y'; 4 << 20]).unwrap();
        assert_eq!(log_tail(&log), ["y".repeat(LOG_TAIL_BYTES as usize)]);
        // A FIFO in the log's place: nothing, at once.
        std::fs::remove_file(&log).unwrap();
        nix::unistd::mkfifo(&log, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(log_tail(&log).is_empty());
    }
}
