//! The bitmap family's edge cases; every expected reply was checked against Redis 8.2.3.
#![allow(clippy::indexing_slicing)]

use crate::types::testkit::*;
use rill_resp::Reply;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

fn nil() -> Reply {
    Reply::Null
}

fn ints(v: &[i64]) -> Reply {
    Reply::Array(v.iter().map(|n| int(*n)).collect())
}

fn raw(b: &[u8]) -> Reply {
    Reply::bulk(b)
}

/// A harness with `key` holding `value`.
fn with(key: &str, value: &[u8]) -> Harness {
    let mut h = Harness::new();
    assert_eq!(h.run_bytes(&[b"SET", key.as_bytes(), value]), ok());
    h
}

/// The keyspace's change counter after running `args`, minus before.
fn changes(h: &mut Harness, args: &[&str]) -> u64 {
    let before = h.engine.dirty();
    h.run(args);
    h.engine.dirty() - before
}

#[test]
fn setbit_and_getbit_at_byte_and_bit_boundaries() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["SETBIT", "k", "7", "1"]), int(0));
    assert_eq!(h.run(&["GET", "k"]), raw(b"\x01"));
    assert_eq!(h.run(&["SETBIT", "k", "8", "1"]), int(0));
    assert_eq!(h.run(&["GET", "k"]), raw(b"\x01\x80"));
    assert_eq!(h.run(&["SETBIT", "k", "0", "1"]), int(0));
    assert_eq!(h.run(&["SETBIT", "k", "0", "0"]), int(1));
    assert_eq!(h.run(&["SETBIT", "k", "23", "0"]), int(0));
    assert_eq!(h.run(&["GET", "k"]), raw(b"\x01\x80\x00"));
    for (offset, bit) in [("0", 0), ("7", 1), ("8", 1), ("9", 0), ("23", 0), ("24", 0), ("4294967295", 0)] {
        assert_eq!(h.run(&["GETBIT", "k", offset]), int(bit), "GETBIT {offset}");
    }
    assert_eq!(h.run(&["GETBIT", "missing", "100"]), int(0));
    for bad in ["4294967296", "-1", "#1", "1.0", "x", "9223372036854775808"] {
        assert_eq!(h.run(&["SETBIT", "k", bad, "1"]), err(BAD_OFFSET), "SETBIT {bad}");
        assert_eq!(h.run(&["GETBIT", "k", bad]), err(BAD_OFFSET), "GETBIT {bad}");
    }
    for bad in ["2", "-1", "x", "01", ""] {
        assert_eq!(h.run(&["SETBIT", "k", "0", bad]), err("ERR bit is not an integer or out of range"));
    }
    // The offset is checked first, then the bit, then the key's type.
    h.run(&["RPUSH", "l", "a"]);
    assert_eq!(h.run(&["SETBIT", "l", "x", "2"]), err(BAD_OFFSET));
    assert_eq!(h.run(&["SETBIT", "l", "0", "2"]), err("ERR bit is not an integer or out of range"));
    assert_eq!(h.run(&["SETBIT", "l", "0", "1"]), err(WRONGTYPE));
    assert_eq!(h.run(&["GETBIT", "l", "-1"]), err(BAD_OFFSET));
    assert_eq!(h.run(&["GETBIT", "l", "0"]), err(WRONGTYPE));
    assert_eq!(h.run(&["STRLEN", "k"]), int(3));
}

#[test]
fn setbit_reports_only_real_changes_and_turns_the_string_raw() {
    let mut h = Harness::new();
    assert_eq!(changes(&mut h, &["SETBIT", "s", "3", "1"]), 1);
    assert_eq!(events(&h), ["new:s", "setbit:s"]);
    assert_eq!(changes(&mut h, &["SETBIT", "s", "3", "1"]), 0);
    assert!(events(&h).is_empty());
    assert_eq!(changes(&mut h, &["SETBIT", "s", "3", "0"]), 1);
    assert_eq!(events(&h), ["setbit:s"]);
    // Growing the string is a change even when the bit written is 0.
    assert_eq!(changes(&mut h, &["SETBIT", "s", "100", "0"]), 1);
    assert_eq!(events(&h), ["setbit:s"]);
    assert_eq!(h.run(&["STRLEN", "s"]), int(13));
    assert_eq!(changes(&mut h, &["SETBIT", "z", "0", "0"]), 1);
    assert_eq!(events(&h), ["new:z", "setbit:z"]);
    h.run(&["SET", "i", "12345"]);
    assert_eq!(h.run(&["OBJECT", "ENCODING", "i"]), bulk("int"));
    assert_eq!(h.run(&["SETBIT", "i", "0", "0"]), int(0));
    assert_eq!(h.run(&["OBJECT", "ENCODING", "i"]), bulk("raw"));
    assert_eq!(h.run(&["GET", "i"]), bulk("12345"));
    // A TTL survives SETBIT.
    h.run(&["SET", "t", "a", "EX", "100"]);
    h.run(&["SETBIT", "t", "100", "1"]);
    assert_eq!(h.run(&["TTL", "t"]), int(100));
}

