//! Function libraries (FUNCTION LOAD, FCALL) as data: each library's name and code.
//!
//! The engine keeps libraries as it keeps keys: what they are, changed only through
//! [`crate::effect::Effect::Library`], [`crate::effect::Effect::LibraryDeleted`] and
//! [`crate::effect::Effect::LibrariesFlushed`], written to snapshots (RDB opcode
//! `FUNCTION2`) and to FUNCTION DUMP payloads in Redis' format. Compiling and running the code
//! is the server's (it holds the Lua VM); the engine needs only the library's name, which is
//! in the code's first line: `#!<engine> name=<name>`.
//!
//! ```text
//!  payload := (0xF5 rdb-string(code))* version:u16le crc64:u64le     (FUNCTION DUMP / RESTORE)
//! ```

use crate::rdb::crc64::crc64;
use crate::rdb::io::{Reader, Writer};
use bytes::Bytes;
use std::collections::BTreeMap;

/// The RDB opcode before each library (Redis' `RDB_OPCODE_FUNCTION2`).
pub const OP_FUNCTION2: u8 = 0xF5;
/// Redis 7.0's release candidates' format (`RDB_OPCODE_FUNCTION_PRE_GA`), refused.
pub const OP_FUNCTION_PRE_GA: u8 = 0xF6;
/// The RDB version a FUNCTION DUMP payload is stamped with (Redis 7.4 / 8.x's).
const PAYLOAD_VERSION: u16 = 12;

/// Redis' text for a library or function name that is not `[A-Za-z0-9_]+`.
pub const BAD_NAME: &str =
    "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Whether `name` is a valid library or function name: letters, digits, underscores, not empty.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// What a library's first line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The engine after `#!` (`lua`), as written.
    pub engine: String,
    /// The library's name, as written (not yet checked with [`valid_name`]).
    pub name: String,
    /// Where the code after the first line starts (at its line break, so line numbers stay).
    pub body_start: usize,
}

/// Read a library's first line (`#!lua name=mylib`), with Redis' error texts.
pub fn parse_meta(code: &[u8]) -> Result<Meta, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let parts = crate::util::split_args(code.get(..end).unwrap_or_default()).map_err(|_| "Invalid library metadata")?;
    let Some(first) = parts.first() else {
        return Err("Invalid library metadata".into());
    };
    let engine = String::from_utf8_lossy(first.get(2..).unwrap_or_default()).into_owned();
    let mut name = None;
    for part in parts.iter().skip(1) {
        if part.len() >= 5 && part.get(..5).is_some_and(|p| p.eq_ignore_ascii_case(b"name=")) {
            if name.is_some() {
                return Err("Invalid metadata value, name argument was given multiple times".into());
            }
            name = Some(String::from_utf8_lossy(part.get(5..).unwrap_or_default()).into_owned());
            continue;
        }
        return Err(format!("Invalid metadata value given: {}", String::from_utf8_lossy(part)));
    }
    let name = name.ok_or("Library name was not given")?;
    Ok(Meta { engine, name, body_start: end })
}

/// One library: its name as its code gives it, and its code (first line included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    /// The name, as written.
    pub name: String,
    /// The whole code, as FUNCTION LOAD received it.
    pub code: Bytes,
}

/// The libraries, by name (compared with case, as Redis compares library names; function
/// names compare without).
#[derive(Debug, Clone, Default)]
pub struct Libraries {
    by_name: BTreeMap<String, Library>,
    /// Changed on every change: the server rebuilds its function VM when it differs from the
    /// one it built from.
    version: u64,
}

impl Libraries {
    /// The library `name`.
    pub fn get(&self, name: &str) -> Option<&Library> {
        self.by_name.get(name)
    }

    /// Every library, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Library> {
        self.by_name.values()
    }

    /// How many libraries there are.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// No libraries.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// A number that changes whenever the libraries do.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Add `code` as the library its first line names, replacing one of that name. The error
    /// when the first line names none.
    pub fn set(&mut self, code: Bytes) -> Result<(), String> {
        let meta = parse_meta(&code)?;
        self.by_name.insert(meta.name.clone(), Library { name: meta.name, code });
        self.version += 1;
        Ok(())
    }

    /// Remove the library `name`; whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        let gone = self.by_name.remove(name).is_some();
        self.version += 1;
        gone
    }

    /// Remove every library.
    pub fn clear(&mut self) {
        self.by_name.clear();
        self.version += 1;
    }

    /// The libraries of a snapshot or payload instead of these; the first error (and nothing
    /// changed) when one's first line names no library.
    pub fn replace_with(&mut self, codes: Vec<Bytes>) -> Result<(), String> {
        let mut next = Libraries { by_name: BTreeMap::new(), version: self.version + 1 };
        for code in codes {
            next.set(code)?;
        }
        next.version = self.version + 1;
        *self = next;
        Ok(())
    }

    /// FUNCTION DUMP's payload of these libraries.
    pub fn dump_payload(&self) -> Vec<u8> {
        let mut w = Writer::default();
        for lib in self.by_name.values() {
            w.u8(OP_FUNCTION2);
            w.raw_string(&lib.code);
        }
        w.raw(&PAYLOAD_VERSION.to_le_bytes());
        let crc = crc64(0, &w.buf);
        w.raw(&crc.to_le_bytes());
        w.buf
    }
}

