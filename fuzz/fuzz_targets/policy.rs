//! Arbitrary text as a policy file: `documents_from_str` then `Engine::compile`. Errors are
//! fine; a panic is not.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use portcullis::engine::Engine;
use portcullis::policy::documents_from_str;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(documents) = documents_from_str(Path::new("fuzz.yaml"), text) {
        let _ = Engine::compile(&documents);
    }
});
