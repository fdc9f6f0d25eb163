//! `fanout fake-agent`: a stand-in coding agent for the demo, the tests and the
//! benchmarks. It is a real process that behaves like an agent: prints progress,
//! edits a file in its working directory, writes `$FANOUT_RESULT`, and can be told to
//! misbehave (sleep, ignore SIGTERM, spawn long-lived children, fail, spam output).
//! It prints as an agent does (`println!`: a closed pipe may kill it, as it would a
//! real agent), not through fanout's quiet `util::out`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// Flags of the fake agent.
#[derive(Debug, Args, Clone, Default)]
pub struct FakeAgentArgs {
    /// The task (default: `$FANOUT_TASK`).
    pub task: Option<String>,
    /// File to write, relative to the working directory (default `fanout-demo/w<ID>.md`).
    #[arg(long)]
    pub write: Option<PathBuf>,
    /// Write nothing.
    #[arg(long)]
    pub no_change: bool,
    /// Seconds to sleep after writing.
    #[arg(long, default_value_t = 0.0)]
    pub sleep: f64,
    /// Children to start that sleep for an hour (they share the agent's process group).
    #[arg(long, default_value_t = 0)]
    pub spawn: u32,
    /// A marker placed on the command line of every child, to find them.
    #[arg(long)]
    pub marker: Option<String>,
    /// Ignore SIGTERM (only SIGKILL stops it).
    #[arg(long)]
    pub ignore_term: bool,
    /// Lines of noise to print on stdout.
    #[arg(long, default_value_t = 0)]
    pub spam: u64,
    /// Exit code.
    #[arg(long, default_value_t = 0)]
    pub exit: i32,
    /// Status written to `$FANOUT_RESULT`.
    #[arg(long, default_value = "success")]
    pub status: String,
    /// Steps written to `$FANOUT_RESULT`.
    #[arg(long)]
    pub steps: Option<u32>,
    /// Cost written to `$FANOUT_RESULT` (default: 0.001 × worker id).
    #[arg(long)]
    pub cost: Option<f64>,
    /// A final message written to `$FANOUT_RESULT` as `findings`: the contents of
    /// this file.
    #[arg(long, value_name = "FILE")]
    pub findings: Option<PathBuf>,
    /// Do not write `$FANOUT_RESULT`.
    #[arg(long)]
    pub no_result: bool,
    /// Append `start`/`end` lines with timestamps to this file.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// While sleeping, print a line every this many milliseconds (else it is silent).
    #[arg(long, value_name = "MS")]
    pub tick: Option<u64>,
    /// With --tick: each line is a JSON object `{"cost": …, "steps": …}` whose cost
    /// grows by this much per tick (a streaming agent's running cost).
    #[arg(long, value_name = "USD")]
    pub cost_per_tick: Option<f64>,
    /// Fail (write nothing, exit 1, status failed) when the task contains this text.
    #[arg(long, value_name = "TEXT")]
    pub fail_on: Option<String>,
    /// Hang (sleep an hour, after writing) when `DIR/hang-w<ID>` exists, removing it
    /// first: the same worker run again does not hang (to kill a run mid-way).
    #[arg(long, value_name = "DIR")]
    pub hang_once: Option<PathBuf>,
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn trace(path: &Option<PathBuf>, what: &str, id: &str) {
    if let Some(p) = path
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
    {
        // One write per line: O_APPEND keeps concurrent agents' lines whole.
        let line = format!("{what} {id} {} {}\n", now_ns(), std::process::id());
        let _ = f.write_all(line.as_bytes());
    }
}

/// Run the fake agent; returns its exit code.
pub fn fake_agent(args: &FakeAgentArgs) -> i32 {
    let id = std::env::var("FANOUT_WORKER_ID").unwrap_or_else(|_| "0".into());
    trace(&args.trace, "start", &id);
    if args.ignore_term {
        // SAFETY: setting a signal disposition to SIG_IGN has no handler code to race.
        unsafe {
            let _ = nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGTERM,
                nix::sys::signal::SigHandler::SigIgn,
            );
        }
    }
    let task = args
        .task
        .clone()
        .or_else(|| std::env::var("FANOUT_TASK").ok())
        .unwrap_or_default();
    let model = std::env::var("FANOUT_MODEL").unwrap_or_else(|_| "default".into());
    println!("fake-agent: worker {id}, model {model}");
    eprint_line(format_args!("fake-agent: task: {task}"));
    if let Some(text) = &args.fail_on
        && task.contains(text.as_str())
    {
        eprint_line(format_args!(
            "fake-agent: the task contains {text:?}: failing as asked"
        ));
        if let Ok(p) = std::env::var("FANOUT_RESULT") {
            let _ = std::fs::write(p, r#"{"status":"failed","reason":"asked to fail"}"#);
        }
        trace(&args.trace, "end", &id);
        return 1;
    }
    for i in 0..args.spam {
        println!("fake-agent: noise line {i} {}", "x".repeat(64));
    }
    let children = spawn_children(args);
    if !args.no_change && !write_file(args, &id, &model, &task) {
        return 1;
    }
    if let Some(dir) = &args.hang_once
        && std::fs::remove_file(dir.join(format!("hang-w{id}"))).is_ok()
    {
        println!("fake-agent: hanging as asked");
        let _ = std::io::stdout().flush();
        std::thread::sleep(Duration::from_secs(3600));
    }
    think(args);
    if !args.no_result
        && let Ok(path) = std::env::var("FANOUT_RESULT")
    {
        let cost = args
            .cost
            .unwrap_or_else(|| 0.001 * id.parse::<f64>().unwrap_or(0.0));
        let mut report = serde_json::json!({
            "status": args.status,
            "steps": args.steps.unwrap_or(3),
            "cost": cost,
        });
        if let Some(text) = args
            .findings
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
        {
            report["findings"] = text.into();
        }
        let _ = std::fs::write(path, report.to_string());
    }
    println!("fake-agent: done");
    trace(&args.trace, "end", &id);
    // Children are deliberately left running: the supervisor must stop them.
    std::mem::forget(children);
    args.exit
}

/// Start `--spawn` children that sleep for an hour in the agent's process group.
fn spawn_children(args: &FakeAgentArgs) -> Vec<std::process::Child> {
    let mut children = Vec::new();
    if args.spawn == 0 {
        return children;
    }
    let exe = std::env::current_exe().unwrap_or_else(|_| "fanout".into());
    for _ in 0..args.spawn {
        let mut c = std::process::Command::new(&exe);
        c.args([
            "fake-agent",
            "--no-change",
            "--no-result",
            "--sleep",
            "3600",
        ]);
        if let Some(m) = &args.marker {
            c.args(["--marker", m]);
        }
        c.env_remove("FANOUT_RESULT");
        c.stdout(std::process::Stdio::null());
        match c.spawn() {
            Ok(child) => children.push(child),
            Err(e) => eprint_line(format_args!("fake-agent: could not spawn: {e}")),
        }
    }
    println!("fake-agent: started {} helper processes", children.len());
    children
}

/// Write the agent's file (`--write`, else `fanout-demo/w<ID>.md`); false when it
/// cannot.
fn write_file(args: &FakeAgentArgs, id: &str, model: &str, task: &str) -> bool {
    let path = args
        .write
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("fanout-demo/w{id}.md")));
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let body = format!("# Worker {id}\n\nModel: {model}\n\nTask: {task}\n");
    match std::fs::write(&path, body) {
        Ok(()) => {
            println!("fake-agent: wrote {}", path.display());
            true
        }
        Err(e) => {
            eprint_line(format_args!(
                "fake-agent: cannot write {}: {e}",
                path.display()
            ));
            false
        }
    }
}

/// Sleep `--sleep` seconds, silently or printing a line every `--tick` ms (with
/// `--cost-per-tick`, a streaming agent's running cost).
fn think(args: &FakeAgentArgs) {
    if args.sleep <= 0.0 {
        return;
    }
    println!("fake-agent: thinking for {}s", args.sleep);
    let until = std::time::Instant::now() + Duration::from_secs_f64(args.sleep);
    match args.tick {
        Some(ms) => {
            let mut n: u32 = 0;
            while std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(ms.max(1)));
                n += 1;
                match args.cost_per_tick {
                    Some(c) => println!(
                        "{}",
                        serde_json::json!({"cost": c * f64::from(n), "steps": n})
                    ),
                    None => println!("fake-agent: tick {n}"),
                }
                let _ = std::io::stdout().flush();
            }
        }
        None => std::thread::sleep(Duration::from_secs_f64(args.sleep)),
    }
}

/// One line on stderr in a single write, as an agent whose stderr is line-buffered
/// prints it: `eprintln!` writes the pieces of its format one by one, and a reader
/// draining stdout alongside may put stdout's output between them.
fn eprint_line(line: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}
