//! Stacked pull requests (stable branches, tasks with `depends_on`): a dependent
//! task's pull request is based on its dependency's branch while the dependency's
//! pull request is open, so that it shows only its own change, and every pull request
//! of a stack says so at the top of its body — the whole stack, bottom first, in
//! both directions. When the dependency's pull request is merged or closed, the
//! dependent is based on the base branch again ([`crate::publish::lifecycle`]); a
//! dependency closed without merging is said in the dependent's body (its change is
//! in the dependent's diff).
//!
//! The section is fanout's: found between its own HTML comments and replaced whole.

use crate::report::summary::md_escape;

const OPEN: &str = "<!-- fanout:stack -->";
const CLOSE: &str = "<!-- /fanout:stack -->";

/// A pull request of a stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its task's key.
    pub key: String,
    /// Its branch.
    pub branch: String,
    /// Its number (`None`: not opened yet).
    pub number: Option<u64>,
    /// The branch it is based on.
    pub base: String,
}

/// The stacks among `members` (in plan order: dependencies first), linked by
/// `edges` (dependent's key, dependency's key): each stack of two or more, its
/// members in plan order.
pub fn stacks(members: &[Member], edges: &[(String, String)]) -> Vec<Vec<Member>> {
    let n = members.len();
    let mut group: Vec<usize> = (0..n).collect();
    fn root(group: &mut [usize], mut i: usize) -> usize {
        while group[i] != i {
            group[i] = group[group[i]];
            i = group[i];
        }
        i
    }
    let at = |k: &str| members.iter().position(|m| m.key == k);
    for (a, b) in edges {
        if let (Some(a), Some(b)) = (at(a), at(b)) {
            let (ra, rb) = (root(&mut group, a), root(&mut group, b));
            group[ra] = rb;
        }
    }
    let mut out: Vec<Vec<Member>> = Vec::new();
    let mut roots: Vec<usize> = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let r = root(&mut group, i);
        match roots.iter().position(|x| *x == r) {
            Some(k) => out[k].push(m.clone()),
            None => {
                roots.push(r);
                out.push(vec![m.clone()]);
            }
        }
    }
    out.retain(|s| s.len() > 1);
    out
}

/// The section at the top of `me`'s body: the stack, bottom first, `me` marked; and
/// `notes` (a dependency closed without merging), each on a line.
pub fn section(stack: &[Member], me: &str, notes: &[String]) -> Option<String> {
    if stack.len() < 2 && notes.is_empty() {
        return None;
    }
    let mut out = format!("{OPEN}\n");
    if stack.len() > 1 {
        out.push_str(
            "> **A stack of pull requests** (fanout): each is based on the one before it and shows only its own change; review and merge from the top of this list down.\n",
        );
        for (i, m) in stack.iter().enumerate() {
            let number = m
                .number
                .map_or("(opens next)".to_owned(), |n| format!("#{n}"));
            let line = format!(
                "{number} `{}` → `{}`",
                md_escape(&m.key),
                md_escape(&m.base)
            );
            if m.key == me {
                out.push_str(&format!("> {}. **{line} (this one)**\n", i + 1));
            } else {
                out.push_str(&format!("> {}. {line}\n", i + 1));
            }
        }
    }
    for n in notes {
        out.push_str(&format!("> ⚠️ {n}\n"));
    }
    out.push_str(CLOSE);
    Some(out)
}

/// `body` with its stack section replaced by `section` (put at the top when it has
/// none; taken out when `section` is `None`).
pub fn with_section(body: &str, section: Option<&str>) -> String {
    let rest = match (body.find(OPEN), body.find(CLOSE)) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &body[..a], &body[b + CLOSE.len()..]),
        _ => body.to_owned(),
    };
    let rest = rest.trim_start();
    match section {
        Some(s) => format!("{s}\n\n{rest}"),
        None => rest.to_owned(),
    }
}

/// The stack section of `body`, if it has one.
pub fn section_of(body: &str) -> Option<&str> {
    let a = body.find(OPEN)?;
    let b = body[a..].find(CLOSE)? + a;
    Some(&body[a..b + CLOSE.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(key: &str, number: Option<u64>, base: &str) -> Member {
        Member {
            key: key.into(),
            branch: format!("fanout/{key}"),
            number,
            base: base.into(),
        }
    }

    #[test]
    fn stacks_are_linked_tasks_bottom_first() {
        let members = vec![
            m("a", Some(1), "main"),
            m("x", Some(9), "main"),
            m("b", Some(2), "fanout/a"),
            m("c", None, "fanout/b"),
        ];
        let edges = vec![
            ("b".to_owned(), "a".to_owned()),
            ("c".to_owned(), "b".to_owned()),
        ];
        let s = stacks(&members, &edges);
        assert_eq!(s.len(), 1);
        let keys: Vec<&str> = s[0].iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        let text = section(&s[0], "b", &[]).unwrap();
        assert!(text.contains("> 1. #1 `a` → `main`\n"), "{text}");
        assert!(
            text.contains("> 2. **#2 `b` → `fanout/a` (this one)**\n"),
            "{text}"
        );
        assert!(
            text.contains("> 3. (opens next) `c` → `fanout/b`\n"),
            "{text}"
        );
    }

    #[test]
    fn the_section_is_replaced_whole_and_taken_out() {
        let s = section(
            &[m("a", Some(1), "main"), m("b", Some(2), "fanout/a")],
            "a",
            &[],
        );
        let body = with_section("## Title\n\ntext", s.as_deref());
        assert!(
            body.starts_with(OPEN) && body.ends_with("## Title\n\ntext"),
            "{body}"
        );
        assert_eq!(section_of(&body), s.as_deref());
        let again = with_section(&body, s.as_deref());
        assert_eq!(again, body);
        assert_eq!(with_section(&body, None), "## Title\n\ntext");
        let noted = section(&[], "b", &["closed".into()]).unwrap();
        assert!(noted.contains("> ⚠️ closed"), "{noted}");
    }
}
