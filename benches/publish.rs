//! Benchmark (not a test): publish 100 successful workers against the loopback fake
//! GitHub API with mutations paced 50 ms apart, and compare the wall time with the
//! pacing floor ((mutations − 1) × 50 ms). Target: ≤ 1.1× the floor, zero failures.
//!
//! It also prints the gaps between mutations as the fake server saw them: none may be
//! shorter than the pace (fanout paces with a margin for the way there).
//!
//! Run with `cargo bench --bench publish` (`BENCH_PACE_MS=1000` paces as GitHub asks,
//! 1 s; the run then takes minutes). Only 127.0.0.1 is contacted.

#[path = "../tests/common/fake_github.rs"]
#[allow(dead_code)]
mod fake_github;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const FANOUT: &str = env!("CARGO_BIN_EXE_fanout");
const WORKERS: usize = 100;
/// The pace, in milliseconds: `BENCH_PACE_MS`, default 50.
fn pace_ms() -> u64 {
    std::env::var("BENCH_PACE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50)
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .status()
        .expect("git runs");
    assert!(st.success(), "git {args:?}");
}

fn fanout(dir: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    Command::new(FANOUT)
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .expect("fanout runs")
}

fn main() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path();
    let repo = root.join("repo");
    let remote = root.join("remote.git");
    let home = root.join("home");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    git(
        root,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "bench\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    git(
        &repo,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    git(&repo, &["push", "-q", "origin", "main"]);

    // 100 successful workers of the bundled fake agent.
    let cfg = root.join("fanout.yml");
    std::fs::write(
        &cfg,
        format!(
            "parallel_runs:\n  agent: fake\n  workers: 10\nworktree_dir: '{}'\nagents:\n  fake:\n    command: ['{FANOUT}', fake-agent, '{{task}}']\n",
            root.join("worktrees").display()
        ),
    )
    .unwrap();
    let mut args: Vec<String> = [
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "--quiet",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for i in 0..WORKERS {
        args.push("-t".into());
        args.push(format!("task number {i}"));
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fanout(&repo, &home, &argv);
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("run report");
    assert_eq!(run["totals"]["success"], WORKERS, "all workers succeed");
    let run_id = run["run_id"].as_str().unwrap().to_owned();

    let gh = fake_github::FakeGitHub::start("octo", "bench");
    gh.set_token("bench-token");
    let url = gh.url();
    let pace_ms = pace_ms();
    let pace = pace_ms.to_string();
    let started = Instant::now();
    let out = Command::new(FANOUT)
        .current_dir(&repo)
        .args([
            "publish",
            "--json",
            "--run",
            &run_id,
            "--repo",
            "octo/bench",
            "--api-url",
            &url,
            "--pace-ms",
            &pace,
        ])
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", &home)
        .env("GITHUB_TOKEN", "bench-token")
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("publish runs");
    let wall = started.elapsed();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "publish printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let ops: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["publish"]["operation"].as_str().unwrap_or("-"))
        .collect();
    let failed = ops.iter().filter(|o| **o == "failed").count();
    let created = ops.iter().filter(|o| **o == "created").count();
    let times = gh.mutation_times();
    let mutations = times.len();
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    let short = gaps
        .iter()
        .filter(|g| **g < Duration::from_millis(pace_ms))
        .count();
    let min_gap = gaps.iter().min().copied().unwrap_or_default();
    let floor = Duration::from_millis(pace_ms) * (mutations.saturating_sub(1)) as u32;
    let ratio = wall.as_secs_f64() / floor.as_secs_f64();
    println!("publish benchmark: {WORKERS} successful workers, pacing {pace_ms} ms");
    println!("  pull requests created: {created}, failed operations: {failed}");
    println!(
        "  API mutations: {mutations}, spec violations: {}",
        gh.violations().len()
    );
    println!(
        "  gaps seen by the server: shortest {:.3} ms; {short} of {} shorter than the pace (target: 0)",
        min_gap.as_secs_f64() * 1000.0,
        gaps.len()
    );
    println!("  pacing floor:  {:.3} s", floor.as_secs_f64());
    println!(
        "  wall time:     {:.3} s (push + API, whole `fanout publish` process)",
        wall.as_secs_f64()
    );
    println!("  ratio wall/floor = {ratio:.3}   (target: <= 1.10)");
    if failed > 0 || created != WORKERS {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        std::process::exit(1);
    }
}