#[test]
fn bitcount_ranges_in_bytes_and_bits() {
    // 0xff 0xf0 0x00 0x0f: 16 bits set.
    let mut h = with("k", b"\xff\xf0\x00\x0f");
    let cases: &[(&[&str], i64)] = &[
        (&[], 16),
        (&["0", "-1"], 16),
        (&["0", "0"], 8),
        (&["1", "1"], 4),
        (&["-1", "-1"], 4),
        (&["-2", "-1"], 4),
        (&["2", "1"], 0),
        (&["4", "10"], 0),
        (&["-100", "100"], 16),
        // Both ends negative and reversed: empty, not clamped to the first byte.
        (&["-100", "-200"], 0),
        (&["-200", "-100"], 8),
        (&["0", "-1", "BIT"], 16),
        (&["0", "0", "bit"], 1),
        (&["7", "8", "BIT"], 2),
        (&["5", "11", "bit"], 7),
        (&["12", "27", "bit"], 0),
        (&["12", "28", "bit"], 1),
        (&["-4", "-1", "BIT"], 4),
        (&["-5", "-3", "BIT"], 2),
        (&["8", "15", "BIT"], 4),
        (&["31", "31", "BIT"], 1),
        (&["32", "40", "BIT"], 0),
        (&["0", "1", "byte"], 12),
    ];
    for (range, want) in cases {
        let args = [&["BITCOUNT", "k"][..], range].concat();
        assert_eq!(h.run(&args), int(*want), "{args:?}");
    }
    assert_eq!(h.run(&["BITCOUNT", "missing"]), int(0));
    assert_eq!(h.run(&["BITCOUNT", "missing", "0", "-1", "BIT"]), int(0));
    h.run(&["SET", "e", ""]);
    assert_eq!(h.run(&["BITCOUNT", "e"]), int(0));
    assert_eq!(h.run(&["BITCOUNT", "e", "0", "-1", "BIT"]), int(0));
    // Every argument is parsed before the key is looked up (Redis 7.2+).
    for bad in [&["0"][..], &["0", "1", "2", "3"], &["0", "1", "bits"]] {
        let args = [&["BITCOUNT", "missing"][..], bad].concat();
        assert_eq!(h.run(&args), err("ERR syntax error"), "{args:?}");
    }
    assert_eq!(h.run(&["BITCOUNT", "missing", "x", "1"]), err(NOT_INTEGER));
    h.run(&["RPUSH", "l", "a"]);
    assert_eq!(h.run(&["BITCOUNT", "l", "0", "x"]), err(NOT_INTEGER));
    assert_eq!(h.run(&["BITCOUNT", "l"]), err(WRONGTYPE));
}

#[test]
fn bitcount_of_a_long_string_counts_whole_words() {
    let value: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let ones: u32 = value.iter().map(|b| b.count_ones()).sum();
    let mut h = with("k", &value);
    assert_eq!(h.run(&["BITCOUNT", "k"]), int(ones.into()));
    let middle: u32 = value.get(3..998).unwrap_or_default().iter().map(|b| b.count_ones()).sum();
    assert_eq!(h.run(&["BITCOUNT", "k", "3", "997"]), int(middle.into()));
    // Bits 27..=7980: byte 3 from its bit 3, byte 997 up to its bit 4.
    let edges = (value[3] & 0x1F).count_ones() + (value[997] & 0xF8).count_ones();
    let inner: u32 = value.get(4..997).unwrap_or_default().iter().map(|b| b.count_ones()).sum();
    assert_eq!(h.run(&["BITCOUNT", "k", "27", "7980", "BIT"]), int((edges + inner).into()));
}

