#![no_main]
//! Fuzz target: see `fanout::fuzzing::journal_json`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fanout::fuzzing::journal_json(data));
