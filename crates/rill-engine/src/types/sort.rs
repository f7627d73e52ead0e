//! SORT and SORT_RO: the elements of a list, set or sorted set, ordered by their own value or
//! by keys derived from them, optionally fetched through patterns and stored as a list.
//!
//! ```text
//! SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC | DESC] [ALPHA]
//!          [STORE destination]
//! ```
//!
//! Cost: O(N + M·log M) for N elements sorted and M returned, plus one key lookup per element
//! for BY and per returned element for each GET. Without sorting (`BY` a pattern with no `*`)
//! it is O(N).
//!
//! Patterns (BY and GET): the first `*` is replaced by the element and names a string key; a
//! `->field` after the `*` (with something after the arrow) reads that field of a hash
//! instead. A key that is missing or of another type counts as missing: nil for GET (an empty
//! string when storing), score 0 or "sorts first" for BY. `GET #` is the element itself. A
//! pattern with no `*` fetches nothing; as BY it means "do not sort".
//!
//! Redis behaviours we match on purpose:
//! - Options are parsed before the key is looked at, so a syntax error beats WRONGTYPE. A BY
//!   without `*` switches sorting off for good, even if a later BY has one.
//! - Numeric sorting reads each score as a whole float (`inf`, an overflow to infinity and an
//!   underflow to 0 are fine, spaces, hex and NaN are not; an empty string is 0; Redis 7.0
//!   refused over- and underflows and took spaces and hex) and breaks ties by the
//!   elements' bytes; one bad score fails the whole command with
//!   `ERR One or more scores can't be converted into double`. DESC reverses the whole order,
//!   ties included.
//! - ALPHA compares bytes (Redis uses `strcoll`, byte order in the C locale; without STORE it
//!   stops at a NUL byte as C strings do). By a pattern, a missing value sorts first and equal
//!   values keep no particular order.
//! - Not sorting: a list keeps its order, a sorted set its score order, a set its own order,
//!   each reversed by DESC before LIMIT applies — except a set with STORE, which Redis sorts
//!   ALPHA so that the stored list does not depend on the set's layout.
//! - Every SORT of a sorted set turns a listpack into a skiplist (Redis converts before
//!   reading), even one that then fails.
//! - LIMIT: a negative offset is 0, a negative count means "to the end".
//! - STORE writes a list (`sortstore`), dropping the destination's TTL, and replies its
//!   length; an empty result deletes the destination (`del`). A missing key sorts as an empty
//!   list. SORT_RO has no STORE (a syntax error).
//!
//! SORT is a function of the keyspace and its arguments, so it is logged as itself.

use crate::command::{key_at, BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeySpec};
use crate::types::object::meta::Form;
use crate::types::{arg, delete_key, is_token};
use crate::util::parse_i64;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::{BufMut, Bytes, BytesMut};
use rill_resp::Reply;
use std::cmp::Ordering;

const BY_GET_NOTE: &str = "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from \
                           the content of the key we sort";
const STORE_NOTE: &str = "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear \
                          anywhere in the argument array";

const UNKNOWN_RO: KeySpec =
    KeySpec { flags: &["RO", "ACCESS"], begin: BeginSearch::Unknown, find: FindKeys::Unknown, notes: BY_GET_NOTE };

const SORT_SYNTAX: &str = "key:key [BY pattern:pattern] [LIMIT offset:integer count:integer] \
                           [GET pattern:pattern ...] [ASC | DESC] [ALPHA]";

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC | DESC] [ALPHA]
/// [STORE destination]`
pub const SORT: CommandSpec = CommandSpec {
    name: "sort",
    arity: -2,
    flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::MOVABLEKEYS),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@set", "@sortedset", "@list", "@slow", "@dangerous"],
    key_specs: &[
        key_at(1, &["RO", "ACCESS"]),
        UNKNOWN_RO,
        KeySpec { flags: &["OW", "UPDATE"], begin: BeginSearch::Unknown, find: FindKeys::Unknown, notes: STORE_NOTE },
    ],
    summary: "Sorts a list, set or sorted set, by value or through patterns; replies or stores a list.",
    complexity: "O(N+M*log(M)): N elements to sort, M returned; O(N) when not sorting.",
    syntax: "key:key [BY pattern:pattern] [LIMIT offset:integer count:integer] [GET pattern:pattern ...] \
             [ASC | DESC] [ALPHA] [STORE destination:key]",
    get_keys: Some(sort_keys),
    ..CommandSpec::of(Handler::Engine(sort))
};