#[test]
fn bitpos_finds_set_and_clear_bits() {
    let mut h = with("ones", b"\xff\xff\xff");
    // No clear bit in an all-ones string: without an end, the first bit after it.
    assert_eq!(h.run(&["BITPOS", "ones", "0"]), int(24));
    assert_eq!(h.run(&["BITPOS", "ones", "0", "1"]), int(24));
    assert_eq!(h.run(&["BITPOS", "ones", "0", "-1"]), int(24));
    assert_eq!(h.run(&["BITPOS", "ones", "0", "7", "BIT"]), err(NOT_INTEGER));
    // With an end: none in the range.
    assert_eq!(h.run(&["BITPOS", "ones", "0", "0", "-1"]), int(-1));
    assert_eq!(h.run(&["BITPOS", "ones", "0", "0", "-1", "BIT"]), int(-1));
    assert_eq!(h.run(&["BITPOS", "ones", "0", "3", "20", "BIT"]), int(-1));
    assert_eq!(h.run(&["BITPOS", "ones", "1"]), int(0));
    assert_eq!(h.run(&["BITPOS", "ones", "1", "1"]), int(8));
    assert_eq!(h.run(&["BITPOS", "ones", "1", "5", "-1", "BIT"]), int(5));
    // A start past the end is an empty range.
    assert_eq!(h.run(&["BITPOS", "ones", "0", "5"]), int(-1));
    assert_eq!(h.run(&["BITPOS", "ones", "1", "3"]), int(-1));

    h.run_bytes(&[b"SET", b"k", b"\x00\xff\xf0\x00"]);
    let cases: &[(&[&str], i64)] = &[
        (&["1"], 8),
        (&["0"], 0),
        (&["1", "2"], 16),
        (&["0", "1"], 20),
        (&["0", "1", "1"], -1),
        (&["0", "1", "2"], 20),
        (&["1", "3"], -1),
        (&["0", "3"], 24),
        (&["1", "-1"], -1),
        (&["0", "-1"], 24),
        (&["1", "-2"], 16),
        // Both negative and reversed: clamped to the first byte, unlike BITCOUNT.
        (&["0", "-100", "-200"], 0),
        (&["1", "-100", "-200"], -1),
        (&["1", "0", "-1", "BIT"], 8),
        (&["1", "9", "-1", "bit"], 9),
        (&["0", "8", "19", "BIT"], -1),
        (&["0", "8", "20", "BIT"], 20),
        (&["1", "20", "-1", "BIT"], -1),
        (&["1", "0", "7", "BIT"], -1),
        (&["0", "12", "15", "BIT"], -1),
        (&["1", "-12", "-1", "BIT"], -1),
        (&["1", "-13", "-1", "BIT"], 19),
        (&["0", "0", "0", "BYTE"], 0),
        (&["0", "1", "1", "byte"], -1),
        (&["1", "2", "1"], -1),
    ];
    for (rest, want) in cases {
        let args = [&["BITPOS", "k"][..], rest].concat();
        assert_eq!(h.run(&args), int(*want), "{args:?}");
    }
    // A missing key is all zeros; an empty string holds no bit at all.
    assert_eq!(h.run(&["BITPOS", "missing", "1"]), int(-1));
    assert_eq!(h.run(&["BITPOS", "missing", "0"]), int(0));
    assert_eq!(h.run(&["BITPOS", "missing", "0", "5", "10", "BIT"]), int(0));
    h.run(&["SET", "e", ""]);
    assert_eq!(h.run(&["BITPOS", "e", "0"]), int(-1));
    assert_eq!(h.run(&["BITPOS", "e", "1"]), int(-1));
    // Errors, all before the lookup.
    assert_eq!(h.run(&["BITPOS", "missing", "2"]), err("ERR The bit argument must be 1 or 0."));
    assert_eq!(h.run(&["BITPOS", "missing", "x"]), err(NOT_INTEGER));
    assert_eq!(h.run(&["BITPOS", "missing", "1", "x"]), err(NOT_INTEGER));
    assert_eq!(h.run(&["BITPOS", "missing", "1", "0", "x"]), err(NOT_INTEGER));
    assert_eq!(h.run(&["BITPOS", "missing", "1", "0", "1", "bits"]), err("ERR syntax error"));
    assert_eq!(h.run(&["BITPOS", "missing", "1", "0", "1", "bit", "x"]), err("ERR syntax error"));
    h.run(&["RPUSH", "l", "a"]);
    assert_eq!(h.run(&["BITPOS", "l", "2"]), err("ERR The bit argument must be 1 or 0."));
    assert_eq!(h.run(&["BITPOS", "l", "1"]), err(WRONGTYPE));
}

