//! Issues fanout keeps up to date across runs — the morning digest
//! ([`super::digest`]), each findings task's tracking issue ([`super::findings`]) —
//! and the hidden markers that identify them: an issue is fanout's when it is open,
//! carries fanout's label and holds the marker fanout wrote (an HTML comment with
//! JSON in it), never by its title alone.
//!
//! A marker comes back from GitHub, so it is untrusted: read bounded, parsed into
//! plain data, anything odd dropped. Written, its JSON has `<`, `>` and `&` escaped,
//! so no text in it (a task key, a run id) can close the comment early.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::github::{ApiError, GitHub, Issue};

/// The end of every marker.
const CLOSE: &str = " -->";

/// `value` as a marker: `{open}{json}{CLOSE}` (`open` is `<!-- fanout:<kind> `).
pub fn hide<T: Serialize>(open: &str, value: &T) -> String {
    let json = serde_json::to_string(value)
        .expect("serializes")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    format!("{open}{json}{CLOSE}")
}

/// The JSON of the last marker opened by `open` in `body`, when it is at most `limit`
/// bytes long.
pub fn reveal_raw<'a>(body: &'a str, open: &str, limit: usize) -> Option<&'a str> {
    let start = body.rfind(open)? + open.len();
    let rest = &body[start..];
    let end = rest.find(CLOSE).filter(|e| *e <= limit)?;
    Some(&rest[..end])
}

/// The value of the last marker opened by `open` in `body` (see [`reveal_raw`]), when
/// it parses.
pub fn reveal<T: DeserializeOwned>(body: &str, open: &str, limit: usize) -> Option<T> {
    serde_json::from_str(reveal_raw(body, open, limit)?).ok()
}

/// The open issues labelled `label` (the first 100, newest first) whose body holds a
/// marker opened by `open`.
pub async fn marked(github: &GitHub, label: &str, open: &str) -> Result<Vec<Issue>, ApiError> {
    Ok(github
        .list_issues("open", label)
        .await?
        .into_iter()
        .filter(|i| i.body.as_deref().is_some_and(|b| b.contains(open)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_and_cannot_be_closed_early() {
        let open = "<!-- fanout:test ";
        let v = vec!["x --> <b>&".to_owned()];
        let body = format!("text\n{}\n", hide(open, &v));
        assert!(!body.contains("x -->"), "{body}");
        assert_eq!(reveal::<Vec<String>>(&body, open, 100), Some(v));
        assert_eq!(reveal::<Vec<String>>(&body, open, 5), None);
        assert_eq!(reveal::<Vec<String>>("no marker", open, 100), None);
        assert_eq!(
            reveal::<Vec<String>>(&format!("{open}nope -->"), open, 100),
            None
        );
    }
}
