//! `fanout schema`: the JSON Schema of `fanout.yml`, for editors
//! (`# yaml-language-server: $schema=…`).

use super::common::CliError;
use crate::util::out::outln;

/// `--help`'s examples.
pub const EXAMPLES: &str = "\
Examples:
  # For editors: fanout.yml's first line points at it (`fanout init` writes that line)
  fanout schema > fanout.schema.json
  # The keys fanout.yml takes
  fanout schema | jq '.properties | keys'";

/// Entry point of `fanout schema`.
pub fn schema() -> Result<i32, CliError> {
    outln!("{}", crate::config::json_schema());
    Ok(0)
}
