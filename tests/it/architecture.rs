//! The shape of `src/`: data flows one way (issue #10).
//!
//! Reads every file under `src/`, collects the `crate::…` paths each file-module uses
//! (`use` lines, grouped `use crate::{a, b::c}` imports, inline `crate::x::y` paths,
//! `super::` and `self::` resolved, a child module named directly, paths in attribute
//! strings such as serde's `with = "…"`), test code included, and asserts:
//!
//! 1. no cycle among file-modules, and none among top-level modules;
//! 2. each top-level module imports only modules at or before its rank in [`ORDER`];
//! 3. no file under `src/cli/` imports another, except the shared `cli/common.rs`
//!    (the root `cli/mod.rs` dispatches to every subcommand);
//! 4. each failure names the offending file and import.
//!
//! The checker itself is tested on small made-up trees that break each rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules by rank: a module may import modules of its own rank or lower.
/// Leaves first (they import no stage), then the stages in the order data flows.
const ORDER: &[(&str, u32)] = &[
    ("exit", 0),
    ("git", 0),
    ("model", 0),
    ("repo", 0),
    ("sandbox", 0),
    ("secret", 0),
    ("util", 0),
    ("config", 1),
    ("agent", 2),
    // Prices calls with agent's price table; run starts it for its workers.
    ("gateway", 3),
    ("plan", 4),
    ("run", 5),
    ("store", 6),
    ("fanin", 7),
    ("report", 8),
    ("publish", 9),
    ("actions", 10),
    ("ops", 11),
    ("cli", 12),
    // Not a stage: the fuzz entry points call every stage's parsers.
    ("fuzzing", 13),
];

/// The one `cli/` file every subcommand may import.
const CLI_SHARED: &str = "cli::common";

#[test]
fn src_follows_the_pipeline() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = read_tree(&root);
    assert!(
        files.len() > 20,
        "expected the crate's files under {}",
        root.display()
    );
    let problems = check(&files);
    assert!(
        problems.is_empty(),
        "src/ breaks the one-way flow (see tests/architecture.rs):\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_checker_reads_every_kind_of_import() {
    let files = tree(&[
        (
            "lib.rs",
            "pub mod exit; pub mod plan; pub mod run; pub mod cli;",
        ),
        ("exit.rs", ""),
        (
            "plan/mod.rs",
            "pub mod assign;\npub mod setup;\nuse setup::SetupPlan;\n",
        ),
        ("plan/setup.rs", ""),
        (
            "plan/assign.rs",
            "use super::{Plan, setup::{self, SetupPlan}};\n",
        ),
        (
            "run/mod.rs",
            "// use crate::cli::x; (a comment)\n/// [`crate::cli`] (a doc link)\nfn f() { let s = \"crate::cli::run\"; let c = '\"'; }\n#[serde(with = \"crate::exit\")]\nstruct S;\nmod tests { use super::*; fn t() { crate::plan::assign::build(); } }\n",
        ),
        ("cli/mod.rs", "pub mod common;\npub mod run;\n"),
        ("cli/common.rs", ""),
        (
            "cli/run.rs",
            "use super::common::Context;\nuse crate::{exit, run};\n",
        ),
    ]);
    let edges = imports(&files);
    let of = |m: &str| edges[m].keys().cloned().collect::<Vec<_>>();
    assert_eq!(of("plan"), ["plan::setup"]);
    assert_eq!(of("plan::assign"), ["plan", "plan::setup"]);
    assert_eq!(of("run"), ["exit", "plan::assign"]);
    assert_eq!(of("cli::run"), ["cli::common", "exit", "run"]);
    assert!(check(&files).is_empty(), "{:?}", check(&files));
}

#[test]
fn the_checker_names_a_stage_importing_a_later_one() {
    let files = tree(&[
        ("lib.rs", ""),
        ("plan/mod.rs", "pub mod assign;"),
        ("plan/assign.rs", "fn f() { crate::run::go(); }"),
        ("run/mod.rs", ""),
    ]);
    assert_eq!(
        check(&files),
        ["src/plan/assign.rs imports crate::run::go: plan (rank 4) may not import run (rank 5)"]
    );
}