#[test]
fn bitpos_in_a_long_string() {
    let mut value = vec![0u8; 5000];
    if let Some(b) = value.get_mut(4321) {
        *b = 0x04;
    }
    let mut h = with("k", &value);
    assert_eq!(h.run(&["BITPOS", "k", "1"]), int(4321 * 8 + 5));
    assert_eq!(h.run(&["BITPOS", "k", "1", "4322"]), int(-1));
    assert_eq!(h.run(&["BITPOS", "k", "1", "34574", "-1", "BIT"]), int(-1));
    assert_eq!(h.run(&["BITPOS", "k", "1", "34573", "-1", "BIT"]), int(34573));
    assert_eq!(h.run(&["BITPOS", "k", "0", "34573", "-1", "BIT"]), int(34574));
}

#[test]
fn bitop_operations() {
    let mut h = Harness::new();
    h.run_bytes(&[b"SET", b"a", b"\xf0\x0f\xff"]);
    h.run_bytes(&[b"SET", b"b", b"\xcc\xcc"]);
    h.run_bytes(&[b"SET", b"c", b"\xaa"]);
    let cases: &[(&str, &[&str], &[u8])] = &[
        ("AND", &["a", "b"], b"\xc0\x0c\x00"),
        ("OR", &["a", "b"], b"\xfc\xcf\xff"),
        ("XOR", &["a", "b"], b"\x3c\xc3\xff"),
        ("NOT", &["a"], b"\x0f\xf0\x00"),
        ("AND", &["a", "missing"], b"\x00\x00\x00"),
        ("OR", &["c", "missing"], b"\xaa"),
        // a AND NOT (b OR c)
        ("DIFF", &["a", "b", "c"], b"\x10\x03\xff"),
        // NOT a AND (b OR c)
        ("DIFF1", &["a", "b", "c"], b"\x0e\xc0\x00"),
        // a AND (b OR c)
        ("ANDOR", &["a", "b", "c"], b"\xe0\x0c\x00"),
        // Set in exactly one of them.
        ("ONE", &["a", "b", "c"], b"\x16\xc3\xff"),
        ("ONE", &["a"], b"\xf0\x0f\xff"),
        ("ONE", &["a", "a"], b"\x00\x00\x00"),
        ("DIFF", &["missing", "a"], b"\x00\x00\x00"),
        ("diff1", &["missing", "b"], b"\xcc\xcc"),
        ("AndOr", &["c", "missing"], b"\x00"),
    ];
    for (op, sources, want) in cases {
        let args = [&["BITOP", op, "dest"][..], sources].concat();
        assert_eq!(h.run(&args), int(want.len() as i64), "{args:?}");
        assert_eq!(h.run(&["GET", "dest"]), raw(want), "{args:?}");
    }
    assert_eq!(h.run(&["OBJECT", "ENCODING", "dest"]), bulk("raw"));
    // The destination may be a source.
    assert_eq!(h.run(&["BITOP", "NOT", "c", "c"]), int(1));
    assert_eq!(h.run(&["GET", "c"]), raw(b"\x55"));
}

#[test]
fn bitop_stores_or_deletes_the_destination() {
    let mut h = Harness::new();
    h.run(&["SET", "s", "abc"]);
    assert_eq!(h.run(&["BITOP", "OR", "d", "s"]), int(3));
    assert_eq!(events(&h), ["new:d", "set:d"]);
    assert_eq!(h.run(&["BITOP", "OR", "d", "s"]), int(3));
    assert_eq!(events(&h), ["overwritten:d", "set:d"]);
    // Only missing (or empty) sources: the destination is deleted.
    assert_eq!(h.run(&["BITOP", "OR", "d", "nokey"]), int(0));
    assert_eq!(events(&h), ["del:d"]);
    assert_eq!(h.run(&["EXISTS", "d"]), int(0));
    assert_eq!(changes(&mut h, &["BITOP", "OR", "d", "nokey"]), 0);
    h.run(&["SET", "e", ""]);
    assert_eq!(h.run(&["BITOP", "AND", "e", "e"]), int(0));
    assert_eq!(h.run(&["EXISTS", "e"]), int(0));
    // Any type is overwritten, and the TTL dropped.
    h.run(&["RPUSH", "l", "a"]);
    assert_eq!(h.run(&["BITOP", "NOT", "l", "s"]), int(3));
    assert_eq!(events(&h), ["overwritten:l", "type_changed:l", "set:l"]);
    assert_eq!(h.run(&["TYPE", "l"]), Reply::Simple("string".into()));
    h.run(&["SET", "t", "v", "EX", "100"]);
    h.run(&["BITOP", "NOT", "t", "s"]);
    assert_eq!(h.run(&["TTL", "t"]), int(-1));
}

