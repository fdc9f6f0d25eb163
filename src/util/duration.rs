//! Durations: one parser for every duration fanout reads, on the command line and in
//! `fanout.yml`. The syntax is humantime's (`90s`, `10m`, `1h30m`, `2d`, `500ms`,
//! `1h 30m`); a bare number means seconds where the `parallel_runs:` block and flags took
//! seconds ([`Bare::Seconds`]: `timeout_per_worker: 600`, `--timeout-per-worker 600`)
//! and is refused where a unit left out could do harm ([`Bare::Refused`]:
//! `cleanup --older-than 10` would sweep every run older than ten seconds).

use std::time::Duration;

/// What a number without a unit means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bare {
    /// Seconds (fractions allowed: `0.5`).
    Seconds,
    /// An error: the unit must be written.
    Refused,
}

/// The examples every duration error shows.
pub const EXAMPLES: &str = "90s, 10m, 1h30m or 2d";

/// The longest duration fanout takes (ten years): longer ones are mistakes, and past
/// what a clock can add.
pub const MAX: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Parse `text` as a duration (zero allowed; callers that need more say so), at most
/// [`MAX`].
pub fn parse(text: &str, bare: Bare) -> Result<Duration, String> {
    let d = parse_any(text, bare)?;
    if d > MAX {
        return Err(format!(
            "\"{}\" is longer than fanout takes (at most 10 years)",
            text.trim()
        ));
    }
    Ok(d)
}

fn parse_any(text: &str, bare: Bare) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err(format!("expected a duration like {EXAMPLES}, found \"\""));
    }
    if let Ok(n) = s.parse::<f64>() {
        return match bare {
            Bare::Seconds if n.is_finite() && n >= 0.0 => Duration::try_from_secs_f64(n)
                .map_err(|_| format!("\"{s}\" is longer than fanout takes (at most 10 years)")),
            Bare::Seconds => Err(format!(
                "expected a duration like {EXAMPLES} (or a number of seconds), found \"{s}\""
            )),
            Bare::Refused => Err(format!(
                "\"{s}\" has no unit; write one, e.g. {n}s, {n}m, {n}h or {n}d",
                n = s.trim_start_matches('+')
            )),
        };
    }
    if let Some(at) = months_as_m(s) {
        let (minutes, months) = (
            format!("{}m{}", &s[..at], &s[at + 1..]),
            format!("{}months{}", &s[..at], &s[at + 1..]),
        );
        return Err(format!(
            "\"{s}\" is ambiguous: `M` means months, not minutes; write \"{minutes}\" for minutes or \"{months}\" for months"
        ));
    }
    humantime::parse_duration(s).map_err(|e| {
        format!(
            "expected a duration like {EXAMPLES}, found \"{s}\": {}",
            why(s, &e)
        )
    })
}

/// humantime's error in fanout's words, positions counted in characters from 1.
fn why(s: &str, e: &humantime::DurationError) -> String {
    use humantime::DurationError as E;
    let at = |byte: usize| s.get(..byte).map_or(byte, |p| p.chars().count()) + 1;
    match e {
        E::InvalidCharacter(i) => format!(
            "character {} ({:?}) cannot be part of a duration",
            at(*i),
            s[*i..].chars().next().unwrap_or(' ')
        ),
        E::NumberExpected(i) => format!("a number was expected at character {}", at(*i)),
        E::UnknownUnit { unit, .. } => {
            format!("unknown unit \"{unit}\" (units: ms, s, m, h, d, w, months, y, or their names)")
        }
        E::NumberOverflow => "the number is too large or too precise".to_owned(),
        E::Empty => "it is empty".to_owned(),
    }
}

/// Where `s` has the unit `M` (humantime's months; easily meant as minutes): an `M`
/// after a number, not the start of a longer unit.
fn months_as_m(s: &str) -> Option<usize> {
    s.char_indices().find_map(|(i, c)| {
        let after_number = s[..i]
            .trim_end()
            .ends_with(|p: char| p.is_ascii_digit() || p == '.');
        let unit_alone = !s[i + 1..].starts_with(|n: char| n.is_ascii_alphabetic());
        (c == 'M' && after_number && unit_alone).then_some(i)
    })
}