#[test]
fn the_checker_names_a_cycle() {
    let files = tree(&[
        ("lib.rs", ""),
        ("run/mod.rs", "pub mod a; pub mod b;"),
        ("run/a.rs", "use super::b::B;"),
        ("run/b.rs", "use crate::run::a::A;"),
    ]);
    let problems = check(&files);
    assert!(
        problems
            .iter()
            .any(|p| p
                == "import cycle: run::a → run::b → run::a (src/run/a.rs imports super::b::B)"),
        "{problems:?}"
    );
}

#[test]
fn the_checker_names_a_command_importing_a_command() {
    let files = tree(&[
        ("lib.rs", ""),
        ("cli/mod.rs", "pub mod common; pub mod run; pub mod worker;"),
        ("cli/common.rs", ""),
        ("cli/run.rs", "use super::common::CliError;"),
        ("cli/worker.rs", "use super::run::execute_plan;"),
    ]);
    assert_eq!(
        check(&files),
        [
            "src/cli/worker.rs imports super::run::execute_plan: a command file may import only cli/common.rs of cli/"
        ]
    );
}

#[test]
fn the_checker_wants_every_top_level_module_ranked() {
    let files = tree(&[("lib.rs", ""), ("stray.rs", "")]);
    assert_eq!(
        check(&files),
        ["src/stray.rs: top-level module `stray` has no rank in ORDER (tests/architecture.rs)"]
    );
}

// ---------------------------------------------------------------------------------
// The checker.

/// One source file: its module path (`run::attempt`; `""` for the crate root) and text.
#[derive(Debug)]
struct File {
    module: String,
    shown: String,
    text: String,
}

/// For each file-module: the file-modules it imports, each with the first path that
/// does so.
type Edges = BTreeMap<String, BTreeMap<String, String>>;

fn read_tree(root: &Path) -> Vec<File> {
    let mut paths = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src/ is readable").flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                paths.push(p);
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .filter(|p| p.strip_prefix(root).unwrap() != Path::new("main.rs"))
        .map(|p| {
            let rel = p.strip_prefix(root).unwrap().to_owned();
            File {
                module: module_of(&rel),
                shown: format!("src/{}", rel.display()),
                text: std::fs::read_to_string(&p).expect("a source file is readable"),
            }
        })
        .collect()
}

/// A made-up tree, for testing the checker.
fn tree(files: &[(&str, &str)]) -> Vec<File> {
    files
        .iter()
        .map(|(rel, text)| File {
            module: module_of(&PathBuf::from(rel)),
            shown: format!("src/{rel}"),
            text: (*text).to_owned(),
        })
        .collect()
}

/// `run/attempt.rs` → `run::attempt`; `run/mod.rs` → `run`; `lib.rs` → `""`.
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts.join("::")
}

/// Every problem with `files`, one line each.
fn check(files: &[File]) -> Vec<String> {
    let edges = imports(files);
    let shown: BTreeMap<&str, &str> = files
        .iter()
        .map(|f| (f.module.as_str(), f.shown.as_str()))
        .collect();
    let mut problems = Vec::new();
    problems.extend(unranked(files));
    problems.extend(rank_violations(&edges, &shown));
    problems.extend(command_imports(&edges, &shown));
    problems.extend(cycles(&edges, &shown, |m| m.to_owned()));
    problems.extend(cycles(&edges, &shown, |m| top(m).to_owned()));
    problems
}

fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or("")
}

fn rank(top: &str) -> Option<u32> {
    ORDER.iter().find(|(m, _)| *m == top).map(|(_, r)| *r)
}

