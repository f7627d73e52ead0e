//! Feeds arbitrary bytes to `parse_reply`: no panic, no stack overflow, never claims more
//! bytes than it was given, and a reply it accepts is accepted again after being re-written.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use rill_resp::{parse_reply, write_reply, Protocol};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((reply, used))) = parse_reply(data) {
        assert!(used <= data.len());
        let mut out = BytesMut::new();
        write_reply(&mut out, &reply, Protocol::Resp3);
        let again = parse_reply(&out).expect("re-written reply parses");
        assert!(again.is_some_and(|(_, n)| n == out.len()));
    }
});
