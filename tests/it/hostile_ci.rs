//! Hostile agents and the workflow around them (issue #28, the CI-side items): what a
//! misbehaving agent (a shell script, [`crate::hostile::Arena`]) can still do
//! through the GitHub Actions machinery around fanout, and what holds:
//! - item 1: a matrix job's artifacts carry data, never settings — publishing takes
//!   its settings from the digested plan, never from a checkout a job downloaded
//!   artifacts into, and in Actions the token goes only to `$GITHUB_SERVER_URL`'s host;
//! - item 8: agent text (logs, tasks, reasons) issues no workflow command, as the
//!   GitHub runner parses them ([`crate::runner_commands`]: leading whitespace
//!   trimmed, `##[` anywhere), on stdout and stderr;
//! - item 9: a GitHub App's installation token is asked for the one repository and
//!   the permissions publishing needs; a branch that changes workflows, actions or
//!   CODEOWNERS is not published unless allowed;
//! - item 10: the workflow templates.
//!
//! The same items under act (the generated workflows run end to end) are in
//! `tests/it/act.rs`.

use crate::hostile::{Arena, Sandbox, json, text};
use crate::runner_commands::Runner;

/// The lines the agent prints, on stdout and on stderr: each would be a workflow
/// command to the runner if fanout echoed it as it is.
const FORGED: &str = r#"for line in '::add-mask::work' '   ::error::PWNED-indented' '##[error]PWNED-legacy' \
    'text then ##[warning]PWNED-midline' '::set-output name=pwned::PWNED-output' \
    '##[set-output name=pwned2;]PWNED-output' '::notice::PWNED-notice' '::stop-commands::guess' \
    '::endgroup::' '::guess::'; do
  echo "$line"; echo "$line" >&2
done
printf 'progress\r::error::PWNED-after-cr\n'
try "set an output through the step's file" sh -c 'echo pwned=1 >> "$GITHUB_OUTPUT"'
try "set the environment of later steps" sh -c 'echo BASH_ENV=/tmp/x >> "$GITHUB_ENV"'
if [ "$FANOUT_WORKER_ID" = 2 ]; then echo '::error::PWNED-last-words'; exit 3; fi
"#;

/// Item 8: under a GitHub Actions runner (`GITHUB_ACTIONS=true`), an agent's log
/// lines (shown in the worker's group), its failing worker's reason and tasks whose
/// text looks like commands are all printed, and the runner acts on none of them:
/// stderr, read as the runner reads it, issues only fanout's own groups and its one
/// annotation for the failed worker; stdout issues nothing at all (so no interleaving
/// of the two streams can matter). The agent cannot reach the step's command files
/// either. `fanout plan --json` under the runner stays JSON that issues nothing.
fn agent_text_issues_no_workflow_command(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup(FORGED, "", "");
    let outputs = a.root().join("github-output");
    let env_file = a.root().join("github-env");
    for f in [&outputs, &env_file] {
        std::fs::write(f, "").unwrap();
    }
    let task_one = "Improve ##[set-output name=task;]x the docs";
    let task_two = "::add-mask::task two";
    let mut c = a.fanout(&cfg, &["run", "-w", "2", "-t", task_one, "-t", task_two]);
    c.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", &outputs)
        .env("GITHUB_ENV", &env_file);
    let out = c.output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");

    let mut err = Runner::default();
    err.feed(&stderr);
    let acted: Vec<String> = err
        .acted()
        .iter()
        .map(|c| format!("{} {:?} {}", c.name, c.props, c.data))
        .collect();
    let names: Vec<&str> = err.acted().iter().map(|c| c.name.as_str()).collect();
    let count = |n: &str| names.iter().filter(|x| **x == n).count();
    assert_eq!(
        (count("group"), count("endgroup"), count("error")),
        (2, 2, 1),
        "{acted:#?}\n{stderr}"
    );
    assert!(
        names
            .iter()
            .all(|n| ["group", "endgroup", "error", "warning"].contains(n)),
        "a command fanout did not mean: {acted:#?}\n{stderr}"
    );
    let error = err.acted().into_iter().find(|c| c.name == "error").unwrap();
    assert_eq!(error.props["title"], "fanout worker 2", "{acted:#?}");
    assert!(!err.stopped(), "stderr leaves commands stopped:\n{stderr}");
    // The agent's text was shown, not dropped.
    for shown in ["##[error]PWNED-legacy", "::add-mask::work", "PWNED-after-cr"] {
        assert!(stderr.contains(shown), "{shown:?} not shown:\n{stderr}");
    }
    let mut std_out = Runner::default();
    std_out.feed(&stdout);
    assert_eq!(std_out.processed, [], "stdout issues commands:\n{stdout}");

    let written = std::fs::read_to_string(&outputs).unwrap();
    assert!(!written.contains("pwned"), "{written}");
    assert!(written.contains("run-id="), "{written}");
    assert_eq!(std::fs::read_to_string(&env_file).unwrap(), "");
    assert!(
        stderr.contains("DENIED set an output through the step's file")
            && stderr.contains("DENIED set the environment of later steps"),
        "{stderr}"
    );

    // JSON on stdout stays JSON, and issues nothing.
    let mut c = a.fanout(&cfg, &["plan", "--json", "-t", task_one, "-t", task_two]);
    c.env("GITHUB_ACTIONS", "true");
    let out = c.output().unwrap();
    let plan = json(&out);
    assert_eq!(plan["workers"][0]["task"]["prompt"], task_one);
    let mut r = Runner::default();
    r.feed(&text(&out.stdout));
    r.feed(&text(&out.stderr));
    assert_eq!(r.processed, [], "{}", text(&out.stdout));
}

#[test]
fn agent_text_issues_no_workflow_command_sandbox_off() {
    agent_text_issues_no_workflow_command(Sandbox::Off);
}

#[cfg(target_os = "linux")]
#[test]
fn agent_text_issues_no_workflow_command_sandbox_required() {
    agent_text_issues_no_workflow_command(Sandbox::Required);
}