fn unranked(files: &[File]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    files
        .iter()
        .filter(|f| !f.module.is_empty() && rank(top(&f.module)).is_none())
        .filter(|f| seen.insert(top(&f.module).to_owned()))
        .map(|f| {
            format!(
                "{}: top-level module `{}` has no rank in ORDER (tests/architecture.rs)",
                f.shown,
                top(&f.module)
            )
        })
        .collect()
}

fn rank_violations(edges: &Edges, shown: &BTreeMap<&str, &str>) -> Vec<String> {
    let mut out = Vec::new();
    for (from, tos) in edges {
        let Some(from_rank) = rank(top(from)) else {
            continue;
        };
        for (to, path) in tos {
            match rank(top(to)) {
                Some(r) if r > from_rank => out.push(format!(
                    "{} imports {path}: {} (rank {from_rank}) may not import {} (rank {r})",
                    shown[from.as_str()],
                    top(from),
                    top(to)
                )),
                _ => {}
            }
        }
    }
    out
}

fn command_imports(edges: &Edges, shown: &BTreeMap<&str, &str>) -> Vec<String> {
    let mut out = Vec::new();
    for (from, tos) in edges {
        if top(from) != "cli" || from == "cli" {
            continue;
        }
        for (to, path) in tos {
            if top(to) == "cli" && (to != CLI_SHARED || from == CLI_SHARED) {
                out.push(format!(
                    "{} imports {path}: a command file may import only cli/common.rs of cli/",
                    shown[from.as_str()]
                ));
            }
        }
    }
    out
}

/// Cycles among the modules `group` maps file-modules to, one line per cycle found.
fn cycles(
    edges: &Edges,
    shown: &BTreeMap<&str, &str>,
    group: impl Fn(&str) -> String,
) -> Vec<String> {
    // group → group → (file, path) of one import between them
    let mut graph: BTreeMap<String, BTreeMap<String, (String, String)>> = BTreeMap::new();
    for (from, tos) in edges {
        for (to, path) in tos {
            let (a, b) = (group(from), group(to));
            if a != b {
                graph
                    .entry(a)
                    .or_default()
                    .entry(b)
                    .or_insert_with(|| (shown[from.as_str()].to_owned(), path.clone()));
            }
        }
    }
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    for start in graph.keys() {
        if let Some(cycle) = cycle_from(&graph, start) {
            let mut key = cycle.clone();
            key.sort();
            if reported.insert(key) {
                let (file, path) = &graph[&cycle[0]][&cycle[1 % cycle.len()]];
                let mut ring = cycle.clone();
                ring.push(cycle[0].clone());
                out.push(format!(
                    "import cycle: {} ({file} imports {path})",
                    ring.join(" → ")
                ));
            }
        }
    }
    out
}

/// A cycle through `start`, as the list of its modules from `start`, if there is one.
fn cycle_from(
    graph: &BTreeMap<String, BTreeMap<String, (String, String)>>,
    start: &str,
) -> Option<Vec<String>> {
    let mut path = vec![start.to_owned()];
    let mut visited = BTreeSet::new();
    fn walk(
        graph: &BTreeMap<String, BTreeMap<String, (String, String)>>,
        start: &str,
        path: &mut Vec<String>,
        visited: &mut BTreeSet<String>,
    ) -> bool {
        let here = path.last().unwrap().clone();
        for next in graph.get(&here).into_iter().flat_map(|m| m.keys()) {
            if next == start {
                return true;
            }
            if visited.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, path, visited) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    walk(graph, start, &mut path, &mut visited).then_some(path)
}

// ---------------------------------------------------------------------------------
// Reading imports.

fn imports(files: &[File]) -> Edges {
    let modules: BTreeSet<&str> = files.iter().map(|f| f.module.as_str()).collect();
    let mut edges = Edges::new();
    for f in files {
        let entry = edges.entry(f.module.clone()).or_default();
        for (path, shown) in paths_in(f) {
            let Some(target) = owner(&modules, &path) else {
                continue;
            };
            if target != f.module {
                entry.entry(target).or_insert(shown);
            }
        }
    }
    edges
}

/// The file-module holding `path` (absolute segments): its longest prefix that is one.
fn owner(modules: &BTreeSet<&str>, path: &[String]) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| modules.contains(m.as_str()))
}