/// `SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC | DESC] [ALPHA]`
pub const SORT_RO: CommandSpec = CommandSpec {
    name: "sort_ro",
    flags: Flags::READONLY.and(Flags::MOVABLEKEYS),
    acl: &["@read", "@set", "@sortedset", "@list", "@slow", "@dangerous"],
    key_specs: &[key_at(1, &["RO", "ACCESS"]), UNKNOWN_RO],
    summary: "Sorts a list, set or sorted set, by value or through patterns (SORT without STORE).",
    since: "7.0.0",
    syntax: SORT_SYNTAX,
    get_keys: Some(sort_ro_keys),
    handler: Handler::Engine(sort_ro),
    ..SORT
};

/// The sort commands.
pub const COMMANDS: &[CommandSpec] = &[SORT, SORT_RO];

/// SORT's keys: the sorted key (spec 0) and the destination of the last STORE (spec 2),
/// found by skipping the options' arguments as Redis does, without judging the rest.
fn sort_keys(args: &[Bytes]) -> Vec<(usize, usize)> {
    let mut keys = vec![(1, 0)];
    let mut store = None;
    let mut i = 2;
    while let Some(word) = args.get(i) {
        if is_token(word, "LIMIT") {
            i += 2;
        } else if is_token(word, "GET") || is_token(word, "BY") {
            i += 1;
        } else if is_token(word, "STORE") && i + 1 < args.len() {
            store = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    keys.extend(store.map(|s| (s, 2)));
    keys
}

/// SORT_RO's key: the sorted key.
fn sort_ro_keys(_args: &[Bytes]) -> Vec<(usize, usize)> {
    vec![(1, 0)]
}

// ---------------------------------------------------------------------------------------------
// Parsing

/// A parsed SORT.
#[derive(Debug, Default)]
struct SortOptions<'a> {
    /// The BY pattern, if any.
    by: Option<&'a [u8]>,
    /// A BY pattern without `*` was given: keep the natural order.
    dont_sort: bool,
    /// LIMIT offset and count, as given (count −1: to the end).
    offset: i64,
    count: i64,
    /// GET patterns, in order.
    gets: Vec<&'a [u8]>,
    desc: bool,
    alpha: bool,
    store: Option<&'a Bytes>,
}

/// `all_keys_readable`: see [`crate::CallCtx::all_keys_readable`]; without it a BY pattern
/// (one with a `*`) or any GET is refused where it stands among the options, as Redis.
fn parse(args: &[Bytes], read_only: bool, all_keys_readable: bool) -> Result<SortOptions<'_>, CmdError> {
    let mut o = SortOptions { count: -1, ..SortOptions::default() };
    let mut i = 2;
    while let Some(word) = args.get(i) {
        let next = args.get(i + 1);
        if is_token(word, "ASC") {
            o.desc = false;
        } else if is_token(word, "DESC") {
            o.desc = true;
        } else if is_token(word, "ALPHA") {
            o.alpha = true;
        } else if let (true, Some(offset), Some(count)) = (is_token(word, "LIMIT"), next, args.get(i + 2)) {
            o.offset = parse_i64(offset).ok_or(CmdError::NOT_INTEGER)?;
            o.count = parse_i64(count).ok_or(CmdError::NOT_INTEGER)?;
            i += 2;
        } else if let (true, Some(dest)) = (is_token(word, "STORE") && !read_only, next) {
            o.store = Some(dest);
            i += 1;
        } else if let (true, Some(pattern)) = (is_token(word, "BY"), next) {
            o.by = Some(pattern);
            if !c_str(pattern).contains(&b'*') {
                o.dont_sort = true;
            } else if !all_keys_readable {
                return Err(CmdError::full("ERR BY option of SORT denied due to insufficient ACL permissions."));
            }
            i += 1;
        } else if let (true, Some(pattern)) = (is_token(word, "GET"), next) {
            if !all_keys_readable {
                return Err(CmdError::full("ERR GET option of SORT denied due to insufficient ACL permissions."));
            }
            o.gets.push(pattern);
            i += 1;
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 1;
    }
    Ok(o)
}

/// The bytes before the first NUL: what Redis' C-string searches see of a pattern.
fn c_str(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).and_then(|n| b.get(..n)).unwrap_or(b)
}