/// The libraries' code in a FUNCTION DUMP payload, or Redis' error text.
pub fn parse_payload(payload: &[u8]) -> Result<Vec<Bytes>, String> {
    let body =
        crate::rdb::verify_footer(payload).map_err(|_| "DUMP payload version or checksum are wrong".to_string())?;
    let mut r = Reader::new(body);
    let mut out = Vec::new();
    while r.remaining() > 0 {
        let op = r.u8().map_err(|_| "can not read data type".to_string())?;
        if op == OP_FUNCTION_PRE_GA {
            return Err("Pre-GA function format not supported".into());
        }
        if op != OP_FUNCTION2 {
            return Err("given type is not a function".into());
        }
        let code = r.string().map_err(|_| "failed loading the given functions payload".to_string())?;
        out.push(Bytes::from(code));
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn first_lines_read_as_redis_reads_them() {
        let m = parse_meta(b"#!lua name=mylib\nreturn 1").unwrap();
        assert_eq!((m.engine.as_str(), m.name.as_str(), m.body_start), ("lua", "mylib", 16));
        assert_eq!(parse_meta(b"#!lua name=\"foo\"\n").unwrap().name, "foo");
        assert_eq!(parse_meta(b"#!LUA NAME=x\n").unwrap().name, "x");
        assert_eq!(parse_meta(b"#! name=test\n").unwrap().engine, "");
        assert_eq!(parse_meta(b"return 1").unwrap_err(), "Missing library metadata");
        assert_eq!(parse_meta(b"#!lua name=x").unwrap_err(), "Invalid library metadata");
        assert_eq!(parse_meta(b"#!lua name=\"x\n").unwrap_err(), "Invalid library metadata");
        assert_eq!(parse_meta(b"#!lua\n").unwrap_err(), "Library name was not given");
        assert_eq!(parse_meta(b"#!lua name=test foo=bar\n").unwrap_err(), "Invalid metadata value given: foo=bar");
        assert_eq!(
            parse_meta(b"#!lua name=foo name=bar\n").unwrap_err(),
            "Invalid metadata value, name argument was given multiple times"
        );
        assert!(valid_name(b"a_1Z") && !valid_name(b"") && !valid_name(b"a-b") && !valid_name(b"bad\\0x"));
    }

    #[test]
    fn payloads_round_trip_and_bad_ones_are_refused() {
        let mut libs = Libraries::default();
        libs.set(Bytes::from_static(b"#!lua name=b\nredis.register_function('f', function() return 1 end)")).unwrap();
        libs.set(Bytes::from_static(b"#!lua name=A\nredis.register_function('g', function() return 2 end)")).unwrap();
        let payload = libs.dump_payload();
        let codes = parse_payload(&payload).unwrap();
        assert_eq!(codes.len(), 2);
        let mut back = Libraries::default();
        back.replace_with(codes).unwrap();
        assert_eq!(back.iter().map(|l| l.name.clone()).collect::<Vec<_>>(), ["A", "b"]);
        assert!(back.get("A").is_some() && back.get("b").is_some() && back.get("a").is_none());
        assert_eq!(parse_payload(b"bad_payload").unwrap_err(), "DUMP payload version or checksum are wrong");
        let mut flipped = payload.clone();
        flipped[3] ^= 1;
        assert!(parse_payload(&flipped).is_err());
        // A key's payload is not a function's.
        let mut w = Writer::default();
        w.u8(0);
        w.raw_string(b"v");
        w.raw(&12u16.to_le_bytes());
        let crc = crc64(0, &w.buf);
        w.raw(&crc.to_le_bytes());
        assert_eq!(parse_payload(&w.buf).unwrap_err(), "given type is not a function");
        assert_eq!(Libraries::default().dump_payload().len(), 10);
    }
}
