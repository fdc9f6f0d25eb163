//! Findings: the agent's final message, kept for a task with `output: findings`
//! (research, review, triage: the message is the point). Each adapter says where its
//! CLI puts the message ([`super::Adapter::findings`]); this module bounds it:
//! credentials masked ([`crate::secret::mask_tokens`]), control characters other than
//! newlines and tabs dropped, at most [`FINDINGS_MAX`] bytes.

/// Most bytes of findings kept; longer text is cut at a character boundary and says so
/// (the note included, it stays within this).
pub const FINDINGS_MAX: usize = 16 * 1024;

/// Room kept for the note saying text was cut.
const CUT_NOTE: usize = 48;

/// `text` made safe to store and show: trimmed, masked, bounded. `None` when empty.
/// Bounding bounded text changes nothing, so text read back (a matrix job's artifact,
/// a dependency's findings) is bounded again without losing the note that it was cut.
pub fn bounded(text: &str) -> Option<String> {
    let clean: String = text
        .chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect();
    let clean = crate::secret::mask_tokens(clean.trim());
    if clean.is_empty() {
        return None;
    }
    if clean.len() <= FINDINGS_MAX {
        return Some(clean);
    }
    let mut cut = FINDINGS_MAX - CUT_NOTE;
    while !clean.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(format!(
        "{}\n… (cut: {} more bytes)",
        &clean[..cut],
        clean.len() - cut
    ))
}

/// The last `lines` non-empty lines of `text`.
pub fn last_lines(text: &str, lines: usize) -> String {
    let kept: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_are_trimmed_masked_and_bounded() {
        assert_eq!(bounded("  \n "), None);
        assert_eq!(
            bounded("\n- flaky: a\n- token ghp_abcdefghijklmnop1234\x1b[0m\n").as_deref(),
            Some("- flaky: a\n- token ***")
        );
        let long = "é".repeat(FINDINGS_MAX);
        let b = bounded(&long).unwrap();
        assert!(b.len() <= FINDINGS_MAX, "{}", b.len());
        assert!(
            b.ends_with(&format!("(cut: {} more bytes)", FINDINGS_MAX + CUT_NOTE)),
            "{}",
            &b[b.len() - 40..]
        );
        // Bounded again (read back from an artifact): the same text.
        assert_eq!(bounded(&b).as_deref(), Some(b.as_str()));
        assert_eq!(last_lines("a\n\nb\nc\n", 2), "b\nc");
    }
}
