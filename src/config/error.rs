//! Errors in `fanout.yml`, located: the file, line, column and key path, with a
//! snippet of the line under a caret. A [`Problem`] found after parsing (by this
//! module's checks, or by a later stage's: agent definitions, `copy:` globs) is
//! located in the text with [`ConfigError::at`].

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use crate::exit::Failure;

/// A configuration error, located in the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid YAML, or a value is not what the key expects.
    #[error("{path}:{line}:{column}: {key}{message}", key = key_prefix(key))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The key path (`parallel_runs.workers`), empty at the top level.
        key: String,
        /// What was wrong and what was expected.
        message: String,
        /// The offending lines, for display.
        snippet: String,
    },
}

fn key_prefix(key: &str) -> String {
    if key.is_empty() || key == "." {
        String::new()
    } else {
        format!("key `{key}`: ")
    }
}

/// A bad file is a usage error; the message carries the snippet.
impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        match e.snippet() {
            Some(s) => Failure::Usage(format!("{e}\n{s}")),
            None => Failure::Usage(e.to_string()),
        }
    }
}

impl ConfigError {
    /// The source excerpt under the error, when there is one.
    pub fn snippet(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { snippet, .. } if !snippet.is_empty() => Some(snippet),
            _ => None,
        }
    }

    /// An error located in a list read as [`super::list_text`] wraps it (`tasks:`
    /// and every line indented), placed back in `original`: the line and column
    /// where `original` holds it, the key without the list's name (`[2].prompt`).
    pub fn in_list(self, original: &str) -> ConfigError {
        match self {
            ConfigError::Invalid {
                path,
                line,
                column,
                key,
                message,
                ..
            } => {
                let line = line.saturating_sub(1).max(1);
                let column = column.saturating_sub(2).max(1);
                let key = key
                    .split_once('[')
                    .map_or(String::new(), |(_, rest)| format!("[{rest}"));
                ConfigError::Invalid {
                    snippet: snippet(original, line, column),
                    path,
                    line,
                    column,
                    key,
                    message,
                }
            }
            other => other,
        }
    }

    /// The located error for `problem`, found in `text` (the file at `path`) after it
    /// was parsed.
    pub fn at(text: &str, path: &Path, problem: Problem) -> ConfigError {
        let (line, column) = locate(text, &problem.path, problem.value);
        ConfigError::Invalid {
            path: path.to_owned(),
            line,
            column,
            key: key_path(&problem.path),
            message: problem.message,
            snippet: snippet(text, line, column),
        }
    }
}

/// One step of a key path in the file: a mapping key or a list index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySeg {
    /// A mapping key.
    Key(String),
    /// A list index (0-based).
    Index(usize),
}

