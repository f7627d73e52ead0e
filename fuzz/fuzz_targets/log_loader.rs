//! Feeds arbitrary bytes to the two loaders a restart runs: an effect record body
//! (`decode_record`) and a snapshot file (`FileReader`). Neither may panic, loop forever or
//! allocate without bound; a record that decodes re-encodes to the same bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rill_engine::effect::{decode_record, encode_record};
use rill_engine::rdb::file::FileReader;
use rill_engine::rdb::LoadContext;

fuzz_target!(|data: &[u8]| {
    if let Ok((time, effects)) = decode_record(data) {
        let mut again = Vec::new();
        encode_record(&mut again, time, &effects);
        assert_eq!(decode_record(&again).ok(), Some((time, effects)));
    }
    let ctx = LoadContext {
        limits: Default::default(),
        idmp_duration_secs: 100,
        idmp_max_size: 100,
        now_ms: 0,
        rill_streams: false,
    };
    if let Ok(mut reader) = FileReader::new(data, ctx, 16) {
        while let Ok(Some(_)) = reader.next_key() {}
    }
});
