//! Standard output and error that a closed pipe cannot break. Rust ignores SIGPIPE,
//! so `println!` to a reader that went away (`fanout plan --json | head -1`) panics
//! with exit 101. Everything fanout prints goes through [`outln!`], [`out!`] and
//! [`errln!`] instead: a write that fails with `EPIPE` marks that stream closed and
//! every later write to it is dropped, quietly. The command itself goes on (a run is
//! never cut short, nor its results lost, because its reader left) and ends with its
//! own exit code. Any other write error (a full disk) is said once on stderr, and
//! [`failed`] makes the command's exit code 4 at the edge (`cli::main`).
//!
//! Under a GitHub Actions runner ([`set_runner_reads_commands`], said once at start
//! by `cli::main`), what fanout prints stays text: the runner takes a line whose
//! start (leading whitespace trimmed) is `::` as a workflow command, and `##[` anywhere
//! in a line as a legacy one, on stdout and stderr alike. A write with such a line
//! (an agent's log, a task, a reason, a finding — or anything else) goes to standard
//! error inside a `::stop-commands::<token>` … `::<token>::` block, the token fresh
//! and random for each block, so nothing in the text can end the block early. The
//! workflow commands fanout means ([`workflow_command`]) go to standard error too: every line
//! the runner may act on is on one stream, in the order fanout wrote it (the runner
//! reads stdout and stderr on two threads, so a block on one stream would not hold
//! against lines of the other). JSON on stdout ([`stdout_json`]) stays JSON: its
//! `#` are written `\u0023`, and a pretty JSON line never starts with `::`.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// Why a stream stopped taking output.
const OPEN: u8 = 0;
const CLOSED: u8 = 1;
const FAILED: u8 = 2;

static STDOUT: AtomicU8 = AtomicU8::new(OPEN);
static STDERR: AtomicU8 = AtomicU8::new(OPEN);
static SAID: AtomicBool = AtomicBool::new(false);
/// Whether a GitHub Actions runner reads what fanout prints for workflow commands.
static RUNNER_READS_COMMANDS: AtomicBool = AtomicBool::new(false);

/// Say whether a GitHub Actions runner reads this process's output for workflow
/// commands (`cli::main`, from `crate::actions::outputs::in_actions`, before
/// anything is printed).
pub fn set_runner_reads_commands(on: bool) {
    RUNNER_READS_COMMANDS.store(on, Ordering::Relaxed);
}

fn runner_reads_commands() -> bool {
    RUNNER_READS_COMMANDS.load(Ordering::Relaxed)
}

/// Write to standard output (what [`out!`] and [`outln!`] call), every control
/// character but newline and tab shown as `�` ([`printable`]); under a runner, a text
/// the runner would take a command from goes to stderr in a block instead.
pub fn stdout(args: fmt::Arguments<'_>) {
    let text = args.to_string();
    let text = printable(&text);
    if runner_reads_commands() && holds_command(&text) {
        return blocked(&text);
    }
    write(
        &STDOUT,
        &mut io::stdout().lock(),
        format_args!("{text}"),
        "standard output",
    );
}

/// Write to standard error (what [`errln!`] calls), as [`stdout`] writes.
pub fn stderr(args: fmt::Arguments<'_>) {
    let text = args.to_string();
    stderr_as_is(format_args!("{}", printable(&text)));
}

/// [`stderr`] without [`printable`]: for log lines, which colour themselves on a
/// terminal.
fn stderr_as_is(args: fmt::Arguments<'_>) {
    if runner_reads_commands() {
        let text = args.to_string();
        if holds_command(&text) {
            return blocked(&text);
        }
    }
    write(&STDERR, &mut io::stderr().lock(), args, "standard error");
}

/// `text` with every control character but newline and tab (an escape sequence that
/// would retitle or recolour the terminal, a carriage return that would write over a
/// line) replaced by `�`: what fanout prints holds names and reasons agents made
/// (a file name in a tamper report, a branch, a task's text).
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| if bad(c) { '\u{fffd}' } else { c })
        .collect()
}

/// A workflow command fanout means (`::add-mask::…`, `::group::…`, an annotation),
/// and a newline, on standard error: written as it is. Data from anywhere else must be
/// escaped by the caller (`%`, CR, LF), so that it cannot start a line of its own.
pub fn workflow_command(args: fmt::Arguments<'_>) {
    write(
        &STDERR,
        &mut io::stderr().lock(),
        format_args!("{args}\n"),
        "standard error",
    );
}

