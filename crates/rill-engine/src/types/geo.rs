//! Geospatial commands on sorted sets: GEOADD, GEOPOS, GEODIST, GEOHASH, and the searches
//! GEORADIUS, GEORADIUSBYMEMBER (and their _RO forms), GEOSEARCH, GEOSEARCHSTORE. A position is stored
//! as Redis stores it, so a geo set is an ordinary sorted set (ZRANGE, DUMP and the log see
//! nothing special): the member's score is the 52-bit interleaved geohash of its longitude and
//! latitude (26 bits each, latitude on the even bits), as a double.
//!
//! What Redis users can observe, and we match:
//! - Coordinates are checked against the Web Mercator limits (longitude -180..180, latitude
//!   -85.05112878..85.05112878) before anything is written: `ERR invalid longitude,latitude
//!   pair <lon>,<lat>` (both with six decimals), and no member is added.
//! - A position read back is the centre of its geohash cell (GEOPOS), a double written as Redis
//!   8 writes one (the shortest text that reads back the same; Redis 7 wrote 17 decimals).
//! - Distances use the haversine formula on a sphere of radius 6372797.560856 m, in m, km, mi
//!   or ft, with four decimals (GEODIST).
//! - GEOHASH gives the standard 11-character base-32 geohash, computed from the cell's centre
//!   over latitudes -90..90 (the last character is always `0`: 52 bits, not 55).
//! - GEOADD is ZADD with the computed scores (its NX, XX and CH, its keyspace event `zadd`).
//! - A search looks at the cell around its centre and the eight around that, at the level
//!   whose cells are about as large as the search (one coarser if they do not reach its edges,
//!   neighbours it cannot reach left out), member by member in score order, cell by cell in
//!   Redis' order: results without ASC/DESC come in that order, and COUNT ... ANY stops there.
//!   A box is checked by its latitude distance, then its longitude distance at the member's
//!   latitude, as Redis does. The options' errors and their order are Redis'.
//!
//! Costs: GEOADD O(log N) per member, GEOPOS / GEOHASH O(1) per member, GEODIST O(1); a search
//! O(log N + M) for the M members of the nine cells, plus sorting those found.

use super::zset::set::{ScoreBound, ZSet};
use super::zset::{self, zset_cmd};
use super::{arg, is_token};
use crate::command::{key_at, BeginSearch, CommandSpec, Flags, Handler, KeySpec};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

const LON_MIN: f64 = -180.0;
const LON_MAX: f64 = 180.0;
const LAT_MIN: f64 = -85.05112878;
const LAT_MAX: f64 = 85.05112878;
/// Bits per coordinate.
const STEP: u32 = 26;
/// The sphere distances are measured on, in metres (Redis' value).
const EARTH_RADIUS_M: f64 = 6372797.560856;