/// `agents.fake.command[1]`, as serde_path_to_error writes key paths.
pub fn key_path(path: &[KeySeg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            KeySeg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            KeySeg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A problem with what a well-formed file says (a value that only makes sense with
/// another, a bad placeholder), found after parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where in the file.
    pub path: Vec<KeySeg>,
    /// What is wrong.
    pub message: String,
    /// Whether the value at `path` is wrong (else the key: misplaced or missing).
    pub value: bool,
}

impl Problem {
    /// A problem at `path` (with the key, not the value).
    pub fn at(path: Vec<KeySeg>, message: impl Into<String>) -> Problem {
        Problem {
            path,
            message: message.into(),
            value: false,
        }
    }

    /// The problem is the value at the path, not the key.
    pub fn in_value(mut self) -> Problem {
        self.value = true;
        self
    }

    /// The path prefixed with `prefix` (the location of the checked value).
    pub fn under(mut self, prefix: &[KeySeg]) -> Problem {
        let mut path = prefix.to_vec();
        path.append(&mut self.path);
        self.path = path;
        self
    }
}

/// A mapping key of a key path.
pub fn key(k: &str) -> KeySeg {
    KeySeg::Key(k.to_owned())
}

/// A YAML node with the location of everything inside it, for pointing a [`Problem`]
/// at a line and column.
#[derive(Debug)]
enum Node {
    Leaf,
    /// A scalar YAML typed as a bool or a number (`yes`, `1`).
    Typed,
    Seq(Vec<serde_saphyr::Spanned<Node>>),
    Map(Vec<(serde_saphyr::Spanned<KeyText>, serde_saphyr::Spanned<Node>)>),
}

/// A mapping key as text (scalars only; other keys read as empty).
#[derive(Debug)]
struct KeyText(String);

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any YAML node")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Node, E> {
                Ok(Node::Typed)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Node, E> {
                Ok(Node::Typed)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Node, E> {
                Ok(Node::Typed)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Node, E> {
                Ok(Node::Typed)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_none<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
                Node::deserialize(d)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Seq(items))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Node::Map(entries))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping key")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyText, E> {
                Ok(KeyText(v.to_owned()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<KeyText, E> {
                Ok(KeyText(String::new()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<KeyText, A::Error> {
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(KeyText(String::new()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<KeyText, A::Error> {
                while map
                    .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(KeyText(String::new()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Line and column of `path` in `text`: a key's own position for a mapping key (its
/// value's with `value`), an item's for a list index; the deepest part of the path
/// that exists when the whole path does not.
/// The line and column of the value at the mapping keys `keys` of `text`, when it
/// has one there.
pub(super) fn value_at(text: &str, keys: &[&str]) -> Option<(usize, usize)> {
    let keys: Vec<KeySeg> = keys.iter().map(|k| key(k)).collect();
    let root = serde_saphyr::from_str::<serde_saphyr::Spanned<Node>>(text).ok()?;
    let mut node = &root;
    for k in &keys {
        let (KeySeg::Key(k), Node::Map(entries)) = (k, &node.value) else {
            return None;
        };
        node = &entries.iter().find(|(name, _)| name.value.0 == *k)?.1;
    }
    Some(locate(text, &keys, true))
}

pub(super) fn locate(text: &str, path: &[KeySeg], value: bool) -> (usize, usize) {
    let Ok(root) = serde_saphyr::from_str::<serde_saphyr::Spanned<Node>>(text) else {
        return (1, 1);
    };
    let mut node = &root;
    let mut at = root.referenced;
    for seg in path {
        let next = match (&node.value, seg) {
            (Node::Map(entries), KeySeg::Key(k)) => entries
                .iter()
                .find(|(name, _)| name.value.0 == *k)
                .map(|(name, child)| {
                    (
                        if value {
                            child.referenced
                        } else {
                            name.referenced
                        },
                        child,
                    )
                }),
            (Node::Seq(items), KeySeg::Index(i)) => items.get(*i).map(|v| (v.referenced, v)),
            _ => None,
        };
        match next {
            Some((loc, child)) => {
                at = loc;
                node = child;
            }
            None => break,
        }
    }
    if at.line() == 0 {
        (1, 1)
    } else {
        (at.line() as usize, at.column().max(1) as usize)
    }
}

/// The items of the top-level list `list` that YAML typed as a bool or a number, with
/// the text written for each (`yes`, `1.10`).
pub(super) fn typed_items(text: &str, list: &str) -> Vec<(usize, String)> {
    let Ok(root) = serde_saphyr::from_str::<serde_saphyr::Spanned<Node>>(text) else {
        return Vec::new();
    };
    let Node::Map(entries) = &root.value else {
        return Vec::new();
    };
    let Some((_, items)) = entries.iter().find(|(k, _)| k.value.0 == list) else {
        return Vec::new();
    };
    let Node::Seq(items) = &items.value else {
        return Vec::new();
    };
    let written = |item: &serde_saphyr::Spanned<Node>| {
        let span = item.referenced.span();
        let start = usize::try_from(span.byte_offset()?).ok()?;
        let len = usize::try_from(span.byte_len()?).ok()?;
        Some(text.get(start..start + len)?.trim().to_owned())
    };
    items
        .iter()
        .enumerate()
        .filter(|(_, item)| matches!(item.value, Node::Typed))
        .filter_map(|(i, item)| Some((i, written(item).filter(|w| !w.is_empty())?)))
        .collect()
}

/// serde's `unknown field `x`, expected one of a, b`, with the closest expected
/// name added (`; did you mean `b`?`) when one is close; any other message as it is.
pub(super) fn suggest_field(message: &str) -> String {
    let suggestion = (|| {
        let rest = message.strip_prefix("unknown field `")?;
        let (field, rest) = rest.split_once('`')?;
        let list = rest.strip_prefix(", expected ")?;
        let list = list.strip_prefix("one of ").unwrap_or(list);
        list.split(", ")
            .map(|k| k.trim().trim_matches('`'))
            .filter(|k| !k.is_empty() && *k != field)
            .map(|k| (strsim::jaro_winkler(field, k), k))
            .filter(|(score, _)| *score > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, k)| k.to_owned())
    })();
    match suggestion {
        Some(k) => format!("{message}; did you mean `{k}`?"),
        None => message.to_owned(),
    }
}

/// serde-saphyr renders `error: line L column C: message`; keep the message.
pub(super) fn strip_location_prefix(s: &str) -> &str {
    let s = s.trim();
    let s = s.strip_prefix("error: ").unwrap_or(s);
    let s = match s.strip_prefix("line ") {
        Some(rest) => match rest.find(": ") {
            Some(idx) if rest[..idx].contains("column") => rest[idx + 2..].trim(),
            _ => s,
        },
        None => s,
    };
    // …and a trailing ` at line L, column C`, which the prefix already says.
    match s.rfind(" at line ") {
        Some(idx) if s[idx..].contains(", column ") => s[..idx].trim_end(),
        _ => s,
    }
}

pub(super) fn snippet(text: &str, line: usize, column: usize) -> String {
    let Some(src) = text.lines().nth(line.saturating_sub(1)) else {
        return String::new();
    };
    let num = line.to_string();
    let pad = " ".repeat(num.len());
    format!(
        "{pad} |\n{num} | {src}\n{pad} | {caret:>width$}",
        caret = "^",
        width = column.max(1)
    )
}
