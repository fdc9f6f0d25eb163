//! List items that are text or an object — a task (`- fix it` or `{id, prompt}`), a
//! check, a setup command — read without serde's untagged enums, whose only error is
//! "data did not match any variant". Each says what it expected, and a plain scalar
//! that YAML would type (`- yes`, `- 1`, `- on`, `- 1.10`) is taken as the text
//! written: prompts, ids and commands are text. The object form is read field by
//! field with its own types, so `{id: on, prompt: 1}` holds the strings `on` and `1`.
//!
//! A typed scalar reaches a visitor as a bool or a number; the config module puts
//! back the text the file holds at that item's place once the whole file has been read
//! (`config::restore_text`).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, MapAccess, Visitor};

/// A value that is either text or an object.
pub(super) trait TextOrMap: Sized {
    /// What the file should hold here, for errors (`a shell command, or {run, …}`).
    const EXPECTING: &'static str;
    /// From text.
    fn text(text: String) -> Result<Self, String>;
    /// From an object.
    fn map<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

/// Deserialize a [`TextOrMap`].
pub(super) fn deserialize<'de, D: Deserializer<'de>, T: TextOrMap>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(V(PhantomData))
}

struct V<T>(PhantomData<T>);

impl<'de, T: TextOrMap> Visitor<'de> for V<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        T::text(v.to_owned()).map_err(E::custom)
    }
    // Typed scalars: their written text is put back by `restore`.
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Err(E::custom(format!(
            "expected {}, found nothing",
            T::EXPECTING
        )))
    }
    fn visit_none<E: de::Error>(self) -> Result<T, E> {
        self.visit_unit()
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::map(map)
    }
}
