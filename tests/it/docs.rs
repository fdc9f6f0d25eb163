//! The README stays complete: every input of `action.yml` has a row in its "Action
//! inputs" table, and every `FANOUT_*` / `GITHUB_*` variable fanout reads in `src/`
//! (`std::env::var`/`var_os`, publishing's `env(…)`, the secrets taken at start) is
//! named in its "Environment variables" section.

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap()
}

/// The text of the README section under `heading`, up to the next heading.
fn section(readme: &str, heading: &str) -> String {
    let start = readme
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README has no {heading:?} section"));
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
fn every_action_input_has_a_row_in_the_readme() {
    let readme = read("README.md");
    let table = section(&readme, "### Action inputs");
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
        "action inputs missing from the README: {missing:?}"
    );
}

#[test]
fn every_environment_variable_fanout_reads_is_in_the_readme() {
    let readme = read("README.md");
    let table = section(&readme, "### Environment variables");
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
        "variables missing from the README: {missing:?}"
    );
}