#[test]
fn bitop_errors() {
    let mut h = Harness::new();
    h.run(&["SET", "a", "foo"]);
    h.run(&["RPUSH", "l", "x"]);
    assert_eq!(h.run(&["BITOP", "foo", "d", "a"]), err("ERR syntax error"));
    assert_eq!(h.run(&["BITOP", "NOT", "d", "a", "a"]), err("ERR BITOP NOT must be called with a single source key."));
    for op in ["DIFF", "DIFF1", "ANDOR"] {
        assert_eq!(
            h.run(&["BITOP", &op.to_ascii_lowercase(), "d", "a"]),
            err(&format!("ERR BITOP {op} must be called with at least two source keys."))
        );
    }
    assert_eq!(h.run(&["BITOP", "AND", "d"]), err("ERR wrong number of arguments for 'bitop' command"));
    assert_eq!(h.run(&["BITOP", "AND", "d", "a", "l"]), err(WRONGTYPE));
    assert_eq!(h.run(&["BITOP", "DIFF", "d", "missing", "l"]), err(WRONGTYPE));
    assert_eq!(h.run(&["EXISTS", "d"]), int(0));
}

#[test]
fn bitfield_get_set_incrby_and_hash_offsets() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["BITFIELD", "k", "SET", "u8", "0", "255", "GET", "u8", "0"]), ints(&[0, 255]));
    assert_eq!(h.run(&["BITFIELD", "k", "GET", "i8", "0", "GET", "u4", "4", "GET", "i1", "7"]), ints(&[-1, 15, -1]));
    // `#n` counts fields of the type's width.
    assert_eq!(h.run(&["BITFIELD", "k", "SET", "u8", "#1", "66", "GET", "u8", "8"]), ints(&[0, 66]));
    assert_eq!(h.run(&["GET", "k"]), raw(b"\xffB"));
    // A field across a byte boundary.
    assert_eq!(h.run(&["BITFIELD", "k", "SET", "u4", "6", "5", "GET", "u16", "0"]), ints(&[13, 0xfd42]));
    assert_eq!(h.run(&["BITFIELD", "k", "INCRBY", "i5", "100", "1", "GET", "u4", "100"]), ints(&[1, 0]));
    assert_eq!(h.run(&["STRLEN", "k"]), int(14));
    // GETs past the end, and on a missing key, read zeros.
    assert_eq!(h.run(&["BITFIELD", "missing", "GET", "u8", "0", "GET", "i64", "1000"]), ints(&[0, 0]));
    assert_eq!(h.run(&["BITFIELD_RO", "k", "GET", "u8", "#0", "GET", "i8", "4294967295"]), ints(&[0xfd, 0]));
    assert_eq!(h.run(&["BITFIELD", "k"]), ints(&[]));
    assert_eq!(h.run(&["BITFIELD", "k", "OVERFLOW", "SAT"]), ints(&[]));
    assert_eq!(h.run(&["BITFIELD_RO", "k", "overflow", "fail"]), ints(&[]));
    assert_eq!(h.run(&["EXISTS", "missing"]), int(0));
}

#[test]
fn bitfield_overflow_modes() {
    let mut h = Harness::new();
    let run = |h: &mut Harness, args: &[&str]| h.run(&[&["BITFIELD", "k"][..], args].concat());
    // WRAP is the default.
    assert_eq!(run(&mut h, &["SET", "u8", "0", "255", "INCRBY", "u8", "0", "10"]), ints(&[0, 9]));
    assert_eq!(run(&mut h, &["INCRBY", "u8", "0", "-10"]), ints(&[255]));
    assert_eq!(
        run(&mut h, &["OVERFLOW", "SAT", "INCRBY", "u8", "0", "10", "INCRBY", "u8", "0", "-300"]),
        ints(&[255, 0])
    );
    assert_eq!(
        run(
            &mut h,
            &["OVERFLOW", "FAIL", "INCRBY", "u8", "0", "-1", "INCRBY", "u8", "0", "256", "INCRBY", "u8", "0", "3"]
        ),
        Reply::Array(vec![nil(), nil(), int(3)])
    );
    // OVERFLOW holds until the next one.
    assert_eq!(
        run(
            &mut h,
            &[
                "OVERFLOW", "FAIL", "SET", "i8", "8", "128", "OVERFLOW", "WRAP", "SET", "i8", "8", "128", "GET", "i8",
                "8"
            ]
        ),
        Reply::Array(vec![nil(), int(0), int(-128)])
    );
    assert_eq!(
        run(&mut h, &["OVERFLOW", "SAT", "INCRBY", "i8", "8", "-1", "INCRBY", "i8", "8", "1000"]),
        ints(&[-128, 127])
    );
    assert_eq!(run(&mut h, &["INCRBY", "i8", "8", "1"]), ints(&[-128]));
    // A negative SET on an unsigned field is a huge unsigned number: it overflows.
    assert_eq!(run(&mut h, &["OVERFLOW", "SAT", "SET", "u8", "0", "-1", "GET", "u8", "0"]), ints(&[3, 255]));
    assert_eq!(run(&mut h, &["SET", "u8", "0", "-2", "GET", "u8", "0"]), ints(&[255, 254]));
    assert_eq!(run(&mut h, &["OVERFLOW", "FAIL", "SET", "u8", "0", "-1"]), Reply::Array(vec![nil()]));
    assert_eq!(run(&mut h, &["SET", "u2", "0", "7", "GET", "u8", "0"]), ints(&[3, 0xfe]));
    assert_eq!(run(&mut h, &["SET", "i2", "0", "-3", "GET", "i2", "0"]), ints(&[-1, 1]));
    assert_eq!(run(&mut h, &["SET", "u1", "0", "1", "INCRBY", "u1", "0", "1"]), ints(&[0, 0]));
    assert_eq!(run(&mut h, &["OVERFLOW", "sat", "SET", "i1", "0", "1", "GET", "i1", "0"]), ints(&[0, 0]));
    assert_eq!(run(&mut h, &["OVERFLOW", "sat", "SET", "i1", "0", "-5", "GET", "u1", "0"]), ints(&[0, 1]));
}

