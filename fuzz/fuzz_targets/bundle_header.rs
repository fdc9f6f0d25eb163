#![no_main]
//! Fuzz target: see `fanout::fuzzing::bundle_header`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fanout::fuzzing::bundle_header(data));
