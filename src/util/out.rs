//! Standard output and error that a closed pipe cannot break. Rust ignores SIGPIPE,
//! so `println!` to a reader that went away (`fanout plan --json | head -1`) panics
//! with exit 101. Everything fanout prints goes through [`outln!`], [`out!`] and
//! [`errln!`] instead: a write that fails with `EPIPE` marks that stream closed and
//! every later write to it is dropped, quietly. The command itself goes on (a run is
//! never cut short, nor its results lost, because its reader left) and ends with its
//! own exit code. Any other write error (a full disk) is said once on stderr, and
//! [`failed`] makes the command's exit code 4 at the edge (`cli::main`).

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

/// Write to standard output (what [`out!`] and [`outln!`] call).
pub fn stdout(args: fmt::Arguments<'_>) {
    write(&STDOUT, &mut io::stdout().lock(), args, "standard output");
}

/// Write to standard error (what [`errln!`] calls).
pub fn stderr(args: fmt::Arguments<'_>) {
    write(&STDERR, &mut io::stderr().lock(), args, "standard error");
}

/// `value` as pretty JSON and a newline on standard output, streamed through a
/// buffer: a report that grows with the run is never held whole in memory.
pub fn stdout_json<T: serde::Serialize + ?Sized>(value: &T) {
    if STDOUT.load(Ordering::Relaxed) != OPEN {
        return;
    }
    let mut w = io::BufWriter::new(io::stdout().lock());
    let written = serde_json::to_writer_pretty(&mut w, value)
        .map_err(io::Error::from)
        .and_then(|()| w.write_all(b"\n"))
        .and_then(|()| w.flush());
    if let Err(e) = written {
        // What the buffer still holds is dropped: the stream is closed or failed.
        let _ = w.into_parts();
        stopped(&STDOUT, e, "standard output");
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

pub(crate) use {errln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_closed_pipe_is_quiet_and_stays_closed() {
        let state = AtomicU8::new(OPEN);
        let mut w = Closed(0);
        write(&state, &mut w, format_args!("a\n"), "x");
        write(&state, &mut w, format_args!("b\n"), "x");
        assert_eq!(state.load(Ordering::Relaxed), CLOSED);
        assert_eq!(w.0, 1, "nothing is written after the pipe closed");
    }
}
