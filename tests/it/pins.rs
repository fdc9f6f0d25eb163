//! Every third-party action this project uses or tells its users to use is pinned by
//! commit SHA, with the tag it was taken from as a trailing comment
//! (`actions/cache/save@<40 hex> # v5.0.5`): in `action.yml`, `.github/`,
//! `templates/`, the code blocks of the README and docs/, and the workflows `fanout init` writes. A
//! tag can be moved to other code by whoever controls the action's repository; a
//! commit cannot. Local actions (`./…`) and the project's own action
//! (`fanout-dev/fanout@…`, which users pin at a release tag) are not third-party.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The project's own action, referenced by its release tags.
const OWN: &str = "fanout-dev/fanout@";

/// A pinned `uses:`: (action, sha, version comment).
type Pin = (String, String, String);

/// `line`'s `uses:` value, when the line is a `uses:` key.
fn uses_of(line: &str) -> Option<&str> {
    let step = line.trim_start();
    let step = step.strip_prefix("- ").unwrap_or(step).trim_start();
    step.strip_prefix("uses:").map(str::trim)
}

/// Checks one `uses:` value: `None` for a local or the project's own action, else the
/// pin, or why it is not one.
fn check(value: &str) -> Option<Result<Pin, String>> {
    let value = value.trim_matches(|c| c == '"' || c == '\'');
    if value.starts_with("./") || value.starts_with(OWN) {
        return None;
    }
    let (reference, comment) = match value.split_once('#') {
        Some((r, c)) => (r.trim(), c.trim()),
        None => (value.trim(), ""),
    };
    let Some((action, sha)) = reference.split_once('@') else {
        return Some(Err(format!("`{value}`: no @ref")));
    };
    if sha.len() != 40 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Some(Err(format!(
            "`{value}`: {action} is not pinned by a 40-hex commit SHA"
        )));
    }
    if sha.bytes().any(|b| b.is_ascii_uppercase()) {
        return Some(Err(format!("`{value}`: the SHA is not lowercase")));
    }
    let version = comment.split_whitespace().next().unwrap_or_default();
    if !is_version(action, version) {
        return Some(Err(format!(
            "`{value}`: no version comment after the SHA (`# vX.Y.Z`, the tag it was taken from)"
        )));
    }
    Some(Ok((action.to_owned(), sha.to_owned(), version.to_owned())))
}

/// `vX.Y.Z`; for dtolnay/rust-toolchain, whose refs are toolchains, a toolchain name.
fn is_version(action: &str, v: &str) -> bool {
    let semver = |s: &str| {
        let parts: Vec<&str> = s.split('.').collect();
        parts.len() == 3
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    };
    match v.strip_prefix('v') {
        Some(rest) if semver(rest) => true,
        _ => {
            action == "dtolnay/rust-toolchain"
                && (["stable", "beta", "nightly"].contains(&v) || semver(v))
        }
    }
}

/// Every `uses:` line of `text` (only inside fenced code blocks when `fenced`), as
/// (where, value).
fn uses_lines(name: &str, text: &str, fenced: bool) -> Vec<(String, String)> {
    let mut inside = !fenced;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if fenced && line.trim_start().starts_with("```") {
            inside = !inside;
            continue;
        }
        if let Some(v) = uses_of(line).filter(|_| inside) {
            out.push((format!("{name}:{}", n + 1), v.to_owned()));
        }
    }
    out
}

/// The files under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The `uses:` of action.yml, .github/, templates/ and the code blocks of the README
/// and docs/.
fn project_uses() -> Vec<(String, String)> {
    let root = Path::new(ROOT);
    let mut out = Vec::new();
    let mut sources: Vec<PathBuf> = vec![root.join("action.yml")];
    sources.extend(files(&root.join(".github")));
    sources.extend(files(&root.join("templates")));
    for p in sources {
        let name = p.strip_prefix(root).unwrap().display().to_string();
        out.extend(uses_lines(
            &name,
            &std::fs::read_to_string(&p).unwrap(),
            false,
        ));
    }
    let mut pages = vec![root.join("README.md")];
    pages.extend(files(&root.join("docs")));
    for p in pages {
        let name = p.strip_prefix(root).unwrap().display().to_string();
        out.extend(uses_lines(
            &name,
            &std::fs::read_to_string(&p).unwrap(),
            true,
        ));
    }
    out
}

