use crate::types::testkit::{err, ok, Harness};
use rill_resp::Reply;

fn dump_of(h: &mut Harness, key: &str) -> Vec<u8> {
    match h.run(&["DUMP", key]) {
        Reply::Bulk(b) => b.to_vec(),
        other => panic!("DUMP {key}: {other:?}"),
    }
}

#[test]
fn round_trip_and_errors_in_redis_order() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["DUMP", "missing"]), Reply::Null);
    h.run(&["RPUSH", "l", "a", "1", "b"]);
    let payload = dump_of(&mut h, "l");
    // An existing key without REPLACE wins over a bad TTL and a bad payload.
    assert_eq!(h.run_bytes(&[b"RESTORE", b"l", b"-1", b"junk"]), err("BUSYKEY Target key name already exists."));
    assert_eq!(h.run_bytes(&[b"RESTORE", b"n", b"-1", b"junk"]), err("ERR Invalid TTL value, must be >= 0"));
    assert_eq!(h.run_bytes(&[b"RESTORE", b"n", b"x", b"junk"]), err("ERR value is not an integer or out of range"));
    assert_eq!(h.run_bytes(&[b"RESTORE", b"n", b"0", b"junk"]), err("ERR DUMP payload version or checksum are wrong"));
    assert_eq!(h.run_bytes(&[b"RESTORE", b"n", b"0", &payload, b"BOGUS"]), err("ERR syntax error"));
    assert_eq!(
        h.run_bytes(&[b"RESTORE", b"n", b"0", &payload, b"IDLETIME", b"1", b"FREQ", b"2"]),
        err("ERR syntax error")
    );
    assert_eq!(
        h.run_bytes(&[b"RESTORE", b"n", b"0", &payload, b"FREQ", b"256"]),
        err("ERR Invalid FREQ value, must be >= 0 and <= 255")
    );
    assert_eq!(h.run_bytes(&[b"RESTORE", b"n", b"0", &payload]), ok());
    assert_eq!(h.run(&["LRANGE", "n", "0", "-1"]), h.run(&["LRANGE", "l", "0", "-1"]));
    assert_eq!(h.run_bytes(&[b"RESTORE", b"l", b"5000", &payload, b"REPLACE"]), ok());
    assert_eq!(h.run(&["PTTL", "l"]), Reply::Integer(5000));
}