/// The geo commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "geoadd",
        arity: -5,
        flags: Flags::WRITE.and(Flags::DENYOOM),
        acl: &["@write", "@geo", "@slow"],
        key_specs: &[key_at(1, &["RW", "UPDATE"])],
        summary: "Adds members at given longitudes and latitudes to a geo set (a sorted set), or moves them.",
        since: "3.2.0",
        complexity: "O(log(N)) for each member added, N the size of the set.",
        syntax: "key:key [condition@(NX | XX)] [CH] data@(longitude:double latitude:double member:string) ...",
        group: "geo",
        ..zset_cmd(Handler::Engine(geoadd))
    },
    CommandSpec {
        name: "geopos",
        arity: -2,
        flags: Flags::READONLY,
        acl: &["@read", "@geo", "@slow"],
        key_specs: &[key_at(1, &["RO", "ACCESS"])],
        summary: "Gives the longitude and latitude of members of a geo set.",
        since: "3.2.0",
        complexity: "O(1) for each member asked for.",
        syntax: "key:key [member:string ...]",
        group: "geo",
        ..zset_cmd(Handler::Engine(geopos))
    },
    CommandSpec {
        name: "geodist",
        arity: -4,
        flags: Flags::READONLY,
        acl: &["@read", "@geo", "@slow"],
        key_specs: &[key_at(1, &["RO", "ACCESS"])],
        summary: "Gives the distance between two members of a geo set.",
        since: "3.2.0",
        complexity: "O(1)",
        syntax: "key:key member1:string member2:string [unit@(M | KM | FT | MI)]",
        group: "geo",
        ..zset_cmd(Handler::Engine(geodist))
    },
    CommandSpec {
        name: "geohash",
        arity: -2,
        flags: Flags::READONLY,
        acl: &["@read", "@geo", "@slow"],
        key_specs: &[key_at(1, &["RO", "ACCESS"])],
        summary: "Gives the standard geohash strings of members of a geo set.",
        since: "3.2.0",
        complexity: "O(1) for each member asked for.",
        syntax: "key:key [member:string ...]",
        group: "geo",
        ..zset_cmd(Handler::Engine(geohash))
    },
    CommandSpec {
        name: "georadius",
        arity: -6,
        flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::MOVABLEKEYS),
        acl: &["@write", "@geo", "@slow"],
        key_specs: STORE_SPECS_6,
        summary: "Finds members of a geo set within a radius of a point, optionally storing them (older form of GEOSEARCH).",
        since: "3.2.0",
        complexity: "O(N+log(M)), N the members in the searched cells, M the members found.",
        syntax: "key:key longitude:double latitude:double radius:double unit@(M | KM | FT | MI) [WITHCOORD] \
                 [WITHDIST] [WITHHASH] [count-block@(COUNT count:integer [ANY])] [order@(ASC | DESC)] \
                 [store@(STORE storekey:key | STOREDIST storedistkey:key)]",
        group: "geo",
        ..zset_cmd(Handler::Engine(georadius))
    },
    CommandSpec {
        name: "georadius_ro",
        arity: -6,
        flags: Flags::READONLY,
        acl: &["@read", "@geo", "@slow"],
        key_specs: &[key_at(1, &["RO", "ACCESS"])],
        summary: "Finds members of a geo set within a radius of a point (older form of GEOSEARCH).",
        since: "3.2.10",
        complexity: "O(N+log(M)), N the members in the searched cells, M the members found.",
        syntax: "key:key longitude:double latitude:double radius:double unit@(M | KM | FT | MI) [WITHCOORD] \
                 [WITHDIST] [WITHHASH] [count-block@(COUNT count:integer [ANY])] [order@(ASC | DESC)]",
        group: "geo",
        ..zset_cmd(Handler::Engine(georadius_ro))
    },
    CommandSpec {
        name: "georadiusbymember",
        arity: -5,
        flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::MOVABLEKEYS),
        acl: &["@write", "@geo", "@slow"],
        key_specs: STORE_SPECS_5,
        summary: "Finds members of a geo set within a radius of one of its members, optionally storing them (older form of GEOSEARCH).",
        since: "3.2.0",
        complexity: "O(N+log(M)), N the members in the searched cells, M the members found.",
        syntax: "key:key member:string radius:double unit@(M | KM | FT | MI) [WITHCOORD] [WITHDIST] [WITHHASH] \
                 [count-block@(COUNT count:integer [ANY])] [order@(ASC | DESC)] \
                 [store@(STORE storekey:key | STOREDIST storedistkey:key)]",
        group: "geo",
        ..zset_cmd(Handler::Engine(georadiusbymember))
    },
    CommandSpec {
        name: "georadiusbymember_ro",
        arity: -5,
        flags: Flags::READONLY,
        acl: &["@read", "@geo", "@slow"],
        key_specs: &[key_at(1, &["RO", "ACCESS"])],
        summary: "Finds members of a geo set within a radius of one of its members (older form of GEOSEARCH).",
        since: "3.2.10",
        complexity: "O(N+log(M)), N the members in the searched cells, M the members found.",
        syntax: "key:key member:string radius:double unit@(M | KM | FT | MI) [WITHCOORD] [WITHDIST] [WITHHASH] \
                 [count-block@(COUNT count:integer [ANY])] [order@(ASC | DESC)]",
        group: "geo",
        ..zset_cmd(Handler::Engine(georadiusbymember_ro))
    },
    CommandSpec {
        name: "geosearch",
        arity: -7,
        flags: Flags::READONLY,
        acl: &["@read", "@geo", "@slow"],
        key_specs: &[key_at(1, &["RO", "ACCESS"])],
        summary: "Finds members of a geo set within a circle or a box around a member or a point.",
        since: "6.2.0",
        complexity: "O(N+log(M)), N the members in the searched cells, M the members found.",
        syntax: "key:key from@(FROMMEMBER member:string | FROMLONLAT longitude:double latitude:double) \
                 by@(circle@(BYRADIUS radius:double unit@(M | KM | FT | MI)) | box@(BYBOX width:double \
                 height:double unit@(M | KM | FT | MI))) [order@(ASC | DESC)] \
                 [count-block@(COUNT count:integer [ANY])] [WITHCOORD] [WITHDIST] [WITHHASH]",
        group: "geo",
        ..zset_cmd(Handler::Engine(geosearch))
    },
    CommandSpec {
        name: "geosearchstore",
        arity: -8,
        flags: Flags::WRITE.and(Flags::DENYOOM),
        first_key: 1,
        last_key: 2,
        step: 1,
        acl: &["@write", "@geo", "@slow"],
        key_specs: &[key_at(1, &["OW", "UPDATE"]), key_at(2, &["RO", "ACCESS"])],
        summary: "Stores the members of a geo set within a circle or a box around a member or a point.",
        since: "6.2.0",
        complexity: "O(N+log(M)), N the members in the searched cells, M the members found.",
        syntax: "destination:key source:key from@(FROMMEMBER member:string | FROMLONLAT longitude:double \
                 latitude:double) by@(circle@(BYRADIUS radius:double unit@(M | KM | FT | MI)) | \
                 box@(BYBOX width:double height:double unit@(M | KM | FT | MI))) [order@(ASC | DESC)] \
                 [count-block@(COUNT count:integer [ANY])] [STOREDIST]",
        group: "geo",
        ..zset_cmd(Handler::Engine(geosearchstore))
    },
];