/// Whether a runner could take a workflow command from a line of `text`: one that
/// holds `::` (a command starts with it once leading whitespace is trimmed; any `::`
/// is counted, which needs no whitespace rules) or `##[` (legacy, anywhere). Lines
/// end at CR as well as LF, as the runner reads them.
pub fn holds_command(text: &str) -> bool {
    text.split(['\n', '\r'])
        .any(|line| line.contains("::") || line.contains("##["))
}

/// `text` on standard error between `::stop-commands::<token>` and `::<token>::`,
/// in one write, the token 32 random hex digits not found in `text`. Without
/// randomness the text is withheld (a guessable token would not hold).
fn blocked(text: &str) {
    let body = block_of(text);
    write(
        &STDERR,
        &mut io::stderr().lock(),
        format_args!("{body}"),
        "standard error",
    );
}

/// `text` as the block [`blocked`] writes.
fn block_of(text: &str) -> String {
    match stop_token(text) {
        Some(token) => {
            let nl = if text.ends_with('\n') { "" } else { "\n" };
            format!("::stop-commands::{token}\n{text}{nl}::{token}::\n")
        }
        None => "fanout: (a line withheld: no randomness for a stop-commands token)\n".into(),
    }
}

/// A fresh stop-commands token: 128 random bits, in hex, not found in `text`.
fn stop_token(text: &str) -> Option<String> {
    loop {
        let mut bytes = [0u8; 16];
        getrandom::getrandom(&mut bytes).ok()?;
        let token = hex::encode(bytes);
        if !text.contains(&token) {
            return Some(token);
        }
    }
}

/// What tracing writes goes through [`stderr`], a line at a time (a record may carry
/// an agent's text too).
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingWriter;

impl Write for TracingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        stderr_as_is(format_args!("{}", String::from_utf8_lossy(buf)));
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for TracingWriter {
    type Writer = TracingWriter;
    fn make_writer(&'a self) -> TracingWriter {
        TracingWriter
    }
}

/// `value` as pretty JSON and a newline on standard output, streamed through a
/// buffer: a report that grows with the run is never held whole in memory. Under a
/// runner, every `#` (only ever inside a string) is written `\u0023`: no `##[`.
pub fn stdout_json<T: serde::Serialize + ?Sized>(value: &T) {
    if STDOUT.load(Ordering::Relaxed) != OPEN {
        return;
    }
    let mut w = io::BufWriter::new(io::stdout().lock());
    let written = if runner_reads_commands() {
        json_to(&mut NoHash(&mut w), value)
    } else {
        json_to(&mut w, value)
    };
    let written = written.and_then(|()| w.flush());
    if let Err(e) = written {
        // What the buffer still holds is dropped: the stream is closed or failed.
        let _ = w.into_parts();
        stopped(&STDOUT, e, "standard output");
    }
}

fn json_to<W: Write, T: serde::Serialize + ?Sized>(w: &mut W, value: &T) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, value)
        .map_err(io::Error::from)
        .and_then(|()| w.write_all(b"\n"))
}

/// JSON with each `#` written as `\u0023`. JSON has `#` only inside strings, where
/// serde_json never escapes it: the result is the same JSON.
struct NoHash<'a, W: Write>(&'a mut W);

impl<W: Write> Write for NoHash<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for piece in buf.split_inclusive(|b| *b == b'#') {
            match piece.split_last() {
                Some((b'#', head)) => {
                    self.0.write_all(head)?;
                    self.0.write_all(b"\\u0023")?;
                }
                _ => self.0.write_all(piece)?,
            }
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

fn write(state: &AtomicU8, w: &mut dyn Write, args: fmt::Arguments<'_>, what: &str) {
    if state.load(Ordering::Relaxed) != OPEN {
        return;
    }
    if let Err(e) = w.write_fmt(args).and_then(|()| w.flush()) {
        stopped(state, e, what);
    }
}

/// A write to the stream of `state` failed with `e`.
fn stopped(state: &AtomicU8, e: io::Error, what: &str) {
    if e.kind() == io::ErrorKind::BrokenPipe {
        state.store(CLOSED, Ordering::Relaxed);
        return;
    }
    state.store(FAILED, Ordering::Relaxed);
    if !SAID.swap(true, Ordering::Relaxed) && STDERR.load(Ordering::Relaxed) == OPEN {
        let _ = writeln!(io::stderr(), "fanout: error: writing to {what}: {e}");
    }
}

/// Whether writing to stdout or stderr failed otherwise than by a closed pipe.
pub fn failed() -> bool {
    STDOUT.load(Ordering::Relaxed) == FAILED || STDERR.load(Ordering::Relaxed) == FAILED
}

/// `print!`, quiet when stdout is a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => { $crate::util::out::stdout(format_args!($($arg)*)) };
}

