//! How the GitHub Actions runner reads workflow commands from a step's output, for
//! tests of what fanout prints (act parses far less: only lines that start with `::`
//! or `##[`, and never after leading whitespace).
//!
//! A port of the runner's rules (actions/runner: `ActionCommand.TryParseV2` and
//! `TryParse` in src/Runner.Common/ActionCommand.cs, `ActionCommandManager.
//! TryProcessCommand` in src/Runner.Worker/ActionCommandManager.cs):
//! - lines end at CR, LF or CRLF (.NET's `StreamReader.ReadLine`);
//! - `::name props::data`: the line, leading whitespace trimmed, starts with `::`; the
//!   command info runs to the next `::`; the name is up to the first space;
//!   properties are `k=v` split on `,`;
//! - else the legacy `##[name props]data`, found ANYWHERE in the line; properties
//!   split on `;`;
//! - only registered names count (case-insensitive): the runner's command extensions
//!   and `stop-commands`; `::stop-commands::T` stops processing until a command named
//!   `T` (`::T::`, or `##[T]` anywhere) resumes it; while stopped, nothing else runs.

use std::collections::BTreeMap;

/// The commands the runner registers (its `IActionCommandExtension`s) besides
/// `stop-commands`.
const REGISTERED: &[&str] = &[
    "set-env",
    "set-output",
    "save-state",
    "add-mask",
    "add-path",
    "add-matcher",
    "remove-matcher",
    "warning",
    "error",
    "notice",
    "debug",
    "group",
    "endgroup",
    "echo",
];

/// A command the runner acted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Its name, lowercased.
    pub name: String,
    /// Its properties.
    pub props: BTreeMap<String, String>,
    /// Its data, unescaped.
    pub data: String,
    /// The line it came from.
    pub line: String,
}

/// One step's command processing.
#[derive(Debug, Default)]
pub struct Runner {
    stopped_by: Option<String>,
    /// The commands processed, in order (`stop-commands` and resumes included).
    pub processed: Vec<Command>,
}

impl Runner {
    /// Feed a stream's text, line by line.
    pub fn feed(&mut self, text: &str) {
        for line in lines(text) {
            self.line(line);
        }
    }

    /// The commands processed other than `stop-commands` and resumes.
    pub fn acted(&self) -> Vec<&Command> {
        self.processed
            .iter()
            .filter(|c| c.name != "stop-commands" && !c.props.contains_key("(resume)"))
            .collect()
    }

    /// Whether processing is stopped now.
    pub fn stopped(&self) -> bool {
        self.stopped_by.is_some()
    }

    fn registered(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        name == "stop-commands"
            || REGISTERED.contains(&name.as_str())
            || self.stopped_by.as_deref() == Some(name.as_str())
    }

    /// Process one line.
    pub fn line(&mut self, line: &str) {
        let Some(mut cmd) = self.parse_v2(line).or_else(|| self.parse_v1(line)) else {
            return;
        };
        cmd.line = line.to_owned();
        if let Some(token) = &self.stopped_by {
            if cmd.name == *token {
                self.stopped_by = None;
                cmd.props.insert("(resume)".into(), String::new());
                self.processed.push(cmd);
            }
            return;
        }
        if cmd.name == "stop-commands" {
            self.stopped_by = Some(cmd.data.to_ascii_lowercase());
        }
        self.processed.push(cmd);
    }

    fn parse_v2(&self, line: &str) -> Option<Command> {
        let message = line.trim_start();
        let rest = message.strip_prefix("::")?;
        let end = rest.find("::")?;
        let info = &rest[..end];
        let (name, props) = match info.split_once(' ') {
            Some((n, p)) => (n, p.trim()),
            None => (info, ""),
        };
        if !self.registered(name) {
            return None;
        }
        Some(Command {
            name: name.to_ascii_lowercase(),
            props: props_of(props, ','),
            data: unescape(&rest[end + 2..]),
            line: String::new(),
        })
    }

    fn parse_v1(&self, line: &str) -> Option<Command> {
        let start = line.find("##[")? + 3;
        let end = start + line[start..].find(']')?;
        let info = &line[start..end];
        let (name, props) = match info.split_once(' ') {
            Some((n, p)) => (n, p),
            None => (info, ""),
        };
        if !self.registered(name) {
            return None;
        }
        Some(Command {
            name: name.to_ascii_lowercase(),
            props: props_of(props, ';'),
            data: unescape(&line[end + 1..]),
            line: String::new(),
        })
    }
}

/// Lines as .NET's `ReadLine` splits them: at CRLF, CR or LF.
pub fn lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['\r', '\n']) {
            Some(i) => {
                out.push(&rest[..i]);
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
            }
            None => {
                out.push(rest);
                rest = "";
            }
        }
    }
    out
}

fn props_of(text: &str, sep: char) -> BTreeMap<String, String> {
    text.split(sep)
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=')?;
            (!k.is_empty() && !v.is_empty()).then(|| (k.to_owned(), unescape(v)))
        })
        .collect()
}

fn unescape(s: &str) -> String {
    s.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
}

#[test]
fn the_model_reads_commands_as_the_runner_does() {
    let mut r = Runner::default();
    r.feed(
        "plain\n   ::add-mask::s3cret\nsome text ##[set-output name=x;]y\r::unknown::z\n\
         ::stop-commands::tok\n::error::hidden\n##[warning]hidden\n  ::tok::\n::error title=t::shown %25\n",
    );
    let acted: Vec<(&str, &str)> = r
        .acted()
        .iter()
        .map(|c| (c.name.as_str(), c.data.as_str()))
        .collect();
    assert_eq!(
        acted,
        [
            ("add-mask", "s3cret"),
            ("set-output", "y"),
            ("error", "shown %")
        ]
    );
    assert_eq!(r.acted()[1].props["name"], "x");
    assert_eq!(r.acted()[2].props["title"], "t");
    assert!(!r.stopped());
    // A legacy resume, anywhere in a line, ends a block too.
    let mut r = Runner::default();
    r.feed("::stop-commands::abc\ntext ##[abc] more\n::error::after\n");
    assert_eq!(r.acted().len(), 1);
}
