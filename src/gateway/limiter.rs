//! One rate limiter per provider, shared by every worker: it learns from the
//! provider's answers when no request should be sent, and holds new requests (and
//! retries) until then.
//!
//! - A refusal (429, Anthropic's 529 "overloaded", 503) pauses the provider for what
//!   the answer asks: `retry-after-ms`, else `retry-after` (seconds or an HTTP date),
//!   else the reset of a rate-limit header that is down to 0, else a back-off that
//!   doubles with each refusal in a row (1 s … 60 s). A pause is never longer than
//!   [`MAX_PAUSE`].
//! - A success whose headers say a limit is down to 0
//!   (`anthropic-ratelimit-*-remaining`, `x-ratelimit-remaining-*`) pauses the
//!   provider until that limit's reset, before anyone is refused.
//! - After a pause, each waiting request leaves at a random moment within the next
//!   quarter of the pause (at most 1 s), so they do not all hit the provider at once.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use http::HeaderMap;

/// The longest pause the limiter takes from an answer.
pub const MAX_PAUSE: Duration = Duration::from_secs(600);

/// The back-off when a refusal says nothing about when to come back.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// A provider's limiter.
#[derive(Debug, Default)]
pub struct Limiter {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// No request leaves before this.
    until: Option<Instant>,
    /// How long the current pause is (for the spread of the leaving requests).
    length: Duration,
    /// Refusals in a row without an answer saying when to retry.
    strikes: u32,
}

/// Whether a status is the provider asking to come back later.
pub fn is_refusal(status: http::StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 503 | 529)
}

impl Limiter {
    /// Wait until a request may leave; `Err` with the time already waited when that
    /// would be after `deadline`. The time waited otherwise.
    pub async fn admit(&self, deadline: Option<Instant>) -> Result<Duration, Duration> {
        let start = Instant::now();
        let mut slept = false;
        let waited = |slept: bool| {
            if slept {
                start.elapsed()
            } else {
                Duration::ZERO
            }
        };
        loop {
            let (until, length) = {
                let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                (s.until, s.length)
            };
            let now = Instant::now();
            let Some(until) = until.filter(|u| *u > now) else {
                return Ok(waited(slept));
            };
            if deadline.is_some_and(|d| until > d) {
                return Err(waited(slept));
            }
            let spread = (length / 4).min(Duration::from_secs(1));
            tokio::time::sleep_until((until + jitter(spread)).into()).await;
            slept = true;
        }
    }

    /// Learn from a refusal's headers; the pause it starts.
    pub fn refused(&self, headers: &HeaderMap) -> Duration {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let wait = match retry_after(headers, SystemTime::now()).or_else(|| exhausted(headers)) {
            Some(w) => {
                s.strikes = 0;
                w
            }
            None => {
                let w = FIRST_BACKOFF
                    .saturating_mul(1 << s.strikes.min(6))
                    .min(MAX_BACKOFF);
                s.strikes += 1;
                w
            }
        };
        let wait = wait.min(MAX_PAUSE);
        pause(&mut s, wait);
        wait
    }

    /// Learn from an answer that was not a refusal.
    pub fn answered(&self, headers: &HeaderMap) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.strikes = 0;
        if let Some(wait) = exhausted(headers) {
            pause(&mut s, wait.min(MAX_PAUSE));
        }
    }
}

/// Pause for `wait` from now, unless a longer pause is on.
fn pause(s: &mut State, wait: Duration) {
    let until = Instant::now() + wait;
    if s.until.is_none_or(|u| u < until) {
        s.until = Some(until);
        s.length = wait;
    }
}