/// `println!`, quiet when stdout is a closed pipe.
macro_rules! outln {
    () => { $crate::util::out::stdout(format_args!("\n")) };
    ($($arg:tt)*) => {
        $crate::util::out::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!`, quiet when stderr is a closed pipe.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::util::out::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// A workflow command fanout means, on a line of its own on stderr
/// ([`workflow_command`]).
macro_rules! command {
    ($($arg:tt)*) => { $crate::util::out::workflow_command(format_args!($($arg)*)) };
}

pub(crate) use {command, errln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_fanout_prints_holds_no_terminal_control() {
        assert_eq!(
            printable("ev\u{1b}]0;OWNED\u{7}il\u{1b}[31mRED\rx\u{9b}2J"),
            "ev\u{fffd}]0;OWNED\u{fffd}il\u{fffd}[31mRED\u{fffd}x\u{fffd}2J"
        );
        let plain = "a\tb\nc — ok";
        assert!(matches!(printable(plain), std::borrow::Cow::Borrowed(p) if p == plain));
    }

    /// A writer whose reader went away.
    struct Closed(usize);
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            self.0 += 1;
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_a_runner_could_take_a_command_from_are_found() {
        for text in [
            "::error::x",
            "  ::set-output name=a::b",
            "fanout: #1 ##[error]x [m] failed",
            "ok\n\t::add-mask::secret\n",
            "ok\r::warning::x",
            "a reason with a::b in it",
        ] {
            assert!(holds_command(text), "{text:?}");
        }
        for text in [
            "",
            "fanout: #1 fix it [gpt] success",
            "## [x]",
            "a: b :c",
            "#[x]",
        ] {
            assert!(!holds_command(text), "{text:?}");
        }
    }

    #[test]
    fn a_block_stops_commands_with_a_fresh_token_and_resumes_on_its_own_line() {
        let text = "##[set-output name=publish]true\n::add-mask::x";
        let a = block_of(text);
        let b = block_of(text);
        let lines: Vec<&str> = a.lines().collect();
        let token = lines[0].strip_prefix("::stop-commands::").unwrap();
        assert_eq!(token.len(), 32);
        assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(&lines[1..3], text.lines().collect::<Vec<_>>());
        assert_eq!(lines[3], format!("::{token}::"));
        assert_eq!(lines.len(), 4);
        assert!(a.ends_with('\n'));
        assert_ne!(a, b, "each block has its own token");
    }

    #[test]
    fn json_under_a_runner_has_no_hash_and_is_the_same_json() {
        let value = serde_json::json!({
            "task": "##[set-output name=x]y",
            "back\\#slash": ["\\#", "#", "::add-mask::z", "a\n::error::b"],
        });
        let mut plain = Vec::new();
        json_to(&mut plain, &value).unwrap();
        let mut safe = Vec::new();
        json_to(&mut NoHash(&mut safe), &value).unwrap();
        let text = String::from_utf8(safe.clone()).unwrap();
        assert!(!text.contains('#'), "{text}");
        assert!(
            text.lines().all(|l| !l.trim_start().starts_with("::")),
            "{text}"
        );
        let back: serde_json::Value = serde_json::from_slice(&safe).unwrap();
        assert_eq!(back, value);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&plain).unwrap(),
            value
        );
    }

    #[test]
    fn a_closed_pipe_is_quiet_and_stays_closed() {
        let state = AtomicU8::new(OPEN);
        let mut w = Closed(0);
        write(&state, &mut w, format_args!("a\n"), "x");
        write(&state, &mut w, format_args!("b\n"), "x");
        assert_eq!(state.load(Ordering::Relaxed), CLOSED);
        assert_eq!(w.0, 1, "nothing is written after the pipe closed");
    }
}