/// Redis tests "too large" with `max - value` in wrapping 64-bit arithmetic, so a signed SET far
/// enough below the minimum saturates to the maximum.
#[test]
fn bitfield_sat_of_a_hugely_negative_signed_set_is_the_maximum() {
    let mut h = Harness::new();
    let run = |h: &mut Harness, args: &[&str]| h.run(&[&["BITFIELD", "k", "OVERFLOW", "SAT"][..], args].concat());
    // 127 - v wraps for v below -2^63 + 128.
    assert_eq!(run(&mut h, &["SET", "i8", "0", "-9223372036854775808", "GET", "i8", "0"]), ints(&[0, 127]));
    assert_eq!(run(&mut h, &["SET", "i8", "0", "-9223372036854775681", "GET", "i8", "0"]), ints(&[127, 127]));
    assert_eq!(run(&mut h, &["SET", "i8", "0", "-9223372036854775680", "GET", "i8", "0"]), ints(&[127, -128]));
    assert_eq!(run(&mut h, &["SET", "i1", "8", "-9223372036854775808", "GET", "i1", "8"]), ints(&[0, 0]));
    // INCRBY and 64-bit fields are exact.
    assert_eq!(run(&mut h, &["INCRBY", "i8", "0", "-9223372036854775808"]), ints(&[-128]));
    assert_eq!(run(&mut h, &["SET", "i64", "16", "-9223372036854775808", "GET", "i64", "16"]), ints(&[0, i64::MIN]));
    assert_eq!(
        run(&mut h, &["SET", "i64", "16", "-1", "INCRBY", "i64", "16", "-9223372036854775808"]),
        ints(&[i64::MIN, i64::MIN])
    );
    // WRAP and FAIL are not affected.
    let wrap = &["BITFIELD", "k", "SET", "i8", "0", "-9223372036854775807", "GET", "i8", "0"];
    assert_eq!(h.run(wrap), ints(&[-128, 1]));
    let fail = &["BITFIELD", "k", "OVERFLOW", "FAIL", "SET", "i8", "0", "-9223372036854775808"];
    assert_eq!(h.run(fail), Reply::Array(vec![nil()]));
}

