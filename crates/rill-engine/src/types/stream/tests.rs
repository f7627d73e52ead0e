//! Stream storage tests: one group per operation, a reference-model proptest, and the
//! bytes-per-entry measurement.

use super::id::{self, StreamId, XaddId};
use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn fv(pairs: &[(&str, &str)]) -> Vec<(Bytes, Bytes)> {
    pairs.iter().map(|(f, v)| (b(f), b(v))).collect()
}

fn sid(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

const NODES_100: NodeLimits = NodeLimits { max_entries: 100, max_bytes: 0 };

/// `n` entries with IDs 1-0 .. n-0 in 100-entry blocks.
fn numbered(n: u64) -> Stream {
    let mut s = Stream::new();
    for i in 1..=n {
        s.append(sid(i, 0), &fv(&[("i", &i.to_string())]), NODES_100).expect("append");
    }
    s
}

fn ids(entries: &[StreamEntry]) -> Vec<StreamId> {
    entries.iter().map(|(id, _)| *id).collect()
}

// ---------------------------------------------------------------------------------------------
// IDs for XADD
// ---------------------------------------------------------------------------------------------

#[test]
fn auto_ids_follow_clock_or_increment() {
    let mut s = Stream::new();
    assert_eq!(s.next_id_auto(5), Ok(sid(5, 0)));
    s.append(sid(5, 0), &fv(&[("f", "v")]), NodeLimits::default()).expect("append");
    // Clock equal or behind: seq + 1.
    assert_eq!(s.next_id_auto(5), Ok(sid(5, 1)));
    assert_eq!(s.next_id_auto(3), Ok(sid(5, 1)));
    assert_eq!(s.next_id_auto(6), Ok(sid(6, 0)));
    // Carry into ms.
    s.set_id(sid(7, u64::MAX), None, None).expect("setid");
    assert_eq!(s.next_id_auto(0), Ok(sid(8, 0)));
}

#[test]
fn auto_seq_ids() {
    let mut s = Stream::new();
    assert_eq!(s.resolve_xadd_id(XaddId::AutoSeq(0), 0), Ok(sid(0, 1)));
    assert_eq!(s.next_id_for(5), Ok(sid(5, 0)));
    s.append(sid(5, 0), &fv(&[("f", "v")]), NodeLimits::default()).expect("append");
    assert_eq!(s.next_id_for(5), Ok(sid(5, 1)));
    assert_eq!(s.next_id_for(4), Err(id::XADD_ID_TOO_SMALL));
    s.set_id(sid(9, u64::MAX), None, None).expect("setid");
    assert_eq!(s.next_id_for(9), Err(id::XADD_ID_TOO_SMALL));
    assert_eq!(s.next_id_for(u64::MAX), Ok(sid(u64::MAX, 0)));
}

#[test]
fn explicit_ids_must_exceed_last_generated() {
    let mut s = numbered(3);
    assert_eq!(s.append(sid(3, 0), &fv(&[("f", "v")]), NODES_100), Err(id::XADD_ID_TOO_SMALL));
    assert!(s.delete(sid(3, 0)));
    // Deleting the top entry does not lower last-generated-id.
    assert_eq!(s.append(sid(3, 0), &fv(&[("f", "v")]), NODES_100), Err(id::XADD_ID_TOO_SMALL));
    assert_eq!(s.append(sid(3, 1), &fv(&[("f", "v")]), NODES_100), Ok(sid(3, 1)));
    // A fresh stream cannot store 0-0.
    assert_eq!(Stream::new().check_explicit_id(StreamId::MIN), Err(id::XADD_ID_TOO_SMALL));
}

#[test]
fn exhausted_stream() {
    let mut s = Stream::new();
    s.append(StreamId::MAX, &fv(&[("f", "v")]), NODES_100).expect("max id is storable");
    assert_eq!(s.last_entry().map(|e| e.0), Some(StreamId::MAX));
    for arg in [XaddId::Auto, XaddId::AutoSeq(1), XaddId::Explicit(sid(1, 1))] {
        assert_eq!(s.resolve_xadd_id(arg, 0), Err(id::STREAM_EXHAUSTED));
    }
    assert_eq!(s.append(StreamId::MAX, &[], NODES_100), Err(id::STREAM_EXHAUSTED));
}

#[test]
fn too_large_entry_is_refused() {
    let mut s = Stream::new();
    // Not allocating 1 GiB: the check is on the sum, so fake it with shared Bytes.
    let big = Bytes::from(vec![b'x'; 1 << 20]);
    let fields: Vec<(Bytes, Bytes)> = (0..1025).map(|_| (Bytes::new(), big.clone())).collect();
    assert_eq!(s.append(sid(1, 0), &fields, NODES_100), Err(ELEMENTS_TOO_LARGE));
    assert!(s.is_empty());
    assert_eq!(s.last_generated_id(), StreamId::MIN);
}

// ---------------------------------------------------------------------------------------------
// Append and read back
// ---------------------------------------------------------------------------------------------

#[test]
fn values_round_trip_byte_exact() {
    let tricky = [
        "",
        "0",
        "-0",
        "007",
        "+1",
        "1",
        "-1",
        "31",
        "-32",
        "32",
        "-33",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "101.25",
        "101.250",
        "0.05",
        "-0.0",
        "-0.5",
        ".5",
        "1.",
        "1e3",
        " 1",
        "x",
        "\0\u{1}\u{ff}",
    ];
    let mut s = Stream::new();
    let limits = NodeLimits { max_entries: 4, max_bytes: 0 };
    let mut expect = Vec::new();
    for (i, v) in tricky.iter().enumerate() {
        // Same field list each time (delta and SAME encodings), then a different one.
        let same = fv(&[("a", v), ("b", tricky.get(i / 2).copied().unwrap_or("")), ("c", "101.25")]);
        let other = fv(&[("z", v), (v, v)]);
        for fields in [same, other] {
            let id = s.next_id_auto(1).expect("id");
            s.append(id, &fields, limits).expect("append");
            expect.push((id, fields));
        }
    }
    assert_eq!(s.range_vec(StreamId::MIN, StreamId::MAX, None, false), expect);
    assert!(s.validate());
    let long = "y".repeat(300);
    let id = s.next_id_auto(1).expect("id");
    s.append(id, &fv(&[(&long, &long)]), limits).expect("append");
    assert_eq!(s.get(id).map(|e| e.1), Some(fv(&[(&long, &long)])));
}

#[test]
fn duplicate_fields_and_order_kept() {
    let mut s = Stream::new();
    let fields = fv(&[("b", "1"), ("a", "2"), ("b", "3")]);
    s.append(sid(1, 0), &fields, NODES_100).expect("append");
    s.append(sid(1, 1), &fields, NODES_100).expect("append");
    assert_eq!(s.get(sid(1, 1)), Some((sid(1, 1), fields)));
}

#[test]
fn blocks_split_by_entries_and_bytes() {
    let s = numbered(250);
    let counts: Vec<u64> = s.blocks().map(|(_, b)| b.live_count()).collect();
    assert_eq!(counts, vec![100, 100, 50]);
    let keys: Vec<StreamId> = s.blocks().map(|(k, _)| k).collect();
    assert_eq!(keys, vec![sid(1, 0), sid(101, 0), sid(201, 0)]);

    let mut s = Stream::new();
    let limits = NodeLimits { max_entries: 0, max_bytes: 64 };
    for i in 1..=20 {
        s.append(sid(i, 0), &fv(&[("field", "some text value")]), limits).expect("append");
    }
    assert!(s.block_count() > 1);
    assert!(s.blocks().all(|(_, b)| b.as_bytes().len() < 64 + 21));
    assert!(s.validate());
}

// ---------------------------------------------------------------------------------------------
// Range
// ---------------------------------------------------------------------------------------------

#[test]
fn range_seeks_and_bounds() {
    let s = numbered(250);
    let r = s.range_vec(sid(150, 0), sid(152, 0), None, false);
    assert_eq!(ids(&r), vec![sid(150, 0), sid(151, 0), sid(152, 0)]);
    assert_eq!(r.first().map(|e| e.1.clone()), Some(fv(&[("i", "150")])));
    let r = s.range_vec(sid(150, 0), sid(152, 0), None, true);
    assert_eq!(ids(&r), vec![sid(152, 0), sid(151, 0), sid(150, 0)]);
    // Exclusive bounds resolved by the ID parser.
    let start = id::parse_interval_start(b"(150").expect("start");
    let end = id::parse_interval_end(b"(152-0").expect("end");
    assert_eq!(ids(&s.range_vec(start, end, None, false)), vec![sid(151, 0)]);
    // Counts across block boundaries.
    assert_eq!(
        ids(&s.range_vec(sid(99, 0), StreamId::MAX, Some(3), false)),
        vec![sid(99, 0), sid(100, 0), sid(101, 0)]
    );
    assert_eq!(
        ids(&s.range_vec(StreamId::MIN, sid(102, 5), Some(3), true)),
        vec![sid(102, 0), sid(101, 0), sid(100, 0)]
    );
    assert_eq!(s.range_vec(StreamId::MIN, StreamId::MAX, Some(0), false), vec![]);
    assert_eq!(s.range_vec(sid(5, 0), sid(4, 0), None, false), vec![]);
    assert_eq!(s.range_vec(sid(251, 0), StreamId::MAX, None, false), vec![]);
    assert_eq!(s.range_vec(StreamId::MIN, sid(0, 9), None, true), vec![]);
    assert_eq!(s.range(StreamId::MIN, StreamId::MAX, false).count(), 250);
    assert_eq!(s.first_entry().map(|e| e.0), Some(sid(1, 0)));
    assert_eq!(s.last_entry().map(|e| e.0), Some(sid(250, 0)));
    assert_eq!(Stream::new().first_entry(), None);
}

// ---------------------------------------------------------------------------------------------
// Delete
// ---------------------------------------------------------------------------------------------

#[test]
fn delete_updates_metadata_and_frees_blocks() {
    let mut s = numbered(5);
    assert!(!s.delete(sid(9, 0)));
    assert!(s.delete(sid(3, 0)));
    assert!(!s.delete(sid(3, 0)));
    assert_eq!(s.max_deleted_entry_id(), sid(3, 0));
    assert!(s.delete(sid(2, 0)));
    assert_eq!(s.max_deleted_entry_id(), sid(3, 0), "only raised");
    assert_eq!(s.first_id(), sid(1, 0));
    assert!(s.delete(sid(1, 0)));
    assert_eq!(s.first_id(), sid(4, 0));
    assert_eq!(s.len(), 2);
    assert_eq!(s.blocks().next().map(|(_, b)| b.deleted_count()), Some(3), "deleted stay in place");
    assert!(s.delete(sid(5, 0)) && s.delete(sid(4, 0)));
    assert!(s.is_empty());
    assert_eq!(s.block_count(), 0);
    assert_eq!(s.first_id(), StreamId::MIN);
    assert_eq!(s.last_generated_id(), sid(5, 0));
    assert_eq!(s.entries_added(), 5);
    assert!(s.validate());
}

#[test]
fn point_lookups_agree_whether_a_block_is_scanned_or_decoded() {
    // 350 entries in 100-entry blocks, every seventh deleted: a lookup's first probe in a block
    // scans it from a mark, a second decodes it; both must say what `contains` says, in ID
    // order, in reverse, hopping between blocks, and for IDs that never were.
    let mut s = numbered(350);
    for i in (7..=350).step_by(7) {
        assert!(s.delete(sid(i, 0)));
    }
    let probes: Vec<Vec<StreamId>> = vec![
        (0..=352).map(|i| sid(i, 0)).collect(),
        (0..=352).rev().map(|i| sid(i, 0)).collect(),
        (0..=352).map(|i| sid((i * 101) % 353, 0)).collect(),
        (1..=350).map(|i| sid(i, 1)).collect(),
    ];
    for order in probes {
        let mut lookup = s.lookup();
        for id in order {
            assert_eq!(lookup.contains(id), s.contains(id), "{id:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Trim
// ---------------------------------------------------------------------------------------------

#[test]
fn approx_maxlen_removes_whole_blocks_only() {
    let mut s = numbered(1000);
    assert_eq!(s.trim_maxlen(555, true, None, NODES_100), 400);
    assert_eq!(s.len(), 600);
    assert_eq!(s.first_id(), sid(401, 0));
    assert_eq!(s.max_deleted_entry_id(), StreamId::MIN, "trimming is not deleting");
    assert_eq!(s.entries_added(), 1000);
    // LIMIT caps the work in whole blocks: 250 allows two blocks.
    let mut s = numbered(1000);
    assert_eq!(s.trim_maxlen(0, true, Some(250), NODES_100), 200);
    // Default LIMIT = 100 × node_max_entries = 500 entries with 5-entry nodes.
    let small = NodeLimits { max_entries: 5, max_bytes: 0 };
    let mut s = Stream::new();
    for i in 1..=1000 {
        s.append(sid(i, 0), &fv(&[("f", "v")]), small).expect("append");
    }
    assert_eq!(s.trim_maxlen(0, true, None, small), 500);
    assert_eq!(s.trim_maxlen(0, true, Some(0), small), 500, "LIMIT 0 is unlimited");
    assert!(s.is_empty());
}

#[test]
fn exact_maxlen_marks_boundary_entries() {
    let mut s = numbered(250);
    assert_eq!(s.trim_maxlen(145, false, Some(1), NODES_100), 105, "limit ignored when exact");
    assert_eq!(s.len(), 145);
    assert_eq!(s.first_id(), sid(106, 0));
    let first_block = s.blocks().next().map(|(k, b)| (k, b.live_count(), b.deleted_count()));
    assert_eq!(first_block, Some((sid(101, 0), 95, 5)));
    assert_eq!(s.trim_maxlen(145, false, None, NODES_100), 0);
    assert_eq!(s.trim_maxlen(0, false, None, NODES_100), 145);
    assert!(s.is_empty() && s.block_count() == 0);
    assert_eq!(s.first_id(), StreamId::MIN);
    assert!(s.validate());
}

#[test]
fn minid_exact_and_approx() {
    let mut s = numbered(250);
    assert_eq!(s.trim_minid(sid(150, 0), true, None, NODES_100), 100);
    assert_eq!(s.first_id(), sid(101, 0));
    assert_eq!(s.trim_minid(sid(150, 0), false, None, NODES_100), 49);
    assert_eq!(s.first_id(), sid(150, 0));
    assert_eq!(s.trim_minid(sid(150, 0), false, None, NODES_100), 0);
    assert_eq!(s.trim_minid(StreamId::MAX, false, None, NODES_100), 101);
    assert!(s.is_empty());
    assert_eq!(s.max_deleted_entry_id(), StreamId::MIN);
}

// ---------------------------------------------------------------------------------------------
// XSETID
// ---------------------------------------------------------------------------------------------

#[test]
fn set_id_rules() {
    let mut s = numbered(3);
    assert!(s.delete(sid(2, 0)));
    assert_eq!(s.set_id(sid(1, 5), None, None), Err(SETID_BELOW_MAX_DELETED));
    assert_eq!(s.set_id(sid(2, 5), None, None), Err(SETID_BELOW_TOP));
    assert_eq!(s.set_id(sid(9, 0), Some(1), None), Err(SETID_ENTRIES_ADDED_BELOW_LENGTH));
    assert_eq!(s.set_id(sid(9, 0), Some(2), Some(sid(8, 0))), Ok(()));
    assert_eq!((s.last_generated_id(), s.entries_added(), s.max_deleted_entry_id()), (sid(9, 0), 2, sid(8, 0)));
    // 0-0 leaves max-deleted alone; lowering to the top live entry is allowed.
    assert_eq!(s.set_id(sid(8, 0), None, Some(StreamId::MIN)), Ok(()));
    assert_eq!(s.max_deleted_entry_id(), sid(8, 0));
    assert_eq!(s.set_id(sid(3, 0), None, None), Err(SETID_BELOW_MAX_DELETED));
    // Empty stream: any ID ≥ max-deleted, entries_added unchecked.
    let mut e = Stream::new();
    assert_eq!(e.set_id(sid(0, 0), Some(0), None), Ok(()));
}

#[test]
fn append_behind_deleted_tail_rewrites_block() {
    let mut s = numbered(5);
    assert!(s.delete(sid(5, 0)) && s.delete(sid(4, 0)));
    // Keep max-deleted below the new last id by resetting it (as a replica's XSETID may).
    s.max_deleted_entry_id = StreamId::MIN;
    s.set_id(sid(3, 0), None, None).expect("setid");
    assert_eq!(s.append(sid(3, 5), &fv(&[("i", "x")]), NODES_100), Ok(sid(3, 5)));
    assert_eq!(
        ids(&s.range_vec(StreamId::MIN, StreamId::MAX, None, false)),
        vec![sid(1, 0), sid(2, 0), sid(3, 0), sid(3, 5)]
    );
    assert_eq!(s.blocks().next().map(|(_, b)| b.deleted_count()), Some(0));
    assert!(s.validate());
}

// ---------------------------------------------------------------------------------------------
// Reference model
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct Model {
    entries: BTreeMap<StreamId, Vec<(Bytes, Bytes)>>,
    last: StreamId,
    max_deleted: StreamId,
    entries_added: u64,
}

impl Model {
    fn next_id(&self, arg: XaddId, now: u64) -> Result<StreamId, CmdError> {
        if self.last == StreamId::MAX {
            return Err(id::STREAM_EXHAUSTED);
        }
        let id = match arg {
            XaddId::Auto if now > self.last.ms => sid(now, 0),
            XaddId::Auto => self.last.next().ok_or(id::STREAM_EXHAUSTED)?,
            XaddId::AutoSeq(ms) if ms == self.last.ms => {
                sid(ms, self.last.seq.checked_add(1).ok_or(id::XADD_ID_TOO_SMALL)?)
            }
            XaddId::AutoSeq(ms) => sid(ms, 0),
            XaddId::Explicit(id) => id,
        };
        if id > self.last {
            Ok(id)
        } else {
            Err(id::XADD_ID_TOO_SMALL)
        }
    }

    fn remove_oldest(&mut self, n: u64) {
        for _ in 0..n {
            self.entries.pop_first();
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Append { arg: XaddId, now: u64, fields: Vec<(Bytes, Bytes)> },
    Delete { pick: usize, id: StreamId },
    TrimMaxLen { n: u64, approx: bool, limit: Option<u64> },
    TrimMinId { pick: usize, id: StreamId, approx: bool, limit: Option<u64> },
    Range { a: usize, b: usize, exclusive: (bool, bool), count: Option<usize>, rev: bool },
    SetId { last: StreamId, entries_added: Option<u64>, max_deleted: Option<StreamId> },
}

fn arb_id() -> impl Strategy<Value = StreamId> {
    let ms = prop_oneof![8 => 0u64..40, 1 => Just(u64::MAX - 1), 1 => Just(u64::MAX)];
    let seq = prop_oneof![8 => 0u64..4, 1 => Just(u64::MAX)];
    (ms, seq).prop_map(|(ms, seq)| sid(ms, seq))
}

fn arb_value() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        Just(b("")),
        Just(b("-0")),
        Just(b("007")),
        Just(b("9223372036854775808")),
        Just(b("-9223372036854775808")),
        Just(b("101.25")),
        Just(b("-0.0")),
        Just(b("AAPL")),
        any::<i64>().prop_map(|v| b(&v.to_string())),
        (-200i64..200).prop_map(|v| b(&v.to_string())),
        // Near-equal numbers, so tiny and varint deltas against the master value both occur.
        (0i64..90).prop_map(|v| b(&v.to_string())),
        (9990i64..10090).prop_map(|v| b(&format!("{}.{:02}", v / 100, v % 100))),
        (-100_000i64..100_000, 1u32..4).prop_map(|(m, s)| b(&format!(
            "{}.{:0w$}",
            m / 100,
            (m % 100).abs(),
            w = s as usize
        ))),
        proptest::collection::vec(any::<u8>(), 0..80).prop_map(Bytes::from),
    ]
}

fn arb_fields() -> impl Strategy<Value = Vec<(Bytes, Bytes)>> {
    let tick = proptest::collection::vec(arb_value(), 4)
        .prop_map(|vals| ["symbol", "price", "seq", "ts"].iter().zip(vals).map(|(f, v)| (b(f), v)).collect());
    let name = prop_oneof![Just(b("a")), Just(b("b")), Just(b("")), Just(b("price"))];
    let free = proptest::collection::vec((name, arb_value()), 0..4);
    prop_oneof![3 => tick, 1 => free]
}

fn arb_op() -> impl Strategy<Value = Op> {
    let xadd_arg = prop_oneof![
        2 => Just(XaddId::Auto),
        1 => (0u64..40).prop_map(XaddId::AutoSeq),
        1 => Just(XaddId::AutoSeq(u64::MAX)),
        2 => arb_id().prop_map(XaddId::Explicit),
    ];
    let limit = prop_oneof![Just(None), (0u64..12).prop_map(Some)];
    prop_oneof![
        10 => (xadd_arg, 0u64..45, arb_fields()).prop_map(|(arg, now, fields)| Op::Append { arg, now, fields }),
        3 => (any::<usize>(), arb_id()).prop_map(|(pick, id)| Op::Delete { pick, id }),
        1 => (0u64..30, any::<bool>(), limit.clone()).prop_map(|(n, approx, limit)| Op::TrimMaxLen { n, approx, limit }),
        1 => (any::<usize>(), arb_id(), any::<bool>(), limit).prop_map(|(pick, id, approx, limit)| Op::TrimMinId { pick, id, approx, limit }),
        3 => (any::<usize>(), any::<usize>(), any::<(bool, bool)>(), prop_oneof![Just(None), (0usize..5).prop_map(Some)], any::<bool>())
            .prop_map(|(a, b, exclusive, count, rev)| Op::Range { a, b, exclusive, count, rev }),
        1 => (arb_id(), prop_oneof![Just(None), (0u64..60).prop_map(Some)], prop_oneof![Just(None), arb_id().prop_map(Some)])
            .prop_map(|(last, entries_added, max_deleted)| Op::SetId { last, entries_added, max_deleted }),
    ]
}

fn arb_limits() -> impl Strategy<Value = NodeLimits> {
    prop_oneof![
        3 => Just(NodeLimits { max_entries: 3, max_bytes: 64 }),
        1 => Just(NodeLimits { max_entries: 1, max_bytes: 0 }),
        1 => Just(NodeLimits { max_entries: 0, max_bytes: 0 }),
        1 => Just(NodeLimits::default()),
        1 => (1u64..6, 0u64..200).prop_map(|(e, b)| NodeLimits { max_entries: e, max_bytes: b }),
    ]
}

/// An existing ID (by `pick`) when there is one and `pick` says so, else `fallback`.
fn pick_id(model: &Model, pick: usize, fallback: StreamId) -> StreamId {
    let n = model.entries.len();
    // One pick in four uses the fallback, so absent IDs are tried too.
    if n == 0 || pick % 4 == 3 {
        return fallback;
    }
    model.entries.keys().nth(pick % n).copied().unwrap_or(fallback)
}

/// The whole-block prefix an approximate trim may remove, from the stream's blocks before it
/// (spec §6.1): go block by block while the goal still holds without the block and the
/// removed total stays within the limit.
fn approx_expected(s: &Stream, maxlen: Option<u64>, min_id: Option<StreamId>, limit: u64) -> u64 {
    let mut length = s.len();
    let mut removed = 0;
    for (_, block) in s.blocks() {
        if matches!(maxlen, Some(n) if length <= n) {
            break;
        }
        let live = block.live_count();
        if limit != 0 && removed + live > limit {
            break;
        }
        let whole = match (maxlen, min_id) {
            (Some(n), _) => length - live >= n,
            (None, Some(min)) => block.last_id() < min,
            _ => false,
        };
        if !whole {
            break;
        }
        length -= live;
        removed += live;
    }
    removed
}

fn check_same(s: &Stream, m: &Model) -> Result<(), TestCaseError> {
    prop_assert!(s.validate(), "invariants broken: {:?}", s);
    prop_assert_eq!(s.len(), m.entries.len() as u64);
    prop_assert_eq!(s.last_generated_id(), m.last);
    prop_assert_eq!(s.max_deleted_entry_id(), m.max_deleted);
    prop_assert_eq!(s.entries_added(), m.entries_added);
    prop_assert_eq!(s.first_id(), m.entries.keys().next().copied().unwrap_or(StreamId::MIN));
    let all: Vec<StreamEntry> = m.entries.iter().map(|(k, v)| (*k, v.clone())).collect();
    prop_assert_eq!(s.range_vec(StreamId::MIN, StreamId::MAX, None, false), all);
    // Point reads start from a block's position marks.
    for (id, fields) in &m.entries {
        prop_assert_eq!(s.get(*id), Some((*id, fields.clone())));
        prop_assert!(s.contains(*id));
        // Its neighbours are live exactly when the model has them (deleted ones included).
        let next = StreamId { ms: id.ms, seq: id.seq.wrapping_add(1) };
        let prev = StreamId { ms: id.ms, seq: id.seq.wrapping_sub(1) };
        for other in [next, prev] {
            prop_assert_eq!(s.contains(other), m.entries.contains_key(&other));
        }
    }
    prop_assert_eq!(s.contains(m.max_deleted), m.entries.contains_key(&m.max_deleted));
    Ok(())
}

fn run_ops(limits: NodeLimits, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut s = Stream::new();
    let mut m = Model::default();
    for op in ops {
        match op {
            Op::Append { arg, now, fields } => {
                let got = s.resolve_xadd_id(arg, now).and_then(|id| s.append(id, &fields, limits));
                let want = m.next_id(arg, now);
                prop_assert_eq!(&got, &want);
                if let Ok(id) = want {
                    m.entries.insert(id, fields);
                    m.last = id;
                    m.entries_added += 1;
                }
            }
            Op::Delete { pick, id } => {
                let id = pick_id(&m, pick, id);
                let want = m.entries.remove(&id).is_some();
                if want && id > m.max_deleted {
                    m.max_deleted = id;
                }
                prop_assert_eq!(s.delete(id), want);
            }
            Op::TrimMaxLen { n, approx, limit } => {
                let before = s.len();
                let want = if approx {
                    approx_expected(&s, Some(n), None, effective_trim_limit(limit, limits))
                } else {
                    before.saturating_sub(n)
                };
                prop_assert_eq!(s.trim_maxlen(n, approx, limit, limits), want);
                m.remove_oldest(want);
                prop_assert!(s.len() >= n.min(before), "never below the threshold");
            }
            Op::TrimMinId { pick, id, approx, limit } => {
                let min = pick_id(&m, pick, id);
                let below = m.entries.range(..min).count() as u64;
                let want = if approx {
                    approx_expected(&s, None, Some(min), effective_trim_limit(limit, limits))
                } else {
                    below
                };
                prop_assert!(want <= below, "only entries below MINID go");
                prop_assert_eq!(s.trim_minid(min, approx, limit, limits), want);
                m.remove_oldest(want);
            }
            Op::Range { a, b, exclusive, count, rev } => {
                let start = pick_id(&m, a, StreamId::MIN);
                let end = pick_id(&m, b, StreamId::MAX);
                let start = if exclusive.0 { start.next().unwrap_or(start) } else { start };
                let end = if exclusive.1 { end.prev().unwrap_or(end) } else { end };
                let got = s.range_vec(start, end, count, rev);
                let want: Vec<StreamEntry> = if start > end {
                    vec![]
                } else if rev {
                    m.entries
                        .range(start..=end)
                        .rev()
                        .take(count.unwrap_or(usize::MAX))
                        .map(|(k, v)| (*k, v.clone()))
                        .collect()
                } else {
                    m.entries
                        .range(start..=end)
                        .take(count.unwrap_or(usize::MAX))
                        .map(|(k, v)| (*k, v.clone()))
                        .collect()
                };
                prop_assert_eq!(got, want);
            }
            Op::SetId { last, entries_added, max_deleted } => {
                let top = m.entries.keys().next_back().copied();
                let want = if last < m.max_deleted {
                    Err(SETID_BELOW_MAX_DELETED)
                } else if matches!(top, Some(t) if last < t) {
                    Err(SETID_BELOW_TOP)
                } else if top.is_some() && matches!(entries_added, Some(n) if n < m.entries.len() as u64) {
                    Err(SETID_ENTRIES_ADDED_BELOW_LENGTH)
                } else {
                    Ok(())
                };
                // The command layer refuses MAXDELETEDID > last-id before calling.
                let max_deleted = max_deleted.filter(|d| *d <= last);
                prop_assert_eq!(s.set_id(last, entries_added, max_deleted), want.clone());
                if want.is_ok() {
                    m.last = last;
                    if let Some(n) = entries_added {
                        m.entries_added = n;
                    }
                    if let Some(d) = max_deleted.filter(|d| *d != StreamId::MIN) {
                        m.max_deleted = d;
                    }
                }
            }
        }
        check_same(&s, &m)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn compact_stream_matches_model(limits in arb_limits(), ops in proptest::collection::vec(arb_op(), 1..120)) {
        run_ops(limits, ops)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

/// 100k tick-shaped entries with auto IDs; prints bytes per entry (`--nocapture`).
#[test]
fn tick_entries_are_compact() {
    let symbols = ["AAPL", "MSFT", "GOOG", "AMZN", "NVDA", "META", "TSLA", "NFLX"];
    let mut prices = [10125i64, 41210, 17833, 18502, 90017, 48876, 17455, 61020];
    let mut s = Stream::new();
    let limits = NodeLimits::default();
    let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut ts: u64 = 1_767_225_600_000;
    let n = 100_000u64;
    let mut payload = 0usize;
    for seq in 0..n {
        let r = next();
        ts += r % 3; // about 1.5 ticks per ms on average, bursts share an ms
        let k = (r >> 8) as usize % symbols.len();
        let p = prices.get_mut(k).expect("symbol index");
        *p = (*p + (r >> 16) as i64 % 21 - 10).max(1);
        let price = format!("{}.{:02}", *p / 100, *p % 100);
        let fields = fv(&[
            ("symbol", symbols.get(k).copied().unwrap_or("?")),
            ("price", &price),
            ("seq", &seq.to_string()),
            ("ts", &ts.to_string()),
        ]);
        payload += fields.iter().map(|(f, v)| f.len() + v.len()).sum::<usize>();
        let id = s.next_id_auto(ts).expect("id");
        s.append(id, &fields, limits).expect("append");
    }
    let buffers: usize = s.blocks().map(|(_, b)| b.as_bytes().len()).sum();
    let total = s.memory_usage();
    println!(
        "ticks: {n} entries, {} blocks, raw field+value bytes/entry {:.1}, block bytes/entry {:.2}, \
         memory_usage/entry {:.2}",
        s.block_count(),
        payload as f64 / n as f64,
        buffers as f64 / n as f64,
        total as f64 / n as f64
    );
    assert_eq!(s.len(), n);
    assert!(total as f64 / (n as f64) < 22.0, "tick entries should stay near 20 B each");
    assert!(s.validate());
}
