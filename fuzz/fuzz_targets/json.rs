//! Feeds arbitrary input to the JSON message builder of the tools (`nerve topic pub`,
//! `nerve service call`, `nerve action send_goal`): a first line with a schema (any
//! text: decoded as another process's would be; a built-in slice type when it does not
//! decode), then JSON. Nothing may panic; what is built must show as JSON again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nerve::message::json::{from_json, to_json};
use nerve::message::schema::Schema;

#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "fuzz/Cloud", elem = f32)]
struct Cloud {
    stamp: i64,
    frame: [u8; 16],
    width: u32,
    height: u32,
    seq: u64,
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (first, rest) = text.split_once('\n').unwrap_or(("", text));
    let schema = Schema::decode(first).unwrap_or_else(|_| Schema::of::<Cloud>());
    let Ok(value) = serde_json::from_str::<serde_json::Value>(rest) else {
        return;
    };
    if let Ok((bytes, _missing)) = from_json(&schema, &value) {
        let ty = schema.type_info();
        assert!(bytes.len() >= ty.head_size);
        let elems = match ty.elem_size {
            0 => 0,
            n => (bytes.len() - ty.elems_offset().min(bytes.len())) / n,
        };
        let _ = to_json(&schema, &bytes, elems, 64);
    }
});
