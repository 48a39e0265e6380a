//! Feeds arbitrary text to the schema decoder (schemas come from other processes, files
//! and the network): it must never panic, and a schema it accepts must encode to text
//! that decodes to the same schema.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nerve::message::schema::Schema;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(s) = Schema::decode(text) {
        let again = Schema::decode(&s.encode()).expect("an accepted schema re-decodes");
        assert_eq!(again, s);
    }
});
