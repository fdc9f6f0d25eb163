#![no_main]
//! Fuzz target: see `fanout::fuzzing::results_json`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fanout::fuzzing::results_json(data));