#[test]
fn bitfield_i64_and_u63_limits() {
    let mut h = Harness::new();
    let run = |h: &mut Harness, args: &[&str]| h.run(&[&["BITFIELD", "k"][..], args].concat());
    let (max, min) = (i64::MAX, i64::MIN);
    assert_eq!(run(&mut h, &["SET", "i64", "0", "9223372036854775807", "GET", "i64", "0"]), ints(&[0, max]));
    assert_eq!(run(&mut h, &["INCRBY", "i64", "0", "1"]), ints(&[min]));
    assert_eq!(run(&mut h, &["OVERFLOW", "SAT", "INCRBY", "i64", "0", "-1"]), ints(&[min]));
    assert_eq!(run(&mut h, &["OVERFLOW", "FAIL", "INCRBY", "i64", "0", "-1"]), Reply::Array(vec![nil()]));
    assert_eq!(run(&mut h, &["INCRBY", "i64", "0", "-9223372036854775808"]), ints(&[0]));
    assert_eq!(
        run(&mut h, &["INCRBY", "i64", "0", "-9223372036854775808", "INCRBY", "i64", "0", "-1"]),
        ints(&[min, max])
    );
    assert_eq!(
        run(&mut h, &["OVERFLOW", "SAT", "INCRBY", "i64", "0", "9223372036854775807", "INCRBY", "i64", "0", "1"]),
        ints(&[max, max])
    );
    assert_eq!(run(&mut h, &["GET", "u63", "0", "GET", "u63", "1", "GET", "i63", "1"]), ints(&[max >> 1, max, -1]));
    assert_eq!(run(&mut h, &["SET", "u63", "0", "0", "INCRBY", "u63", "0", "-1"]), ints(&[max >> 1, max]));
    assert_eq!(
        run(&mut h, &["OVERFLOW", "SAT", "INCRBY", "u63", "0", "1", "INCRBY", "u63", "0", "-9223372036854775808"]),
        ints(&[max, 0])
    );
    assert_eq!(
        run(&mut h, &["OVERFLOW", "SAT", "SET", "u63", "0", "-9223372036854775808", "GET", "u63", "0"]),
        ints(&[0, max])
    );
    assert_eq!(
        run(&mut h, &["OVERFLOW", "WRAP", "SET", "u63", "0", "-9223372036854775808", "GET", "u63", "0"]),
        ints(&[max, 0])
    );
    // The last field a key can hold: its first bit is the last offset SETBIT accepts.
    assert_eq!(h.run(&["BITFIELD", "k", "GET", "i64", "4294967295", "GET", "u8", "#536870911"]), ints(&[0, 0]));
}

#[test]
fn bitfield_offset_and_type_errors() {
    let mut h = Harness::new();
    for ty in ["u64", "i65", "u0", "i0", "U8", "I8", "u08", "u+8", "u", "x8", "u-1", "i 8"] {
        assert_eq!(h.run(&["BITFIELD", "k", "GET", ty, "0"]), err(BAD_TYPE), "{ty}");
    }
    for offset in ["-1", "x", "#x", "#-1", "##1", "#", "#+1", "#01", "4294967296", "#536870912"] {
        assert_eq!(h.run(&["BITFIELD", "k", "GET", "u8", offset]), err(BAD_OFFSET), "{offset}");
    }
    // `#k` multiplies with 64-bit wrap-around, as Redis does.
    assert_eq!(h.run(&["BITFIELD", "k", "GET", "i64", "#1152921504606846975"]), err(BAD_OFFSET));
    assert_eq!(h.run(&["BITFIELD", "k", "GET", "i64", "#1152921504606846976"]), ints(&[0]));
    assert_eq!(h.run(&["BITFIELD", "k", "GET", "i64", "#67108863"]), ints(&[0]));
    assert_eq!(h.run(&["BITFIELD", "k", "GET", "i64", "#67108864"]), err(BAD_OFFSET));
    for bad in [
        &["GET"][..],
        &["GET", "u8"],
        &["SET", "u8", "0"],
        &["INCRBY", "u8", "0"],
        &["OVERFLOW"],
        &["FOO"],
        &["GET", "u8", "0", "x"],
    ] {
        let args = [&["BITFIELD", "k"][..], bad].concat();
        assert_eq!(h.run(&args), err("ERR syntax error"), "{args:?}");
    }
    assert_eq!(
        h.run(&["BITFIELD", "k", "OVERFLOW", "foo", "GET", "u8", "0"]),
        err("ERR Invalid OVERFLOW type specified")
    );
    assert_eq!(h.run(&["BITFIELD", "k", "SET", "u8", "0", "x"]), err(NOT_INTEGER));
    assert_eq!(h.run(&["BITFIELD", "k", "SET", "x8", "x", "x"]), err(BAD_TYPE));
    assert_eq!(h.run(&["BITFIELD", "k", "SET", "u8", "x", "x"]), err(BAD_OFFSET));
    // An error anywhere leaves the key alone, even after good writes.
    assert_eq!(h.run(&["BITFIELD", "k", "SET", "u8", "0", "1", "GET", "u64", "0"]), err(BAD_TYPE));
    assert_eq!(h.run(&["EXISTS", "k"]), int(0));
    // BITFIELD_RO: the whole command parses first, then a write is refused.
    let ro_only = err("ERR BITFIELD_RO only supports the GET subcommand");
    assert_eq!(h.run(&["BITFIELD_RO", "k", "GET", "u8", "0", "SET", "u8", "0", "1"]), ro_only);
    assert_eq!(h.run(&["BITFIELD_RO", "k", "INCRBY", "u8", "0", "1"]), ro_only);
    assert_eq!(h.run(&["BITFIELD_RO", "k", "SET", "u8", "0", "x"]), err(NOT_INTEGER));
    assert_eq!(h.run(&["BITFIELD_RO", "k", "SET", "x8", "0", "1"]), err(BAD_TYPE));
    assert_eq!(
        h.run(&["BITFIELD_RO", "k", "OVERFLOW", "foo", "GET", "u8", "0"]),
        err("ERR Invalid OVERFLOW type specified")
    );
    assert_eq!(h.run(&["BITFIELD_RO", "k", "FOO"]), err("ERR syntax error"));
    h.run(&["RPUSH", "l", "a"]);
    for args in [
        &["BITFIELD", "l"][..],
        &["BITFIELD", "l", "GET", "u8", "0"],
        &["BITFIELD", "l", "SET", "u8", "0", "1"],
        &["BITFIELD_RO", "l"],
    ] {
        assert_eq!(h.run(args), err(WRONGTYPE), "{args:?}");
    }
    assert_eq!(h.run(&["BITFIELD", "l", "GET", "u64", "0"]), err(BAD_TYPE));
}

