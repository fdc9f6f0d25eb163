#![no_main]
//! Fuzz target: see `fanout::fuzzing::agent_aider`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fanout::fuzzing::agent_aider(data));