/// Absolute paths (crate-relative segments) used by `f`, each with its text as written.
fn paths_in(f: &File) -> Vec<(Vec<String>, String)> {
    let (code, attr_paths) = strip(&f.text);
    let tokens = tokenize(&code);
    let base: Vec<String> = if f.module.is_empty() {
        Vec::new()
    } else {
        f.module.split("::").map(str::to_owned).collect()
    };
    let children = child_modules(&tokens);
    let mut out = Vec::new();
    for p in attr_paths {
        let segs: Vec<String> = p.split("::").map(str::to_owned).collect();
        if let Some(abs) = resolve(&base, &[], &children, &segs) {
            out.push((abs, p));
        }
    }
    let mut inline: Vec<(String, usize)> = Vec::new(); // inline `mod x {` and its depth
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        match t {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t == "{") => {
                inline.push((tokens[i + 1].clone(), depth));
            }
            "use" => {
                let end = (i..tokens.len())
                    .find(|&j| tokens[j] == ";")
                    .unwrap_or(tokens.len());
                let scope: Vec<String> = inline.iter().map(|(m, _)| m.clone()).collect();
                for segs in use_tree(&tokens[i + 1..end]) {
                    if let Some(abs) = resolve(&base, &scope, &children, &segs) {
                        out.push((abs, segs.join("::")));
                    }
                }
                i = end;
                continue;
            }
            _ if is_ident(t) && tokens.get(i + 1).is_some_and(|n| n == "::") => {
                let prev_is_path = i > 0 && tokens[i - 1] == "::";
                let mut segs = vec![t.to_owned()];
                let mut j = i + 1;
                while tokens.get(j).is_some_and(|x| x == "::")
                    && tokens.get(j + 1).is_some_and(|x| is_ident(x))
                {
                    segs.push(tokens[j + 1].clone());
                    j += 2;
                }
                if !prev_is_path {
                    let scope: Vec<String> = inline.iter().map(|(m, _)| m.clone()).collect();
                    if let Some(abs) = resolve(&base, &scope, &children, &segs) {
                        out.push((abs, segs.join("::")));
                    }
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// `crate::a::b`, `super::x`, `self::y`, or `child::z` (a module this file declares),
/// as crate-relative segments; `None` for anything else (std, other crates, items).
fn resolve(
    base: &[String],
    scope: &[String],
    children: &BTreeSet<String>,
    segs: &[String],
) -> Option<Vec<String>> {
    let mut here: Vec<String> = base.iter().chain(scope).cloned().collect();
    let mut rest = segs;
    match rest.first()?.as_str() {
        "crate" => {
            here.clear();
            rest = &rest[1..];
        }
        "self" => rest = &rest[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                here.pop()?;
                rest = &rest[1..];
            }
        }
        first if scope.is_empty() && children.contains(first) => {}
        _ => return None,
    }
    here.extend(rest.iter().cloned());
    Some(here)
}

/// The modules a file declares with `mod name;` (its child files).
fn child_modules(tokens: &[String]) -> BTreeSet<String> {
    tokens
        .windows(3)
        .filter(|w| w[0] == "mod" && w[2] == ";")
        .map(|w| w[1].clone())
        .collect()
}

/// The paths a `use` tree names: `a::{b, c::{self, d}}` → `a::b`, `a::c`, `a::c::d`.
fn use_tree(tokens: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut pos = 0;
    tree_at(tokens, &mut pos, &[], &mut out);
    out
}

fn tree_at(tokens: &[String], pos: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    while *pos < tokens.len() {
        let t = tokens[*pos].as_str();
        *pos += 1;
        match t {
            "::" | "pub" | "(" | ")" => {}
            "{" => {
                loop {
                    tree_at(tokens, pos, &path, out);
                    match tokens.get(*pos).map(String::as_str) {
                        Some(",") => *pos += 1,
                        Some("}") => {
                            *pos += 1;
                            break;
                        }
                        _ => break,
                    }
                    if tokens.get(*pos).is_some_and(|t| t == "}") {
                        *pos += 1;
                        break;
                    }
                }
                return;
            }
            "," | "}" => {
                *pos -= 1;
                break;
            }
            "*" => break,
            "as" => {
                *pos += 1; // the new name
                break;
            }
            "self" if !path.is_empty() => {}
            _ => path.push(t.to_owned()),
        }
    }
    if path.len() > prefix.len() || (path == prefix && !prefix.is_empty()) {
        out.push(path);
    }
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && t.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Identifiers, `::`, and single punctuation characters.
fn tokenize(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
            continue;
        }
        if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
            continue;
        }
        if !c.is_whitespace() {
            out.push(c.to_string());
        }
        i += 1;
    }
    out
}

