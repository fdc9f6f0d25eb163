//! The documentation stays complete and connected. The README is a short path (set
//! up, `fanout demo`, a first run, GitHub Actions) whose links lead to `docs/`, one
//! file a topic. Every input of `action.yml` has a row in docs/reference.md's "Action
//! inputs" table; every `FANOUT_*` / `GITHUB_*` variable fanout reads in `src/`
//! (`std::env::var`/`var_os`, publishing's `env(…)`, the secrets taken at start) is
//! named in its "Environment variables" section; every key of `fanout.yml` (the
//! properties of `fanout schema`) is named somewhere in the README or docs/; and every
//! relative link between them leads to a file and heading that exist.

use std::path::{Path, PathBuf};

use crate::common::{FANOUT, succeeded};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The topic files of docs/ (other pages and messages link to them by these names).
const TOPICS: [&str; 14] = [
    "install",
    "configuration",
    "agents",
    "worktree-setup",
    "checks",
    "supervision",
    "results",
    "publishing",
    "nightly",
    "github-actions",
    "cleanup-and-resume",
    "reference",
    "security",
    "developing",
];

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap()
}

/// README.md and every docs/*.md, as (path relative to the root, text).
fn pages() -> Vec<(String, String)> {
    let mut out = vec![("README.md".to_owned(), read("README.md"))];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    for p in docs {
        let rel = p.strip_prefix(ROOT).unwrap().display().to_string();
        out.push((rel.clone(), read(&rel)));
    }
    out
}

/// The text of the section under `heading` in `text` (`page` names it in a
/// failure), up to the next heading.
fn section(page: &str, text: &str, heading: &str) -> String {
    let readme = text;
    let start = readme
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("{page} has no {heading:?} section"));
    let rest = &readme[start + heading.len() + 2..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    rest[..end].to_owned()
}

/// The names under `inputs:` in action.yml.
fn action_inputs() -> Vec<String> {
    let text = read("action.yml");
    let mut names = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if !line.starts_with(' ') && !line.trim().is_empty() {
            inside = line.starts_with("inputs:");
            continue;
        }
        if inside
            && let Some(key) = line.strip_prefix("  ")
            && !key.starts_with(' ')
            && let Some(name) = key.trim_end().strip_suffix(':')
        {
            names.push(name.to_owned());
        }
    }
    names
}

/// `FANOUT_*`/`GITHUB_*` names read through an environment call in `src/`.
fn env_reads(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            env_reads(&path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for call in ["var(\"", "var_os(\"", "env(\"", "get(\"", "try_from_env(\""] {
            for (at, _) in text.match_indices(call) {
                let name: String = text[at + call.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if (name.starts_with("FANOUT_") || name.starts_with("GITHUB_"))
                    && !out.contains(&name)
                {
                    out.push(name);
                }
            }
        }
    }
}

#[test]
fn every_action_input_has_a_row_in_the_reference() {
    let reference = read("docs/reference.md");
    let table = section("docs/reference.md", &reference, "## Action inputs");
    let inputs = action_inputs();
    assert!(inputs.len() >= 20, "parsed action.yml's inputs: {inputs:?}");
    for known in ["integrate", "deps-dir", "mode", "results-dir"] {
        assert!(inputs.iter().any(|i| i == known), "{known}: {inputs:?}");
    }
    let missing: Vec<&String> = inputs
        .iter()
        .filter(|i| !table.contains(&format!("| `{i}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "action inputs missing from docs/reference.md: {missing:?}"
    );
}

#[test]
fn every_environment_variable_fanout_reads_is_in_the_reference() {
    let reference = read("docs/reference.md");
    let table = section("docs/reference.md", &reference, "## Environment variables");
    let mut names = Vec::new();
    env_reads(&Path::new(ROOT).join("src"), &mut names);
    for known in [
        "FANOUT_LOG",
        "FANOUT_WORKTREE_DIR",
        "GITHUB_API_URL",
        "FANOUT_APP_ID",
    ] {
        assert!(names.iter().any(|n| n == known), "{known}: {names:?}");
    }
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !table.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "variables missing from docs/reference.md: {missing:?}"
    );
}

/// Every property name in the JSON Schema `node`, at any depth.
fn schema_keys(node: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
    match node {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                if k == "properties"
                    && let Some(props) = v.as_object()
                {
                    out.extend(props.keys().cloned());
                }
                schema_keys(v, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| schema_keys(v, out)),
        _ => {}
    }
}

#[test]
fn every_config_key_is_documented() {
    let out = succeeded(std::process::Command::new(FANOUT).arg("schema"));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut keys = std::collections::BTreeSet::new();
    schema_keys(&schema, &mut keys);
    for known in ["parallel_runs", "worktree_dir", "writable", "kill_grace"] {
        assert!(keys.contains(known), "{known}: {keys:?}");
    }
    let all: String = pages().into_iter().map(|(_, t)| t).collect();
    let named = |k: &str| {
        all.contains(&format!("`{k}`"))
            || all.match_indices(&format!("{k}:")).any(|(at, _)| {
                all[..at]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_alphanumeric() && c != '_')
            })
    };
    let missing: Vec<&String> = keys.iter().filter(|k| !named(k)).collect();
    assert!(
        missing.is_empty(),
        "fanout.yml keys named nowhere in README.md or docs/: {missing:?}"
    );
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces → `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of `text`'s headings (outside code blocks).
fn anchors(text: &str) -> Vec<String> {
    let mut fence = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        } else if !fence && line.starts_with('#') {
            let heading = line.trim_start_matches('#');
            if heading.starts_with(' ') {
                out.push(anchor(heading));
            }
        }
    }
    out
}

/// The relative link targets in `text` (`](target)`, not `http…` or `mailto:`).
fn relative_links(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')')?];
            (!target.contains("://") && !target.starts_with("mailto:")).then(|| target.to_owned())
        })
        .collect()
}

#[test]
fn links_between_the_readme_and_docs_resolve() {
    for topic in TOPICS {
        let path = Path::new(ROOT).join(format!("docs/{topic}.md"));
        assert!(path.is_file(), "{} is missing", path.display());
    }
    let mut bad = Vec::new();
    let mut count = 0;
    for (page, text) in pages() {
        let dir = Path::new(&page).parent().unwrap_or(Path::new(""));
        for link in relative_links(&text) {
            count += 1;
            let (file, frag) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                let joined = Path::new(ROOT).join(dir).join(file);
                match joined.canonicalize() {
                    Ok(p) => p.strip_prefix(ROOT).unwrap().display().to_string(),
                    Err(_) => {
                        bad.push(format!("{page}: ({link}): no file {file}"));
                        continue;
                    }
                }
            };
            if !frag.is_empty()
                && target.ends_with(".md")
                && !anchors(&read(&target)).iter().any(|a| a == frag)
            {
                bad.push(format!("{page}: ({link}): no heading #{frag} in {target}"));
            }
        }
    }
    assert!(count >= 20, "links found: {count}");
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn the_readme_is_a_short_path_to_the_docs() {
    let readme = read("README.md");
    assert!(
        readme.lines().count() <= 250,
        "README.md has {} lines",
        readme.lines().count()
    );
    let top: String = readme.lines().take(60).collect::<Vec<_>>().join("\n");
    for must in [
        "cargo run --locked -- demo",
        "cargo test --locked",
        "fanout demo",
    ] {
        assert!(top.contains(must), "README's first 60 lines lack {must:?}");
    }
    for topic in TOPICS {
        assert!(
            readme.contains(&format!("](docs/{topic}.md)")),
            "README links no docs/{topic}.md"
        );
    }
}