#[test]
fn bitfield_creates_and_grows_even_when_no_write_happens() {
    let mut h = Harness::new();
    assert_eq!(changes(&mut h, &["BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u2", "100", "10"]), 1);
    assert_eq!(events(&h), ["new:k"]);
    assert_eq!(h.run(&["STRLEN", "k"]), int(13));
    assert_eq!(changes(&mut h, &["BITFIELD", "k", "SET", "u8", "0", "0", "INCRBY", "u8", "0", "0"]), 0);
    assert!(events(&h).is_empty());
    assert_eq!(changes(&mut h, &["BITFIELD", "k", "SET", "u8", "0", "1", "SET", "u8", "8", "2"]), 2);
    assert_eq!(events(&h), ["setbit:k"]);
    assert_eq!(h.run(&["OBJECT", "ENCODING", "k"]), bulk("raw"));
    assert_eq!(changes(&mut h, &["BITFIELD", "k", "GET", "u8", "0"]), 0);
    assert_eq!(changes(&mut h, &["BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u2", "200", "10"]), 1);
    assert!(events(&h).is_empty());
    assert_eq!(h.run(&["STRLEN", "k"]), int(26));
}

/// Redis' `dirty` arithmetic (its `SETBIT/BITFIELD only increase dirty when the value
/// changed` test): a write counts when it changed its field or the string was created or grown.
#[test]
fn bitfield_counts_changes_per_write() {
    let mut h = Harness::new();
    assert_eq!(changes(&mut h, &["BITFIELD", "x", "SET", "u8", "0", "1", "SET", "u8", "8", "1"]), 2);
    assert_eq!(events(&h), ["new:x", "setbit:x"]);
    // Growing makes every write count, changed or not.
    assert_eq!(
        changes(&mut h, &["BITFIELD", "x", "SET", "u8", "0", "1", "SET", "u8", "8", "1", "SET", "u8", "16", "0"]),
        3
    );
    assert_eq!(events(&h), ["setbit:x"]);
    assert_eq!(changes(&mut h, &["BITFIELD", "y", "SET", "i5", "0", "0"]), 1);
    assert_eq!(events(&h), ["new:y", "setbit:y"]);
    assert_eq!(
        changes(&mut h, &["BITFIELD", "y", "GET", "u8", "0", "SET", "u8", "0", "0", "INCRBY", "u8", "0", "0"]),
        0
    );
    assert_eq!(changes(&mut h, &["BITFIELD", "y", "SET", "i5", "90", "0"]), 1);
    assert_eq!(changes(&mut h, &["BITFIELD", "y", "OVERFLOW", "SAT", "INCRBY", "u2", "0", "10"]), 1);
    assert_eq!(changes(&mut h, &["BITFIELD", "y", "OVERFLOW", "SAT", "INCRBY", "u2", "0", "10"]), 0);
    assert_eq!(changes(&mut h, &["BITFIELD", "y", "INCRBY", "u2", "0", "4"]), 0);
    assert_eq!(
        changes(&mut h, &["BITFIELD", "x", "OVERFLOW", "FAIL", "SET", "u8", "0", "1000", "SET", "u8", "100", "0"]),
        1
    );
    assert_eq!(events(&h), ["setbit:x"]);
}
