//! When and how long to wait before repeating a GitHub API request.
//!
//! * 403/429 with `retry-after`: wait that long.
//! * 403/429 with `x-ratelimit-remaining: 0`: wait until `x-ratelimit-reset`.
//! * other rate-limit responses (429, or 403 saying "rate limit"): wait at least
//!   `min_rate_limit_wait`, doubling each attempt, capped at `max_wait`.
//! * 5xx: `server_error_backoff`, doubling, capped.
//! * anything else: not retried.
//!
//! Only idempotent requests are repeated after a dropped connection or a request
//! left unanswered past `request_timeout`; a `POST` that creates something is never
//! blindly re-sent (the caller checks first). No wait or request goes past the
//! deadline of the whole publish (`total`).

use std::time::Duration;

/// Retry settings; all configurable so tests run fast.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Most attempts per request, the first included.
    pub max_attempts: u32,
    /// Least wait after a rate-limit response without timing headers (GitHub: ≥ 60 s).
    pub min_rate_limit_wait: Duration,
    /// First wait after a 5xx or a dropped connection.
    pub server_error_backoff: Duration,
    /// Longest single wait.
    pub max_wait: Duration,
    /// Longest one request may go unanswered before it counts as failed.
    pub request_timeout: Duration,
    /// Longest the whole of publishing may take (its deadline starts with the client).
    pub total: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            min_rate_limit_wait: Duration::from_secs(60),
            server_error_backoff: Duration::from_secs(1),
            max_wait: Duration::from_secs(15 * 60),
            request_timeout: Duration::from_secs(30),
            total: Duration::from_secs(15 * 60),
        }
    }
}

/// The parts of a response that decide a retry.
#[derive(Debug, Clone, Default)]
pub struct ResponseInfo<'a> {
    /// HTTP status.
    pub status: u16,
    /// `retry-after` (seconds).
    pub retry_after: Option<&'a str>,
    /// `x-ratelimit-remaining`.
    pub remaining: Option<&'a str>,
    /// `x-ratelimit-reset` (epoch seconds).
    pub reset: Option<&'a str>,
    /// The response body (GitHub's error message is in it).
    pub body: &'a str,
}

impl RetryPolicy {
    fn exponential(&self, first: Duration, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(16));
        first.saturating_mul(factor).min(self.max_wait)
    }

    /// How long to wait before attempt `attempt + 1`, or `None` to stop.
    /// `attempt` counts from 1; `now` is the current Unix time in seconds.
    pub fn wait_after(&self, r: &ResponseInfo<'_>, attempt: u32, now: u64) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        match r.status {
            403 | 429 => {
                if let Some(secs) = r.retry_after.and_then(|v| v.trim().parse::<u64>().ok()) {
                    return Some(Duration::from_secs(secs).min(self.max_wait));
                }
                if r.remaining.map(str::trim) == Some("0")
                    && let Some(reset) = r.reset.and_then(|v| v.trim().parse::<u64>().ok())
                {
                    let wait = Duration::from_secs(reset.saturating_sub(now) + 1);
                    return Some(wait.min(self.max_wait));
                }
                let limited = r.status == 429 || r.body.to_ascii_lowercase().contains("rate limit");
                limited.then(|| self.exponential(self.min_rate_limit_wait, attempt))
            }
            500..=599 => Some(self.exponential(self.server_error_backoff, attempt)),
            _ => None,
        }
    }

    /// Wait after a transport failure (connection dropped, timeout) of an idempotent request.
    pub fn wait_after_transport_error(&self, attempt: u32) -> Option<Duration> {
        (attempt < self.max_attempts).then(|| self.exponential(self.server_error_backoff, attempt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            min_rate_limit_wait: Duration::from_secs(60),
            server_error_backoff: Duration::from_secs(1),
            max_wait: Duration::from_secs(300),
            ..RetryPolicy::default()
        }
    }

    fn info(status: u16) -> ResponseInfo<'static> {
        ResponseInfo {
            status,
            ..Default::default()
        }
    }

    #[test]
    fn retry_after_wins() {
        let r = ResponseInfo {
            status: 403,
            retry_after: Some("7"),
            remaining: Some("0"),
            reset: Some("2000"),
            body: "secondary rate limit",
        };
        assert_eq!(
            policy().wait_after(&r, 1, 1000),
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn primary_limit_waits_until_reset() {
        let r = ResponseInfo {
            status: 403,
            remaining: Some("0"),
            reset: Some("1030"),
            ..Default::default()
        };
        assert_eq!(
            policy().wait_after(&r, 1, 1000),
            Some(Duration::from_secs(31))
        );
        // capped
        let r = ResponseInfo {
            reset: Some("999999"),
            ..r
        };
        assert_eq!(
            policy().wait_after(&r, 1, 1000),
            Some(Duration::from_secs(300))
        );
    }

    #[test]
    fn secondary_limit_without_headers_backs_off_from_a_minute() {
        let r = ResponseInfo {
            status: 403,
            body: r#"{"message":"You have exceeded a secondary rate limit"}"#,
            ..Default::default()
        };
        let p = policy();
        assert_eq!(p.wait_after(&r, 1, 0), Some(Duration::from_secs(60)));
        assert_eq!(p.wait_after(&r, 2, 0), Some(Duration::from_secs(120)));
        assert_eq!(p.wait_after(&r, 3, 0), Some(Duration::from_secs(240)));
        assert_eq!(p.wait_after(&r, 4, 0), None, "attempts exhausted");
        assert_eq!(
            p.wait_after(&info(429), 1, 0),
            Some(Duration::from_secs(60))
        );
    }

    #[test]
    fn other_errors_are_final_and_5xx_back_off() {
        let forbidden = ResponseInfo {
            status: 403,
            body: "GitHub Actions is not permitted to create or approve pull requests.",
            ..Default::default()
        };
        assert_eq!(policy().wait_after(&forbidden, 1, 0), None);
        assert_eq!(policy().wait_after(&info(422), 1, 0), None);
        assert_eq!(policy().wait_after(&info(404), 1, 0), None);
        assert_eq!(
            policy().wait_after(&info(502), 1, 0),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            policy().wait_after(&info(500), 3, 0),
            Some(Duration::from_secs(4))
        );
        assert_eq!(
            policy().wait_after_transport_error(2),
            Some(Duration::from_secs(2))
        );
        assert_eq!(policy().wait_after_transport_error(4), None);
    }
}
