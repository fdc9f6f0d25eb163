//! `fanout schema`: the JSON Schema of `fanout.yml`, for editors
//! (`# yaml-language-server: $schema=…`).

use super::common::CliError;
use crate::util::out::outln;

/// Entry point of `fanout schema`.
pub fn schema() -> Result<i32, CliError> {
    outln!("{}", crate::config::json_schema());
    Ok(0)
}
