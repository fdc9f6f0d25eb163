//! The value types of `fanout.yml` that carry units or ranges: worker counts,
//! durations (`90`, `"10m"`, `"1h30m"`) and amounts of US dollars. Each checks its value
//! while the file is read, so a bad one is reported at its line and column.

use std::fmt;

use schemars::JsonSchema;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use crate::util::duration::{self, Bare, EXAMPLES};

/// Highest `workers` value accepted (locally; matrix mode has its own limits).
pub const MAX_WORKERS: u64 = 10;

/// Number of workers, 1 to [`MAX_WORKERS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct WorkerCount(pub u32);

impl<'de> Deserialize<'de> for WorkerCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = WorkerCount;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "an integer from 1 to {MAX_WORKERS}")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<WorkerCount, E> {
                if (1..=MAX_WORKERS).contains(&v) {
                    Ok(WorkerCount(v as u32))
                } else {
                    Err(E::custom(format!(
                        "expected an integer from 1 to {MAX_WORKERS}, found {v}"
                    )))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<WorkerCount, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!(
                        "expected an integer from 1 to {MAX_WORKERS}, found {v}"
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for WorkerCount {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WorkerCount".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_WORKERS,
            "description": "Number of workers, 1 to 10"
        })
    }
}

/// A duration in seconds: a number of seconds (as `parallel_runs:` always took), or a
/// duration in humantime's syntax such as `"90s"`, `"10m"`, `"1h30m"`
/// ([`crate::util::duration`], the parser the flags use too).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Seconds(pub f64);

impl Seconds {
    /// Parse `"90"`, `"90s"`, `"10m"`, `"1h30m"`: a positive duration.
    pub fn parse(s: &str) -> Result<Seconds, String> {
        let d = duration::parse(s, Bare::Seconds)?;
        if d.is_zero() {
            return Err(format!(
                "expected a positive duration like {EXAMPLES}, found \"{}\"",
                s.trim()
            ));
        }
        Ok(Seconds(d.as_secs_f64()))
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Seconds;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(
                    f,
                    "a positive number of seconds or a duration like {EXAMPLES}"
                )
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seconds, E> {
                self.visit_f64(v as f64)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
                self.visit_f64(v as f64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Seconds, E> {
                if v.is_finite() && v > duration::MAX.as_secs_f64() {
                    Err(E::custom(format!(
                        "{v} seconds is longer than fanout takes (at most 10 years)"
                    )))
                } else if v.is_finite() && v > 0.0 {
                    Ok(Seconds(v))
                } else {
                    Err(E::custom(format!(
                        "expected a positive number of seconds, found {v}"
                    )))
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Seconds, E> {
                Seconds::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Seconds {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Seconds".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Seconds, or a duration in humantime's syntax like \"90s\", \"10m\", \"1h30m\", \"2d\"",
            "oneOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": "^\\s*([0-9]+(\\.[0-9]+)?|([0-9]+\\s*[a-zA-Z]+\\s*)+)\\s*$"}
            ]
        })
    }
}

/// An amount of US dollars, zero or more.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Usd(pub f64);

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Usd;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an amount of USD, zero or more")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Usd, E> {
                self.visit_f64(v as f64)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Usd, E> {
                self.visit_f64(v as f64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Usd, E> {
                if v.is_finite() && v >= 0.0 {
                    Ok(Usd(v))
                } else {
                    Err(E::custom(format!(
                        "expected an amount of USD, zero or more, found {v}"
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Usd {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Usd".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "number", "minimum": 0, "description": "US dollars"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_past_ten_years_are_refused() {
        let e = serde_json::from_str::<Seconds>("1e20").unwrap_err();
        assert!(e.to_string().contains("at most 10 years"), "{e}");
        assert!(serde_json::from_str::<Seconds>("600").is_ok());
    }
}