// ---------------------------------------------------------------------------------------------
// Patterns

/// The value `pattern` names for `element` (see the module doc); `None` when there is none.
fn lookup_pattern(engine: &mut Engine, ctx: &CallCtx, pattern: &[u8], element: &Bytes) -> Option<Bytes> {
    if c_str(pattern) == b"#" {
        return Some(element.clone());
    }
    let searchable = c_str(pattern);
    let star = searchable.iter().position(|&c| c == b'*')?;
    let after_star = searchable.get(star + 1..).unwrap_or(&[]);
    // `->` only counts with at least one byte after it (before any NUL).
    let arrow =
        after_star.windows(2).position(|w| w == b"->").map(|p| star + 1 + p).filter(|&a| searchable.len() > a + 2);
    let prefix = pattern.get(..star).unwrap_or(&[]);
    let (suffix, field) = match arrow {
        Some(a) => (pattern.get(star + 1..a).unwrap_or(&[]), pattern.get(a + 2..)),
        None => (pattern.get(star + 1..).unwrap_or(&[]), None),
    };
    let mut key = BytesMut::with_capacity(prefix.len() + element.len() + suffix.len());
    key.put_slice(prefix);
    key.put_slice(element);
    key.put_slice(suffix);
    match (&engine.lookup_read(ctx.db, &key, ctx.now_ms)?.value, field) {
        (Value::Str(s), None) => Some(s.clone()),
        (Value::Hash(h), Some(field)) => h.get(field).map(Bytes::copy_from_slice),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Sorting

/// A score as SORT reads it (see the module doc); `None` when it is no number.
fn sort_score(raw: &[u8]) -> Option<f64> {
    if raw.is_empty() {
        return Some(0.0);
    }
    let value: f64 = std::str::from_utf8(raw).ok()?.parse().ok()?;
    (!value.is_nan()).then_some(value)
}

/// What an element is compared by.
enum SortKey {
    /// Numeric: the score (ties broken by the element).
    Score(f64),
    /// ALPHA by a pattern: the pattern's value, missing first.
    By(Option<Bytes>),
    /// ALPHA by the element itself.
    Element,
}

fn compare(a: &(Bytes, SortKey), b: &(Bytes, SortKey), storing: bool) -> Ordering {
    let text = |x: &[u8], y: &[u8]| if storing { x.cmp(y) } else { c_str(x).cmp(c_str(y)) };
    match (&a.1, &b.1) {
        (SortKey::Score(x), SortKey::Score(y)) => {
            x.partial_cmp(y).unwrap_or(Ordering::Equal).then_with(|| a.0.cmp(&b.0))
        }
        (SortKey::By(x), SortKey::By(y)) => match (x, y) {
            (Some(x), Some(y)) => text(x, y),
            (x, y) => x.is_some().cmp(&y.is_some()),
        },
        _ => text(&a.0, &b.0),
    }
}

/// The kind of value sorted (a missing key sorts as an empty list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    List,
    Set,
    ZSet,
}

/// The elements at `key` in their natural order (a sorted set by ascending score), and what
/// held them. A sorted set is marked a skiplist, as Redis converts it.
fn load(engine: &mut Engine, ctx: &CallCtx, key: &[u8], storing: bool) -> Result<(Source, Vec<Bytes>), CmdError> {
    let entry =
        if storing { engine.lookup(ctx.db, key, ctx.now_ms) } else { engine.lookup_read(ctx.db, key, ctx.now_ms) };
    let loaded = match entry.map(|e| &e.value) {
        None => (Source::List, Vec::new()),
        Some(Value::List(l)) => (Source::List, l.iter().cloned().collect()),
        Some(Value::Set(s)) => (Source::Set, s.iter().map(Bytes::copy_from_slice).collect()),
        Some(Value::ZSet(z)) => (Source::ZSet, z.iter().map(|s| s.member.clone()).collect()),
        Some(_) => return Err(CmdError::WRONGTYPE),
    };
    if loaded.0 == Source::ZSet {
        if let Some(e) = engine.entry_mut(ctx.db, key) {
            e.meta.form = Form::Skiplist;
        }
    }
    Ok(loaded)
}

/// The `(start, length)` of the LIMIT window over `len` elements, as Redis clamps it.
fn window(offset: i64, count: i64, len: usize) -> (usize, usize) {
    let n = i64::try_from(len).unwrap_or(i64::MAX);
    let mut start = offset.max(0);
    let mut end = if count < 0 { n - 1 } else { start.saturating_add(count) - 1 };
    if start >= n {
        start = n - 1;
        end = n - 2;
    }
    end = end.min(n - 1);
    let taken = (end - start + 1).max(0);
    (usize::try_from(start).unwrap_or(0), usize::try_from(taken).unwrap_or(0))
}

/// The elements of the result, in order, after the window.
fn sorted_elements(
    engine: &mut Engine,
    ctx: &CallCtx,
    key: &[u8],
    o: &SortOptions<'_>,
) -> Result<Vec<Bytes>, CmdError> {
    let storing = o.store.is_some();
    let (source, mut elements) = load(engine, ctx, key, storing)?;
    let (mut dont_sort, mut alpha, mut by) = (o.dont_sort, o.alpha, o.by);
    if dont_sort && source == Source::Set && (storing || ctx.from_script) {
        (dont_sort, alpha, by) = (false, true, None);
    }
    if dont_sort {
        if o.desc {
            elements.reverse();
        }
    } else {
        let mut keyed = Vec::with_capacity(elements.len());
        let mut bad_score = false;
        for element in elements {
            let by_value = by.and_then(|p| lookup_pattern(engine, ctx, p, &element));
            let sort_key = if alpha {
                if by.is_some() {
                    SortKey::By(by_value)
                } else {
                    SortKey::Element
                }
            } else {
                let raw = match &by {
                    Some(_) => by_value.as_deref(),
                    None => Some(&element[..]),
                };
                match raw.map_or(Some(0.0), sort_score) {
                    Some(score) => SortKey::Score(score),
                    None => {
                        bad_score = true;
                        SortKey::Score(0.0)
                    }
                }
            };
            keyed.push((element, sort_key));
        }
        if bad_score {
            return Err(CmdError::full("ERR One or more scores can't be converted into double"));
        }
        keyed.sort_by(|a, b| {
            let order = compare(a, b, storing);
            if o.desc {
                order.reverse()
            } else {
                order
            }
        });
        elements = keyed.into_iter().map(|(e, _)| e).collect();
    }
    let (start, taken) = window(o.offset, o.count, elements.len());
    Ok(elements.into_iter().skip(start).take(taken).collect())
}

// ---------------------------------------------------------------------------------------------
// Commands

fn sort_generic(engine: &mut Engine, ctx: &CallCtx, args: &[Bytes], read_only: bool) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let o = parse(args, read_only, ctx.all_keys_readable)?;
    let elements = sorted_elements(engine, ctx, key, &o)?;
    let Some(dest) = o.store else {
        let mut out = Vec::with_capacity(elements.len() * o.gets.len().max(1));
        for element in &elements {
            if o.gets.is_empty() {
                out.push(Reply::Bulk(element.clone()));
            }
            for pattern in &o.gets {
                out.push(lookup_pattern(engine, ctx, pattern, element).map_or(Reply::Null, Reply::Bulk));
            }
        }
        return Ok(Reply::Array(out));
    };
    let mut list = std::collections::VecDeque::with_capacity(elements.len() * o.gets.len().max(1));
    for element in &elements {
        if o.gets.is_empty() {
            list.push_back(Bytes::copy_from_slice(element));
        }
        for pattern in &o.gets {
            let value = lookup_pattern(engine, ctx, pattern, element).unwrap_or_default();
            list.push_back(Bytes::copy_from_slice(&value));
        }
    }
    let len = list.len();
    if list.is_empty() {
        delete_key(engine, ctx.db, dest);
    } else {
        engine.set_key(ctx.db, dest, Value::List(list), false);
        engine.modified(ctx.db, dest, KeyEvent::SortStore);
        engine.signal_ready(ctx.db, dest);
    }
    Ok(Reply::Integer(i64::try_from(len).unwrap_or(i64::MAX)))
}

