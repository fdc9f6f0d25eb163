#![no_main]
//! Fuzz target: see `fanout::fuzzing::plan_json`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fanout::fuzzing::plan_json(data));