/// Each of `uses` checked; panics naming every one that is not pinned, or whose
/// action and tag map to another SHA elsewhere (or the SHA to another tag).
fn assert_pinned(uses: &[(String, String)]) -> usize {
    let mut bad = Vec::new();
    let mut by_tag: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    let mut by_sha: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    let mut pinned = 0;
    for (at, value) in uses {
        match check(value) {
            None => {}
            Some(Err(e)) => bad.push(format!("{at}: {e}")),
            Some(Ok((action, sha, version))) => {
                pinned += 1;
                // actions/cache/save and actions/cache/restore are one repository.
                let repo: String = action.split('/').take(2).collect::<Vec<_>>().join("/");
                let tag = by_tag.entry((repo.clone(), version.clone()));
                let (first_at, first_sha) = tag.or_insert((at.clone(), sha.clone()));
                if *first_sha != sha {
                    bad.push(format!(
                        "{at}: {repo} {version} is {sha}, but {first_sha} at {first_at}"
                    ));
                }
                let commit = by_sha.entry((repo.clone(), sha.clone()));
                let (first_at, first_version) = commit.or_insert((at.clone(), version.clone()));
                if *first_version != version {
                    bad.push(format!(
                        "{at}: {repo}@{sha} is called {version}, but {first_version} at {first_at}"
                    ));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "actions not pinned by commit SHA:\n{}",
        bad.join("\n")
    );
    pinned
}

#[test]
fn every_third_party_action_in_the_project_is_pinned_by_commit_sha() {
    let uses = project_uses();
    let pinned = assert_pinned(&uses);
    // The files were read: action.yml alone pins four actions, the templates more.
    assert!(
        pinned >= 20,
        "only {pinned} pinned actions found: {uses:#?}"
    );
    assert!(
        uses.iter()
            .any(|(at, _)| at.starts_with("docs/github-actions.md:")),
        "no `uses:` found in docs/github-actions.md's code blocks"
    );
}

#[test]
fn the_workflows_fanout_init_writes_are_pinned_and_pass_check() {
    let t = TestEnv::new();
    for kind in ["matrix", "local", "nightly"] {
        let out = format!(".github/workflows/fanout-{kind}.yml");
        t.run_ok(&["init", "--kind", kind, "--output", &out]);
        t.run_ok(&["init", "--kind", kind, "--output", &out, "--check"]);
        let text = std::fs::read_to_string(t.repo.join(&out)).unwrap();
        let uses = uses_lines(&out, &text, false);
        assert!(
            uses.iter().any(|(_, v)| v.starts_with(OWN)),
            "{kind}: no `uses: {OWN}…`:\n{text}"
        );
        assert!(assert_pinned(&uses) >= 2, "{kind}:\n{text}");
    }
}

#[test]
fn the_check_refuses_tags_branches_short_shas_and_missing_comments() {
    let sha = "11d5960a326750d5838078e36cf38b85af677262";
    for bad in [
        "actions/checkout@v4".to_owned(),
        "actions/checkout@main".to_owned(),
        "actions/checkout@11d5960 # v4.4.0".to_owned(),
        format!("actions/checkout@{sha}"),
        format!("actions/checkout@{sha} # v4"),
        format!("actions/checkout@{sha} # latest"),
        format!("actions/checkout@{} # v4.4.0", sha.to_uppercase()),
        format!("actions/checkout@{sha}0 # v4.4.0"),
        "docker://alpine:3".to_owned(),
    ] {
        assert!(
            matches!(check(&bad), Some(Err(_))),
            "`{bad}` passed the check"
        );
    }
    let good = check(&format!("actions/cache/save@{sha} # v5.0.5 (a note)"));
    assert_eq!(
        good,
        Some(Ok((
            "actions/cache/save".to_owned(),
            sha.to_owned(),
            "v5.0.5".to_owned()
        )))
    );
    assert_eq!(check("./.github/stand-ins/cache-save"), None);
    assert_eq!(check("fanout-dev/fanout@v0"), None);
    assert!(matches!(
        check(&format!("dtolnay/rust-toolchain@{sha} # stable")),
        Some(Ok(_))
    ));
    // A line in a README code block is found; one in prose is not.
    let readme =
        "`uses: actions/checkout@v4` in prose\n```yaml\n- uses: actions/checkout@v4\n```\n";
    assert_eq!(
        uses_lines("README.md", readme, true),
        [("README.md:3".to_owned(), "actions/checkout@v4".to_owned())]
    );
    // Two SHAs for one tag are refused.
    let other = "d3f86a106a0bac45b974a628896c90dbdf5c8093";
    let uses = [
        ("a:1".to_owned(), format!("actions/checkout@{sha} # v4.4.0")),
        (
            "b:1".to_owned(),
            format!("actions/checkout@{other} # v4.4.0"),
        ),
    ];
    let result = std::panic::catch_unwind(|| assert_pinned(&uses));
    assert!(
        result.is_err(),
        "two SHAs for actions/checkout v4.4.0 passed"
    );
}

/// The agent CLIs the workflows `fanout init` writes install are pinned to exact
/// versions, the ones `.ci/install-agents.sh` installs for the tests that drive them
/// (tests/it/agents_real.rs): a workflow never installs whatever version is newest.
#[test]
fn the_workflows_install_the_agent_clis_at_the_versions_the_tests_drive() {
    let script = std::fs::read_to_string(Path::new(ROOT).join(".ci/install-agents.sh")).unwrap();
    let pin = |var: &str| -> String {
        script
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{var}=")))
            .unwrap_or_else(|| panic!("no {var}= in .ci/install-agents.sh"))
            .trim()
            .to_owned()
    };
    let want = [
        (
            "claude",
            vec![format!(
                "npm install -g @anthropic-ai/claude-code@{}",
                pin("CLAUDE_VERSION")
            )],
        ),
        (
            "codex",
            vec![format!(
                "npm install -g @openai/codex@{}",
                pin("CODEX_VERSION")
            )],
        ),
        (
            "aider",
            vec![format!("pipx install aider-chat=={}", pin("AIDER_VERSION"))],
        ),
        (
            "architect",
            vec![format!(
                "pipx install architect-ai-cli=={} && pipx inject architect-ai-cli mcp=={}",
                pin("ARCHITECT_VERSION"),
                pin("MCP_VERSION")
            )],
        ),
    ];
    let t = TestEnv::new();
    for (agent, lines) in want {
        for kind in ["matrix", "local", "nightly"] {
            let out = format!(".github/workflows/{agent}-{kind}.yml");
            t.run_ok(&["init", "--kind", kind, "--agent", agent, "--output", &out]);
            let text = std::fs::read_to_string(t.repo.join(&out)).unwrap();
            let installs: Vec<&str> = text
                .lines()
                .filter_map(|l| l.trim().strip_prefix("run: "))
                .filter(|r| r.contains("install"))
                .collect();
            assert!(
                !installs.is_empty(),
                "{agent} {kind}: no install step:\n{text}"
            );
            for i in installs {
                assert!(
                    lines.iter().any(|l| l == i),
                    "{agent} {kind}: `{i}`, want {lines:?}"
                );
            }
        }
    }
}
