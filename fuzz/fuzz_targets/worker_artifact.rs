#![no_main]
//! Fuzz target: see `fanout::fuzzing::worker_artifact`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fanout::fuzzing::worker_artifact(data));