/// A random duration up to `spread`.
fn jitter(spread: Duration) -> Duration {
    let mut b = [0u8; 8];
    if spread.is_zero() || getrandom::getrandom(&mut b).is_err() {
        return Duration::ZERO;
    }
    let fraction = u64::from_le_bytes(b) as f64 / u64::MAX as f64;
    spread.mul_f64(fraction)
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

/// What `retry-after-ms` or `retry-after` asks, from `now`.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = header(headers, "retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms.min(1e9) / 1000.0));
    }
    let v = header(headers, "retry-after")?;
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// The longest reset among the rate limits the headers say are down to 0.
fn exhausted(headers: &HeaderMap) -> Option<Duration> {
    const ANTHROPIC: &[&str] = &["requests", "tokens", "input-tokens", "output-tokens"];
    const OPENAI: &[&str] = &["requests", "tokens"];
    let zero = |name: &str| header(headers, name).is_some_and(|v| v == "0");
    let mut longest: Option<Duration> = None;
    let mut keep = |d: Option<Duration>| {
        if let Some(d) = d {
            longest = Some(longest.map_or(d, |l| l.max(d)));
        }
    };
    for kind in ANTHROPIC {
        if zero(&format!("anthropic-ratelimit-{kind}-remaining")) {
            let reset = header(headers, &format!("anthropic-ratelimit-{kind}-reset"));
            keep(reset.and_then(|r| until_rfc3339(r, SystemTime::now())));
        }
    }
    for kind in OPENAI {
        if zero(&format!("x-ratelimit-remaining-{kind}")) {
            keep(header(headers, &format!("x-ratelimit-reset-{kind}")).and_then(go_duration));
        }
    }
    longest
}

/// The time from `now` to an RFC 3339 instant (zero when it is past).
fn until_rfc3339(v: &str, now: SystemTime) -> Option<Duration> {
    let at = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339).ok()?;
    let at = SystemTime::from(at);
    Some(at.duration_since(now).unwrap_or_default())
}

/// A duration as OpenAI's reset headers write it: `1s`, `6m0s`, `20ms`, `1h2m3.5s`.
fn go_duration(v: &str) -> Option<Duration> {
    let mut total = 0.0f64;
    let mut rest = v;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[unit_len..];
    }
    (total.is_finite() && total < 1e9).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn retry_after_in_each_form() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let ra = |pairs: &[(&'static str, &str)]| retry_after(&headers(pairs), now);
        assert_eq!(ra(&[("retry-after", "1")]), Some(Duration::from_secs(1)));
        assert_eq!(
            ra(&[("retry-after", "0.5")]),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            ra(&[("retry-after", "7"), ("retry-after-ms", "250")]),
            Some(Duration::from_millis(250))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(ra(&[("retry-after", &date)]), Some(Duration::from_secs(30)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(ra(&[("retry-after", &past)]), Some(Duration::ZERO));
        assert_eq!(ra(&[("retry-after", "-1")]), None);
        assert_eq!(ra(&[("retry-after", "soon")]), None);
        assert_eq!(ra(&[]), None);
    }

    #[test]
    fn reset_headers_of_exhausted_limits() {
        assert_eq!(go_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(go_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(
            go_duration("1h2m3.5s"),
            Some(Duration::from_secs_f64(3723.5))
        );
        assert_eq!(go_duration(""), None);
        assert_eq!(go_duration("5x"), None);
        let h = headers(&[
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "2s"),
            ("x-ratelimit-remaining-tokens", "10"),
            ("x-ratelimit-reset-tokens", "9s"),
        ]);
        assert_eq!(exhausted(&h), Some(Duration::from_secs(2)));
        let later = crate::util::rfc3339(SystemTime::now() + Duration::from_secs(120));
        let h = headers(&[
            ("anthropic-ratelimit-tokens-remaining", "0"),
            ("anthropic-ratelimit-tokens-reset", &later),
        ]);
        let d = exhausted(&h).unwrap();
        assert!(
            d > Duration::from_secs(100) && d <= Duration::from_secs(120),
            "{d:?}"
        );
        assert_eq!(
            exhausted(&headers(&[("anthropic-ratelimit-tokens-remaining", "5")])),
            None
        );
    }

    #[tokio::test]
    async fn a_refusal_holds_every_request_until_its_retry_after() {
        let l = Limiter::default();
        assert_eq!(l.admit(None).await, Ok(Duration::ZERO));
        let wait = l.refused(&headers(&[("retry-after-ms", "300")]));
        assert_eq!(wait, Duration::from_millis(300));
        let waited = l.admit(None).await.unwrap();
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        // A deadline before the pause ends: no wait at all.
        l.refused(&headers(&[("retry-after", "60")]));
        let soon = Instant::now() + Duration::from_secs(1);
        assert!(l.admit(Some(soon)).await.is_err());
        // Without a hint, the back-off doubles.
        let l = Limiter::default();
        assert_eq!(l.refused(&HeaderMap::new()), Duration::from_secs(1));
        assert_eq!(l.refused(&HeaderMap::new()), Duration::from_secs(2));
        l.answered(&HeaderMap::new());
        assert_eq!(l.refused(&HeaderMap::new()), Duration::from_secs(1));
    }
}