/// GEORADIUS' keys: the source, and a STORE or STOREDIST destination among the options.
const STORE_SPECS_6: &[KeySpec] = &[
    key_at(1, &["RO", "ACCESS"]),
    KeySpec { begin: BeginSearch::Keyword { keyword: "STORE", startfrom: 6 }, ..key_at(0, &["OW", "UPDATE"]) },
    KeySpec { begin: BeginSearch::Keyword { keyword: "STOREDIST", startfrom: 6 }, ..key_at(0, &["OW", "UPDATE"]) },
];

/// GEORADIUSBYMEMBER's keys, as GEORADIUS' with the options one argument earlier.
const STORE_SPECS_5: &[KeySpec] = &[
    key_at(1, &["RO", "ACCESS"]),
    KeySpec { begin: BeginSearch::Keyword { keyword: "STORE", startfrom: 5 }, ..key_at(0, &["OW", "UPDATE"]) },
    KeySpec { begin: BeginSearch::Keyword { keyword: "STOREDIST", startfrom: 5 }, ..key_at(0, &["OW", "UPDATE"]) },
];

/// Spreads the 32 bits of `v` over the even bits of a u64 (bit i to bit 2i).
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bits of `v` into a u32 (the inverse of [`spread`]).
fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    u32::try_from(x).unwrap_or(u32::MAX)
}

/// Whether a longitude/latitude pair lies within the limits a geo set accepts.
fn in_limits(lon: f64, lat: f64) -> bool {
    (LON_MIN..=LON_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat)
}

/// The `STEP`-bit geohash of a pair over the given latitude range (longitudes always span
/// -180..180): each coordinate's offset in its range, scaled to 2^STEP and truncated, the
/// latitude's bits on the even positions. `None` outside the limits or the range.
fn encode(lon: f64, lat: f64, lat_range: (f64, f64)) -> Option<u64> {
    encode_at(lon, lat, lat_range, STEP)
}

/// [`encode`] with `step` bits per coordinate.
fn encode_at(lon: f64, lat: f64, lat_range: (f64, f64), step: u32) -> Option<u64> {
    if !in_limits(lon, lat) || lat < lat_range.0 || lat > lat_range.1 {
        return None;
    }
    let cells = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.0) / (lat_range.1 - lat_range.0) * cells;
    let lon_offset = (lon - LON_MIN) / (LON_MAX - LON_MIN) * cells;
    Some(spread(lat_offset as u32) | (spread(lon_offset as u32) << 1))
}

/// The cell a `step`-bit hash names: (longitude min, max, latitude min, max).
#[derive(Debug, Clone, Copy)]
struct Cell {
    lon_min: f64,
    lon_max: f64,
    lat_min: f64,
    lat_max: f64,
}

fn cell(bits: u64, step: u32) -> Cell {
    let (lat_cell, lon_cell) = (f64::from(squash(bits)), f64::from(squash(bits >> 1)));
    let cells = (1u64 << step) as f64;
    let (lat_scale, lon_scale) = (LAT_MAX - LAT_MIN, LON_MAX - LON_MIN);
    Cell {
        lat_min: LAT_MIN + (lat_cell / cells) * lat_scale,
        lat_max: LAT_MIN + ((lat_cell + 1.0) / cells) * lat_scale,
        lon_min: LON_MIN + (lon_cell / cells) * lon_scale,
        lon_max: LON_MIN + ((lon_cell + 1.0) / cells) * lon_scale,
    }
}

