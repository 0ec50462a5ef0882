#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| packfs_fuzz::track_page(data));
