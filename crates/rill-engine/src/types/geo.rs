//! Geospatial commands on sorted sets: GEOADD, GEOPOS, GEODIST, GEOHASH. A position is stored
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
//!
//! Costs: GEOADD O(log N) per member, GEOPOS / GEOHASH O(1) per member, GEODIST O(1).

use super::zset::{self, zset_cmd};
use super::{arg, is_token};
use crate::command::{key_at, CommandSpec, Flags, Handler};
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
    if !in_limits(lon, lat) || lat < lat_range.0 || lat > lat_range.1 {
        return None;
    }
    let cells = (1u64 << STEP) as f64;
    let lat_offset = (lat - lat_range.0) / (lat_range.1 - lat_range.0) * cells;
    let lon_offset = (lon - LON_MIN) / (LON_MAX - LON_MIN) * cells;
    Some(spread(lat_offset as u32) | (spread(lon_offset as u32) << 1))
}

/// The centre of the cell a stored score names, clamped to the limits: (longitude, latitude).
fn decode(score: f64) -> (f64, f64) {
    // As C converts a double to an unsigned 64-bit integer on x86-64: a negative score wraps.
    let bits = if score < 0.0 { (score as i64) as u64 } else { score as u64 };
    let (lat_cell, lon_cell) = (f64::from(squash(bits)), f64::from(squash(bits >> 1)));
    let cells = (1u64 << STEP) as f64;
    let (lat_scale, lon_scale) = (LAT_MAX - LAT_MIN, LON_MAX - LON_MIN);
    let lat_min = LAT_MIN + (lat_cell / cells) * lat_scale;
    let lat_max = LAT_MIN + ((lat_cell + 1.0) / cells) * lat_scale;
    let lon_min = LON_MIN + (lon_cell / cells) * lon_scale;
    let lon_max = LON_MIN + ((lon_cell + 1.0) / cells) * lon_scale;
    (((lon_min + lon_max) / 2.0).clamp(LON_MIN, LON_MAX), ((lat_min + lat_max) / 2.0).clamp(LAT_MIN, LAT_MAX))
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
        let lon = zset::parse_score(lon)?;
        let lat = zset::parse_score(lat)?;
        let Some(bits) = encode(lon, lat, (LAT_MIN, LAT_MAX)) else {
            return Err(CmdError::owned(format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}")));
        };
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
