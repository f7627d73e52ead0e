//! Feeds arbitrary bytes to RESTORE's decoder (`rdb::restore`, which snapshot loading shares
//! value by value), with a footer computed here so that nearly every input gets past the
//! checksum and reaches the value decoder.
//!
//! Checks: no panic; no allocation sized by a length the input merely claims (run with
//! `-malloc_limit_mb=256`: inputs are at most a few KiB, so nothing legitimate comes near);
//! and a value that loads dumps to a payload that loads again.
//!
//! The first input byte chooses the footer: the low 4 bits the RDB version (so versions above
//! the newest we read are covered), the high bit a stored CRC of 0 ("not checksummed"); bit 6
//! lets streams come in rill's own type (0xD0), as a rill replica reads its primary's snapshot:
//! a block that loads must make a stream whose DUMP (in Redis' types) loads again.
//! The rest is the type byte and value body. `cargo +nightly fuzz run restore_payload --
//! -malloc_limit_mb=256`; CI runs the stable, seeded equivalent in
//! `crates/rill-engine/tests/restore_fuzz.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rill_engine::rdb::crc64::crc64;
use rill_engine::rdb::{dump, restore, LoadContext};

fn check(data: &[u8]) {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let mut payload = body.to_vec();
    payload.extend_from_slice(&u16::from(mode & 0x0f).to_le_bytes());
    let crc = if mode & 0x80 != 0 { 0 } else { crc64(0, &payload) };
    payload.extend_from_slice(&crc.to_le_bytes());
    let ctx = LoadContext {
        limits: Default::default(),
        idmp_duration_secs: 100,
        idmp_max_size: 100,
        now_ms: 1_700_000_000_000,
        rill_streams: mode & 0x40 != 0,
    };
    if let Ok(value) = restore(&payload, &ctx) {
        let again = dump(&value, ctx.now_ms);
        assert!(restore(&again, &ctx).is_ok(), "the DUMP of a loaded value does not load");
    }
}

fuzz_target!(|data: &[u8]| check(data));