/// The code of `text` with comments and the insides of string and character literals
/// blanked out, and the paths written as whole strings inside attributes
/// (`#[serde(with = "crate::x::y")]`).
fn strip(text: &str) -> (String, Vec<String>) {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let mut strings = Vec::new();
    let mut attr: Option<usize> = None; // bracket depth inside `#[…]`
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i = block_comment_end(&chars, i);
            code.push(' ');
        } else if let Some((len, body)) = string_at(&chars, i) {
            if attr.is_some() && is_path_text(&body) {
                strings.push(body.trim().to_owned());
            }
            code.push_str("\"\"");
            i += len;
        } else if c == '\'' && is_char_literal(&chars, i) {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '\'' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            code.push_str("' '");
            i = j + 1;
        } else {
            attr = match (attr, c) {
                (None, '#') if next == Some('[') || next == Some('!') => Some(0),
                (Some(d), '[') => Some(d + 1),
                (Some(1), ']') => None,
                (Some(d), ']') => Some(d - 1),
                (a, _) => a,
            };
            code.push(c);
            i += 1;
        }
    }
    (code, strings)
}

/// Where the block comment opening at `i` ends (comments nest).
fn block_comment_end(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                break;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// `crate::x::y`, `super::x`, `self::x`: a path written as a string.
fn is_path_text(body: &str) -> bool {
    let body = body.trim();
    ["crate::", "super::", "self::"]
        .iter()
        .any(|p| body.starts_with(p))
        && body
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == ':')
}

/// A string literal starting at `i` (`"…"`, `r"…"`, `r#"…"#`, `b"…"`, `br#"…"#`):
/// its length in characters and its contents.
fn string_at(chars: &[char], i: usize) -> Option<(usize, String)> {
    let prev_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
    let mut j = i;
    let mut raw = false;
    if chars[j] != '"' {
        if prev_ident {
            return None;
        }
        if chars[j] == 'b' {
            j += 1;
        }
        if chars.get(j) == Some(&'r') {
            raw = true;
            j += 1;
        }
        if j == i {
            return None;
        }
    }
    let mut hashes = 0;
    while raw && chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if chars.get(j) != Some(&'"') {
        return None;
    }
    let start = j + 1;
    let mut k = start;
    while k < chars.len() {
        if !raw && chars[k] == '\\' {
            k += 2;
            continue;
        }
        if chars[k] == '"' && (0..hashes).all(|h| chars.get(k + 1 + h) == Some(&'#')) {
            let body: String = chars[start..k].iter().collect();
            return Some((k + 1 + hashes - i, body));
        }
        k += 1;
    }
    Some((chars.len() - i, chars[start..].iter().collect()))
}

/// Whether the `'` at `i` opens a character literal (not a lifetime or a label).
fn is_char_literal(chars: &[char], i: usize) -> bool {
    matches!(
        (chars.get(i + 1), chars.get(i + 2)),
        (Some('\\'), _) | (Some(_), Some('\''))
    )
}
