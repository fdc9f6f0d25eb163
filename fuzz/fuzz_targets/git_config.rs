#![no_main]
//! Fuzz target: see `fanout::fuzzing::git_config`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fanout::fuzzing::git_config(data));