fn sort(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    sort_generic(engine, ctx, args, false)
}

fn sort_ro(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    sort_generic(engine, ctx, args, true)
}

#[cfg(test)]
mod tests {
    use super::{sort_keys, sort_score, window};
    use crate::types::testkit::*;
    use bytes::Bytes;
    use rill_resp::Reply;

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    const BAD_SCORE: &str = "ERR One or more scores can't be converted into double";

    #[test]
    fn scores_parse_like_redis() {
        assert_eq!(sort_score(b""), Some(0.0));
        assert_eq!(sort_score(b"1.5"), Some(1.5));
        assert_eq!(sort_score(b"+3"), Some(3.0));
        assert_eq!(sort_score(b".5"), Some(0.5));
        assert_eq!(sort_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_score(b"Infinity"), Some(f64::INFINITY));
        assert_eq!(sort_score(b"1e-400"), Some(0.0));
        assert_eq!(sort_score(b"1e400"), Some(f64::INFINITY));
        for bad in [&b" 5"[..], b"5 ", b"0x10", b"nan", b"1_0", b"abc"] {
            assert_eq!(sort_score(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn keys_of_a_call() {
        let keys =
            |line: &str| sort_keys(&line.split(' ').map(|w| Bytes::copy_from_slice(w.as_bytes())).collect::<Vec<_>>());
        assert_eq!(keys("SORT l"), [(1, 0)]);
        assert_eq!(keys("SORT l STORE a store b"), [(1, 0), (5, 2)]);
        assert_eq!(keys("SORT l GET store STORE d"), [(1, 0), (5, 2)]);
        assert_eq!(keys("SORT l LIMIT store x 1"), [(1, 0)]);
        assert_eq!(keys("SORT l store"), [(1, 0)]);
        assert_eq!(keys("SORT l bogus store d"), [(1, 0), (4, 2)]);
    }

    #[test]
    fn windows_clamp() {
        assert_eq!(window(0, -1, 5), (0, 5));
        assert_eq!(window(-3, 2, 5), (0, 2));
        assert_eq!(window(3, 10, 5), (3, 2));
        assert_eq!(window(5, 1, 5), (4, 0));
        assert_eq!(window(1, 0, 5), (1, 0));
        assert_eq!(window(0, -1, 0).1, 0);
        assert_eq!(window(i64::MAX, i64::MAX, 3).1, 0);
        assert_eq!(window(1, i64::MAX, 3), (1, 2));
    }

    #[test]
    fn numeric_alpha_desc_limit() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "3", "10", "2", "-1", "2.5"]);
        assert_eq!(h.run(&["SORT", "l"]), bulks(&["-1", "2", "2.5", "3", "10"]));
        assert_eq!(h.run(&["SORT", "l", "DESC"]), bulks(&["10", "3", "2.5", "2", "-1"]));
        assert_eq!(h.run(&["SORT", "l", "ALPHA"]), bulks(&["-1", "10", "2", "2.5", "3"]));
        assert_eq!(h.run(&["SORT", "l", "LIMIT", "1", "2"]), bulks(&["2", "2.5"]));
        assert_eq!(h.run(&["SORT", "l", "LIMIT", "-5", "1", "DESC"]), bulks(&["10"]));
        assert_eq!(h.run(&["SORT", "l", "LIMIT", "9", "1"]), bulks(&[]));
        assert_eq!(h.run(&["SORT_RO", "l", "BY", "nosort", "LIMIT", "1", "-1"]), bulks(&["10", "2", "-1", "2.5"]));
        assert_eq!(h.run(&["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "2"]), bulks(&["-1", "2"]));
        // Equal scores fall back to the elements' bytes, and DESC reverses that too.
        h.run(&["RPUSH", "e", "1.0", "1", "01"]);
        assert_eq!(h.run(&["SORT", "e"]), bulks(&["01", "1", "1.0"]));
        assert_eq!(h.run(&["SORT", "e", "DESC"]), bulks(&["1.0", "1", "01"]));
        h.run(&["RPUSH", "l", "x"]);
        assert_eq!(h.run(&["SORT", "l"]), err(BAD_SCORE));
    }

    #[test]
    fn by_and_get_patterns() {
        let mut h = Harness::new();
        h.run(&["SADD", "s", "a", "b", "c"]);
        h.run(&["MSET", "w_a", "3", "w_b", "1", "w_c", "2", "v_a", "A", "v_c", "C"]);
        h.run(&["HSET", "h_a", "f", "30"]);
        h.run(&["HSET", "h_b", "f", "10", "g", "G"]);
        assert_eq!(h.run(&["SORT", "s", "BY", "w_*"]), bulks(&["b", "c", "a"]));
        assert_eq!(h.run(&["SORT", "s", "BY", "h_*->f"]), bulks(&["c", "b", "a"]));
        assert_eq!(
            h.run(&["SORT", "s", "BY", "w_*", "GET", "#", "GET", "v_*", "GET", "h_*->g"]),
            Reply::Array(vec![
                bulk("b"),
                Reply::Null,
                bulk("G"),
                bulk("c"),
                bulk("C"),
                Reply::Null,
                bulk("a"),
                bulk("A"),
                Reply::Null
            ])
        );
        // A GET pattern without `*` fetches nothing; `->` at the end is part of the key name.
        assert_eq!(h.run(&["SORT", "s", "ALPHA", "GET", "v_a"]), Reply::Array(vec![Reply::Null; 3]));
        h.run(&["SET", "w_a->", "k"]);
        assert_eq!(h.run(&["SORT", "s", "ALPHA", "LIMIT", "0", "1", "GET", "w_*->"]), bulks(&["k"]));
        // ALPHA by a pattern: a missing value sorts first.
        assert_eq!(h.run(&["SORT", "s", "BY", "v_*", "ALPHA"]), bulks(&["b", "a", "c"]));
        // BY a string key that does not hold a number.
        h.run(&["SET", "w_b", "x"]);
        assert_eq!(h.run(&["SORT", "s", "BY", "w_*"]), err(BAD_SCORE));
    }

    #[test]
    fn sorted_sets_and_nosort() {
        let mut h = Harness::new();
        h.run(&["ZADD", "z", "1", "c", "2", "a", "3", "b"]);
        assert_eq!(h.run(&["OBJECT", "ENCODING", "z"]), bulk("listpack"));
        assert_eq!(h.run(&["SORT", "z", "BY", "nosort"]), bulks(&["c", "a", "b"]));
        assert_eq!(h.run(&["OBJECT", "ENCODING", "z"]), bulk("skiplist"));
        assert_eq!(h.run(&["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "5"]), bulks(&["a", "c"]));
        assert_eq!(h.run(&["SORT", "z", "ALPHA", "DESC"]), bulks(&["c", "b", "a"]));
        // A later BY with a `*` does not switch sorting back on.
        assert_eq!(h.run(&["SORT", "z", "BY", "nosort", "BY", "w_*", "ALPHA"]), bulks(&["c", "a", "b"]));
        // BY nosort on a set with STORE sorts it ALPHA.
        h.run(&["SADD", "s", "b", "c", "a"]);
        assert_eq!(h.run(&["SORT", "s", "BY", "nosort", "STORE", "d"]), int(3));
        assert_eq!(h.run(&["LRANGE", "d", "0", "-1"]), bulks(&["a", "b", "c"]));
    }

    #[test]
    fn store_replaces_or_deletes() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "2", "1"]);
        h.run(&["SET", "d", "v", "EX", "100"]);
        assert_eq!(h.run(&["SORT", "l", "STORE", "d"]), int(2));
        assert_eq!(h.run(&["TYPE", "d"]), Reply::Simple("list".into()));
        assert_eq!(h.run(&["TTL", "d"]), int(-1));
        assert_eq!(h.run(&["LRANGE", "d", "0", "-1"]), bulks(&["1", "2"]));
        // Missing GET values are stored as empty strings.
        assert_eq!(h.run(&["SORT", "l", "GET", "nope_*", "GET", "#", "STORE", "d"]), int(4));
        assert_eq!(h.run(&["LRANGE", "d", "0", "-1"]), bulks(&["", "1", "", "2"]));
        // Sorting into itself.
        assert_eq!(h.run(&["SORT", "l", "DESC", "STORE", "l"]), int(2));
        assert_eq!(h.run(&["LRANGE", "l", "0", "-1"]), bulks(&["2", "1"]));
        assert_eq!(h.run(&["SORT", "missing", "STORE", "d"]), int(0));
        assert_eq!(h.run(&["EXISTS", "d"]), int(0));
        assert_eq!(h.run(&["SORT", "missing"]), bulks(&[]));
    }

    #[test]
    fn errors() {
        let mut h = Harness::new();
        h.run(&["SET", "str", "v"]);
        h.run(&["RPUSH", "l", "1"]);
        let syntax = err("ERR syntax error");
        assert_eq!(h.run(&["SORT", "str"]), err(WRONGTYPE));
        assert_eq!(h.run(&["SORT", "str", "BOGUS"]), syntax);
        assert_eq!(h.run(&["SORT", "str", "LIMIT", "x", "1"]), err("ERR value is not an integer or out of range"));
        assert_eq!(h.run(&["SORT", "l", "LIMIT", "1"]), syntax);
        assert_eq!(h.run(&["SORT", "l", "BY"]), syntax);
        assert_eq!(h.run(&["SORT", "l", "GET"]), syntax);
        assert_eq!(h.run(&["SORT", "l", "STORE"]), syntax);
        assert_eq!(h.run(&["SORT_RO", "l", "STORE", "d"]), syntax);
        assert_eq!(h.run(&["EXISTS", "d"]), int(0));
        h.run(&["HSET", "h", "f", "v"]);
        assert_eq!(h.run(&["SORT_RO", "h"]), err(WRONGTYPE));
    }

    #[test]
    fn store_events() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "1"]);
        h.run(&["SET", "d", "x"]);
        let _ = events(&h);
        h.run(&["SORT", "l", "STORE", "d"]);
        let stored = events(&h);
        assert!(stored.iter().any(|e| e == "sortstore:d"), "{stored:?}");
        h.run(&["SORT", "missing", "STORE", "d"]);
        let deleted = events(&h);
        assert_eq!(deleted, ["del:d"]);
    }
}