/// The centre of the cell a stored score names, clamped to the limits: (longitude, latitude).
fn decode(score: f64) -> (f64, f64) {
    // As C converts a double to an unsigned 64-bit integer on x86-64: a negative score wraps,
    // one of 2^64 or more (infinity too) gives 0.
    let bits = if score < 0.0 {
        (score as i64) as u64
    } else if score >= 18_446_744_073_709_551_616.0 {
        0
    } else {
        score as u64
    };
    let c = cell(bits, STEP);
    (((c.lon_min + c.lon_max) / 2.0).clamp(LON_MIN, LON_MAX), ((c.lat_min + c.lat_max) / 2.0).clamp(LAT_MIN, LAT_MAX))
}

/// Great-circle distance in metres between two (longitude, latitude) points, haversine.
fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let rad = std::f64::consts::PI / 180.0;
    let v = ((lon2 * rad - lon1 * rad) / 2.0).sin();
    if v == 0.0 {
        // Same meridian: the latitudes' difference alone.
        return EARTH_RADIUS_M * (lat2 * rad - lat1 * rad).abs();
    }
    let (lat1r, lat2r) = (lat1 * rad, lat2 * rad);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// Metres per unit named by `raw` (m, km, ft, mi; any case).
fn unit_metres(raw: &[u8]) -> Result<f64, CmdError> {
    match () {
        _ if is_token(raw, "m") => Ok(1.0),
        _ if is_token(raw, "km") => Ok(1000.0),
        _ if is_token(raw, "ft") => Ok(0.3048),
        _ if is_token(raw, "mi") => Ok(1609.34),
        _ => Err(CmdError::full("ERR unsupported unit provided. please use M, KM, FT, MI")),
    }
}

/// A distance with four decimals, rounded to nearest (ties to even), as Redis writes it.
fn distance_reply(d: f64) -> Reply {
    let scaled = (d * 10_000.0).round_ties_even();
    let n = scaled.abs() as u64;
    let sign = if scaled < 0.0 { "-" } else { "" };
    Reply::Bulk(Bytes::from(format!("{sign}{}.{:04}", n / 10_000, n % 10_000)))
}

/// `GEOADD key [NX | XX] [CH] longitude latitude member ...`
fn geoadd(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let mut zadd_args = vec![Bytes::from_static(b"zadd"), key.clone()];
    let (mut nx, mut xx) = (false, false);
    let mut i = 2;
    while let Some(a) = args.get(i) {
        match () {
            _ if is_token(a, "nx") => nx = true,
            _ if is_token(a, "xx") => xx = true,
            _ if is_token(a, "ch") => {}
            _ => break,
        }
        zadd_args.push(a.clone());
        i += 1;
    }
    let rest = args.get(i..).unwrap_or(&[]);
    if rest.len() % 3 != 0 || (nx && xx) {
        return Err(CmdError::SYNTAX);
    }
    for triple in rest.chunks_exact(3) {
        let [lon, lat, member] = triple else { continue };
        let (lon, lat) = lon_lat(lon, lat)?;
        let bits = encode(lon, lat, (LAT_MIN, LAT_MAX)).unwrap_or(0);
        zadd_args.push(Bytes::from((bits as f64).to_string()));
        zadd_args.push(member.clone());
    }
    zset::zadd(engine, ctx, &zadd_args)
}

/// `GEOPOS key [member ...]`: each member's position, or a null array for a missing one.
fn geopos(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let z = zset::read_zset(engine, ctx, arg(args, 1)?)?;
    let members = args.get(2..).unwrap_or(&[]);
    Ok(Reply::Array(
        members
            .iter()
            .map(|m| match z.and_then(|z| z.score(m)) {
                Some(score) => {
                    let (lon, lat) = decode(score);
                    Reply::Array(vec![Reply::Double(lon), Reply::Double(lat)])
                }
                None => Reply::NullArray,
            })
            .collect(),
    ))
}

/// `GEODIST key member1 member2 [M | KM | FT | MI]`
fn geodist(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let per_unit = match args.len() {
        5 => unit_metres(arg(args, 4)?)?,
        n if n > 5 => return Err(CmdError::SYNTAX),
        _ => 1.0,
    };
    let Some(z) = zset::read_zset(engine, ctx, arg(args, 1)?)? else { return Ok(Reply::Null) };
    let (Some(a), Some(b)) = (z.score(arg(args, 2)?), z.score(arg(args, 3)?)) else { return Ok(Reply::Null) };
    let ((lon1, lat1), (lon2, lat2)) = (decode(a), decode(b));
    Ok(distance_reply(distance(lon1, lat1, lon2, lat2) / per_unit))
}

