#![no_main]
//! Fuzz target: see `fanout::fuzzing::config_yml`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fanout::fuzzing::config_yml(data));
