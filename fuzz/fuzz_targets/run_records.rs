#![no_main]
//! Fuzz target: see `fanout::fuzzing::run_records`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fanout::fuzzing::run_records(data));