/// `GEOHASH key [member ...]`: each member's 11-character geohash, or nil.
fn geohash(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let z = zset::read_zset(engine, ctx, arg(args, 1)?)?;
    let members = args.get(2..).unwrap_or(&[]);
    Ok(Reply::Array(
        members
            .iter()
            .map(|m| match z.and_then(|z| z.score(m)) {
                Some(score) => {
                    let (lon, lat) = decode(score);
                    let bits = encode(lon, lat, (-90.0, 90.0)).unwrap_or(0);
                    let text: Vec<u8> = (0..11u32)
                        .map(|i| {
                            let index = if i == 10 { 0 } else { (bits >> (52 - (i + 1) * 5)) & 0x1f };
                            ALPHABET.get(index as usize).copied().unwrap_or(b'0')
                        })
                        .collect();
                    Reply::Bulk(Bytes::from(text))
                }
                None => Reply::Null,
            })
            .collect(),
    ))
}

// ---------------------------------------------------------------------------------------------
// The searches: GEORADIUS, GEORADIUSBYMEMBER (and _RO), GEOSEARCH, GEOSEARCHSTORE

/// Which search command runs (they share one parser, as in Redis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Search {
    Radius { store: bool },
    Member { store: bool },
    Shape { store: bool },
}

/// The area searched, in the unit given.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Circle { radius: f64 },
    Box { width: f64, height: f64 },
}

/// A search: its centre, its shape, and metres per unit.
#[derive(Debug, Clone, Copy)]
struct Query {
    lon: f64,
    lat: f64,
    shape: Shape,
    per_unit: f64,
}

/// A member found.
#[derive(Debug, Clone)]
struct Found {
    member: Bytes,
    score: f64,
    lon: f64,
    lat: f64,
    /// Metres from the centre.
    dist: f64,
}

fn georadius(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    search(engine, ctx, args, Search::Radius { store: true })
}

fn georadius_ro(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    search(engine, ctx, args, Search::Radius { store: false })
}

fn georadiusbymember(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    search(engine, ctx, args, Search::Member { store: true })
}

fn georadiusbymember_ro(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    search(engine, ctx, args, Search::Member { store: false })
}

fn geosearch(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    search(engine, ctx, args, Search::Shape { store: false })
}

fn geosearchstore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    search(engine, ctx, args, Search::Shape { store: true })
}

/// A double argument, or Redis' error `msg` when it is none.
fn double_or(raw: &[u8], msg: &'static str) -> Result<f64, CmdError> {
    crate::util::parse_f64(raw).ok_or(CmdError::full(msg))
}

/// A longitude and a latitude within the limits.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), CmdError> {
    let (lon, lat) = (zset::parse_score(lon)?, zset::parse_score(lat)?);
    if !in_limits(lon, lat) {
        return Err(CmdError::owned(format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}")));
    }
    Ok((lon, lat))
}

/// A radius and its unit: (radius, metres per unit).
fn radius(raw: &[u8], unit: &[u8]) -> Result<(f64, f64), CmdError> {
    let r = double_or(raw, "ERR need numeric radius")?;
    if r < 0.0 {
        return Err(CmdError::full("ERR radius cannot be negative"));
    }
    Ok((r, unit_metres(unit)?))
}

/// A stored member's position, or Redis' error when the set has no such member.
fn member_position(z: &ZSet, member: &[u8]) -> Result<(f64, f64), CmdError> {
    z.score(member).map(decode).ok_or(CmdError::full("ERR could not decode requested zset member"))
}

/// What the options asked for.
#[derive(Debug, Default)]
struct Options {
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    any: bool,
    /// 1: ascending distance, -1: descending, 0: as found.
    order: i8,
    count: usize,
    store: Option<Bytes>,
    store_dist: bool,
}

