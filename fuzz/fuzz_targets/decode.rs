//! Feeds arbitrary bytes to the network plane's frame decoder, as samples of a fixed and
//! of a slice type and as requests and responses: it must never panic, and whatever it
//! accepts must be self-consistent. Each input is tried as it is and sealed (its checksum
//! written), so that mutations reach past the checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nerve::net::{decode_call, decode_sample, seal, Kind};
use nerve::TypeInfo;

#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "fuzz/Cloud", elem = f32)]
struct Cloud {
    width: u32,
    height: u32,
}

fuzz_target!(|data: &[u8]| {
    let mut sealed = data.to_vec();
    seal(&mut sealed);
    check(data);
    check(&sealed);
});

fn check(data: &[u8]) {
    let fixed = TypeInfo::of::<nerve::TransitionEvent>();
    let slice = TypeInfo::of::<Cloud>();
    for ty in [&fixed, &slice] {
        if let Ok(f) = decode_sample(data, ty, 1 << 16) {
            let len = f.header.payload_len as usize;
            assert!(len <= 1 << 16 && len >= ty.head_size);
            assert!(f.words.len() * 8 >= len);
            assert_eq!(f.header.type_hash, ty.layout_hash);
            if ty.elem_size > 0 {
                assert_eq!(ty.elems_offset() + f.elems * ty.elem_size, len);
            }
        }
        for kind in [Kind::Request, Kind::Response] {
            if let Ok(f) = decode_call(data, kind, ty, 1 << 16) {
                assert!(f.words.len() * 8 >= f.header.payload_len as usize);
            }
        }
    }
}