/// Seconds as a limit is written in a reason: `300s`, `2.5s` (a tenth kept only when
/// there is a fraction).
pub fn format_secs(s: f64) -> String {
    if (s - s.round()).abs() < 1e-9 {
        format!("{}s", s.round() as u64)
    } else {
        format!("{s:.1}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_past_ten_years_is_an_error_not_a_panic() {
        for text in ["1e20", "18000000000000000000", "11y", "3660d"] {
            let e = parse(text, Bare::Seconds).unwrap_err();
            assert!(e.contains("at most 10 years"), "{text}: {e}");
        }
        assert_eq!(parse("3650d", Bare::Seconds), Ok(MAX));
    }

    #[test]
    fn whole_seconds_lose_their_fraction() {
        assert_eq!(
            (format_secs(300.0), format_secs(2.5)),
            ("300s".into(), "2.5s".into())
        );
    }

    #[test]
    fn humantime_syntax_everywhere() {
        let secs = |s: &str| parse(s, Bare::Seconds).map(|d| d.as_secs_f64());
        assert_eq!(secs("90s"), Ok(90.0));
        assert_eq!(secs("10m"), Ok(600.0));
        assert_eq!(secs("1h30m"), Ok(5400.0));
        assert_eq!(secs("1h 30m"), Ok(5400.0));
        assert_eq!(secs("2d"), Ok(172800.0));
        assert_eq!(secs("500ms"), Ok(0.5));
        assert_eq!(secs(" 0.25 "), Ok(0.25));
        assert_eq!(secs("600"), Ok(600.0));
        assert_eq!(
            secs("soon").unwrap_err(),
            "expected a duration like 90s, 10m, 1h30m or 2d, found \"soon\": a number was expected at character 1"
        );
        assert_eq!(
            secs("5 parsecs").unwrap_err(),
            "expected a duration like 90s, 10m, 1h30m or 2d, found \"5 parsecs\": unknown unit \"parsecs\" (units: ms, s, m, h, d, w, months, y, or their names)"
        );
        assert_eq!(
            secs("5m!").unwrap_err(),
            "expected a duration like 90s, 10m, 1h30m or 2d, found \"5m!\": character 3 ('!') cannot be part of a duration"
        );
        assert!(secs("-5").unwrap_err().contains("found \"-5\""));
        assert_eq!(secs("1.5h"), Ok(5400.0));
        assert_eq!(secs("6 hours"), Ok(21600.0));
        assert!(secs("").is_err());
    }

    #[test]
    fn a_capital_m_is_refused_as_ambiguous() {
        assert_eq!(
            parse("10M", Bare::Seconds).unwrap_err(),
            "\"10M\" is ambiguous: `M` means months, not minutes; write \"10m\" for minutes or \"10months\" for months"
        );
        assert_eq!(
            parse("1h 5 M", Bare::Refused).unwrap_err(),
            "\"1h 5 M\" is ambiguous: `M` means months, not minutes; write \"1h 5 m\" for minutes or \"1h 5 months\" for months"
        );
        assert_eq!(
            parse("2months", Bare::Refused),
            Ok(Duration::from_secs(2 * 2_630_016))
        );
        assert_eq!(parse("10m", Bare::Refused), Ok(Duration::from_secs(600)));
    }

    #[test]
    fn a_bare_number_can_be_refused() {
        assert_eq!(
            parse("10", Bare::Refused).unwrap_err(),
            "\"10\" has no unit; write one, e.g. 10s, 10m, 10h or 10d"
        );
        assert_eq!(parse("10m", Bare::Refused), Ok(Duration::from_secs(600)));
        assert_eq!(parse("0s", Bare::Refused), Ok(Duration::ZERO));
    }
}