fn search(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], kind: Search) -> Result<Reply, CmdError> {
    let src_index = if kind == (Search::Shape { store: true }) { 2 } else { 1 };
    let z = zset::read_zset(engine, ctx, arg(args, src_index)?)?;
    let mut o = Options::default();
    let (mut centre, mut shape, mut per_unit) = (None, None, 1.0);
    let base = match kind {
        Search::Radius { .. } => {
            centre = Some(lon_lat(arg(args, 2)?, arg(args, 3)?)?);
            let (r, unit) = radius(arg(args, 4)?, arg(args, 5)?)?;
            (shape, per_unit) = (Some(Shape::Circle { radius: r }), unit);
            6
        }
        Search::Member { .. } => {
            // Without the set, the options are still parsed (the reply depends on STORE).
            if let Some(z) = z {
                centre = Some(member_position(z, arg(args, 2)?)?);
                let (r, unit) = radius(arg(args, 3)?, arg(args, 4)?)?;
                (shape, per_unit) = (Some(Shape::Circle { radius: r }), unit);
            }
            5
        }
        Search::Shape { store } => {
            if store {
                o.store = Some(arg(args, 1)?.clone());
                3
            } else {
                2
            }
        }
    };
    let searching = matches!(kind, Search::Shape { .. });
    let may_store = matches!(kind, Search::Radius { store: true } | Search::Member { store: true });
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) = (false, false, false, false);
    let rest = args.get(base..).unwrap_or(&[]);
    let mut i = 0;
    while let Some(word) = rest.get(i) {
        let left = rest.len() - i - 1;
        match () {
            _ if is_token(word, "withdist") => o.with_dist = true,
            _ if is_token(word, "withhash") => o.with_hash = true,
            _ if is_token(word, "withcoord") => o.with_coord = true,
            _ if is_token(word, "any") => o.any = true,
            _ if is_token(word, "asc") => o.order = 1,
            _ if is_token(word, "desc") => o.order = -1,
            _ if is_token(word, "count") && left >= 1 => {
                let n = crate::util::int_arg(arg(rest, i + 1)?)?;
                if n <= 0 {
                    return Err(CmdError::full("ERR COUNT must be > 0"));
                }
                o.count = usize::try_from(n).unwrap_or(usize::MAX);
                i += 1;
            }
            _ if (is_token(word, "store") || is_token(word, "storedist")) && left >= 1 && may_store => {
                o.store = Some(arg(rest, i + 1)?.clone());
                o.store_dist = is_token(word, "storedist");
                i += 1;
            }
            _ if is_token(word, "storedist") && kind == (Search::Shape { store: true }) => o.store_dist = true,
            _ if is_token(word, "frommember") && left >= 1 && searching && !from_lonlat => {
                if let Some(z) = z {
                    centre = Some(member_position(z, arg(rest, i + 1)?)?);
                }
                from_member = true;
                i += 1;
            }
            _ if is_token(word, "fromlonlat") && left >= 2 && searching && !from_member => {
                centre = Some(lon_lat(arg(rest, i + 1)?, arg(rest, i + 2)?)?);
                from_lonlat = true;
                i += 2;
            }
            _ if is_token(word, "byradius") && left >= 2 && searching && !by_box => {
                let (r, unit) = radius(arg(rest, i + 1)?, arg(rest, i + 2)?)?;
                (shape, per_unit) = (Some(Shape::Circle { radius: r }), unit);
                by_radius = true;
                i += 2;
            }
            _ if is_token(word, "bybox") && left >= 3 && searching && !by_radius => {
                let width = double_or(arg(rest, i + 1)?, "ERR need numeric width")?;
                let height = double_or(arg(rest, i + 2)?, "ERR need numeric height")?;
                if width < 0.0 || height < 0.0 {
                    return Err(CmdError::full("ERR height or width cannot be negative"));
                }
                per_unit = unit_metres(arg(rest, i + 3)?)?;
                shape = Some(Shape::Box { width, height });
                by_box = true;
                i += 3;
            }
            _ => return Err(CmdError::SYNTAX),
        }
        i += 1;
    }
    if o.store.is_some() && (o.with_dist || o.with_hash || o.with_coord) {
        return Err(CmdError::full(if searching {
            "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        } else {
            "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        }));
    }
    let name = String::from_utf8_lossy(arg(args, 0)?).into_owned();
    if searching && !(from_member || from_lonlat) {
        return Err(CmdError::owned(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if searching && !(by_radius || by_box) {
        return Err(CmdError::owned(format!("ERR exactly one of BYRADIUS and BYBOX can be specified for {name}")));
    }
    if o.any && o.count == 0 {
        return Err(CmdError::full("ERR the ANY argument requires COUNT argument"));
    }
    let (Some(z), Some((lon, lat)), Some(shape)) = (z, centre, shape) else {
        // No source set: an empty result (a STORE destination is deleted).
        return match o.store {
            Some(dest) => zset::store_result(engine, ctx, &dest, ZSet::new(), KeyEvent::GeoSearchStore),
            None => Ok(Reply::Array(Vec::new())),
        };
    };
    if o.count != 0 && o.order == 0 && !o.any {
        o.order = 1;
    }
    let q = Query { lon, lat, shape, per_unit };
    let mut found = members_in(z, &q, if o.any { o.count } else { 0 });
    if found.is_empty() && o.store.is_none() {
        return Ok(Reply::Array(Vec::new()));
    }
    if o.order != 0 {
        found.sort_by(|a, b| {
            let ord = a.dist.partial_cmp(&b.dist).unwrap_or(std::cmp::Ordering::Equal);
            if o.order > 0 {
                ord
            } else {
                ord.reverse()
            }
        });
    }
    if o.count != 0 {
        found.truncate(o.count);
    }
    if let Some(dest) = o.store {
        let mut out = ZSet::new();
        for f in found {
            out.insert(f.member, if o.store_dist { f.dist / per_unit } else { f.score });
        }
        let event = if searching { KeyEvent::GeoSearchStore } else { KeyEvent::GeoRadiusStore };
        return zset::store_result(engine, ctx, &dest, out, event);
    }
    let extras = o.with_dist || o.with_hash || o.with_coord;
    Ok(Reply::Array(
        found
            .into_iter()
            .map(|f| {
                if !extras {
                    return Reply::Bulk(f.member);
                }
                let mut item = vec![Reply::Bulk(f.member)];
                if o.with_dist {
                    item.push(distance_reply(f.dist / per_unit));
                }
                if o.with_hash {
                    item.push(Reply::Integer(f.score as i64));
                }
                if o.with_coord {
                    item.push(Reply::Array(vec![Reply::Double(f.lon), Reply::Double(f.lat)]));
                }
                Reply::Array(item)
            })
            .collect(),
    ))
}

/// How many bits per coordinate the cells searched around a point have, for a search reaching
/// `metres` from it: the finest level whose cells are still about as large as the search,
/// coarser near the poles.
fn steps_for(metres: f64, lat: f64) -> u32 {
    const MERCATOR_MAX: f64 = 20037726.37;
    if metres == 0.0 {
        return STEP;
    }
    let (mut range, mut step) = (metres, 1i32);
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    u32::try_from(step.clamp(1, STEP as i32)).unwrap_or(1)
}

/// A cell moved one column east (+1) or west (-1) at `step` bits: the longitude bits (odd
/// positions) counted up or down, the latitude bits kept.
fn move_lon(bits: u64, step: u32, d: i8) -> u64 {
    let (x, y) = (bits & 0xaaaa_aaaa_aaaa_aaaa, bits & 0x5555_5555_5555_5555);
    let zz = 0x5555_5555_5555_5555u64 >> (64 - step * 2);
    let x = if d > 0 { x.wrapping_add(zz + 1) } else { (x | zz).wrapping_sub(zz + 1) };
    (x & (0xaaaa_aaaa_aaaa_aaaau64 >> (64 - step * 2))) | y
}

/// A cell moved one row north (+1) or south (-1): the latitude bits (even positions).
fn move_lat(bits: u64, step: u32, d: i8) -> u64 {
    let (x, y) = (bits & 0xaaaa_aaaa_aaaa_aaaa, bits & 0x5555_5555_5555_5555);
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> (64 - step * 2);
    let y = if d > 0 { y.wrapping_add(zz + 1) } else { (y | zz).wrapping_sub(zz + 1) };
    x | (y & (0x5555_5555_5555_5555u64 >> (64 - step * 2)))
}

/// The cells to search for `q`, in Redis' order: the centre's, then north, south, east, west,
/// north-east, north-west, south-east, south-west; `None` for a neighbour the search cannot
/// reach.
fn cells_for(q: &Query) -> ([Option<u64>; 9], u32) {
    let rad = std::f64::consts::PI / 180.0;
    let (half_h, half_w, reach) = match q.shape {
        Shape::Circle { radius } => (radius, radius, radius),
        Shape::Box { width, height } => {
            (height / 2.0, width / 2.0, ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt())
        }
    };
    let (half_h, half_w) = (q.per_unit * half_h, q.per_unit * half_w);
    let lat_delta = (half_h / EARTH_RADIUS_M) / rad;
    let lon_delta_top = (half_w / EARTH_RADIUS_M / ((q.lat + lat_delta) * rad).cos()) / rad;
    let lon_delta_bottom = (half_w / EARTH_RADIUS_M / ((q.lat - lat_delta) * rad).cos()) / rad;
    let lon_delta = if q.lat < 0.0 { lon_delta_bottom } else { lon_delta_top };
    let (min_lon, max_lon) = (q.lon - lon_delta, q.lon + lon_delta);
    let (min_lat, max_lat) = (q.lat - lat_delta, q.lat + lat_delta);
    let mut step = steps_for(reach * q.per_unit, q.lat);
    let around = |step: u32| {
        let hash = encode_at(q.lon, q.lat, (LAT_MIN, LAT_MAX), step).unwrap_or(0);
        [
            hash,
            move_lat(hash, step, 1),
            move_lat(hash, step, -1),
            move_lon(hash, step, 1),
            move_lon(hash, step, -1),
            move_lat(move_lon(hash, step, 1), step, 1),
            move_lat(move_lon(hash, step, -1), step, 1),
            move_lat(move_lon(hash, step, 1), step, -1),
            move_lat(move_lon(hash, step, -1), step, -1),
        ]
    };
    let mut n = around(step);
    // Cells too small to reach the search's edges: one level coarser.
    let too_small = cell(n[1], step).lat_max < max_lat
        || cell(n[2], step).lat_min > min_lat
        || cell(n[3], step).lon_max < max_lon
        || cell(n[4], step).lon_min > min_lon;
    if step > 1 && too_small {
        step -= 1;
        n = around(step);
    }
    let mut cells = n.map(Some);
    if step >= 2 {
        let centre = cell(n[0], step);
        let mut exclude = |indexes: [usize; 3]| {
            for i in indexes {
                if let Some(c) = cells.get_mut(i) {
                    *c = None;
                }
            }
        };
        if centre.lat_min < min_lat {
            exclude([2, 8, 7]);
        }
        if centre.lat_max > max_lat {
            exclude([1, 5, 6]);
        }
        if centre.lon_min < min_lon {
            exclude([4, 8, 6]);
        }
        if centre.lon_max > max_lon {
            exclude([3, 7, 5]);
        }
    }
    (cells, step)
}

/// The members of `z` within `q`, cell by cell in Redis' order (a cell the same as the one
/// searched before it is skipped), each cell's in score order; at most `limit` (0: all).
fn members_in(z: &ZSet, q: &Query, limit: usize) -> Vec<Found> {
    let (cells, step) = cells_for(q);
    let mut found = Vec::new();
    // As Redis: a cell equal to the last one searched is skipped, unless that was the centre's.
    let mut last = 0usize;
    for (i, hash) in cells.into_iter().enumerate() {
        let Some(hash) = hash else { continue };
        if last != 0 && cells.get(last).copied().flatten() == Some(hash) {
            continue;
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
        let shift = 52 - step * 2;
        let (min, max) = ((hash << shift) as f64, ((hash + 1) << shift) as f64);
        for e in z.score_range(ScoreBound { value: min, exclusive: false }, ScoreBound { value: max, exclusive: true })
        {
            let (lon, lat) = decode(e.score);
            let dist = match q.shape {
                Shape::Circle { radius } => {
                    let d = distance(q.lon, q.lat, lon, lat);
                    if d > radius * q.per_unit {
                        continue;
                    }
                    d
                }
                Shape::Box { width, height } => {
                    let rad = std::f64::consts::PI / 180.0;
                    if EARTH_RADIUS_M * (q.lat * rad - lat * rad).abs() > height * q.per_unit / 2.0
                        || distance(lon, lat, q.lon, lat) > width * q.per_unit / 2.0
                    {
                        continue;
                    }
                    distance(q.lon, q.lat, lon, lat)
                }
            };
            found.push(Found { member: e.member.clone(), score: e.score, lon, lat, dist });
            if limit != 0 && found.len() >= limit {
                break;
            }
        }
        last = i;
    }
    found
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn spreading_and_squashing_are_inverse() {
        for v in [0u32, 1, 2, 0x3ff_ffff, 0xdead_beef, u32::MAX] {
            assert_eq!(squash(spread(v)), v);
            assert_eq!(spread(v) & 0xaaaa_aaaa_aaaa_aaaa, 0);
        }
    }

    #[test]
    fn a_position_reads_back_as_its_cell_centre() {
        let bits = encode(13.361389, 38.115556, (LAT_MIN, LAT_MAX)).unwrap();
        let (lon, lat) = decode(bits as f64);
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5, "{lon} {lat}");
        assert!(encode(180.1, 0.0, (LAT_MIN, LAT_MAX)).is_none());
        assert!(encode(0.0, 85.06, (LAT_MIN, LAT_MAX)).is_none());
    }

    #[test]
    fn distances_are_written_with_four_decimals() {
        assert_eq!(distance_reply(0.0), Reply::Bulk(Bytes::from_static(b"0.0000")));
        assert_eq!(distance_reply(166274.15156960033), Reply::Bulk(Bytes::from_static(b"166274.1516")));
        assert_eq!(distance_reply(0.00004), Reply::Bulk(Bytes::from_static(b"0.0000")));
    }
}
