#![no_main]
//! Fuzz target: see `fanout::fuzzing::agent_stream`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fanout::fuzzing::agent_stream(data));
