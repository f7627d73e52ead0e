//! Whole RDB files: the keyspace snapshot that SAVE / BGSAVE write and that the append-only
//! log uses as its base. The layout is Redis' own, so a rill snapshot without 8.6-only stream
//! state loads into Redis 7.2+ and a Redis dump loads into rill (keys of types rill lacks fail
//! the load with a clear error).
//!
//! ```text
//! "REDIS" + 4-digit version
//! 0xFA aux-name aux-value                       (redis-ver, redis-bits, ctime, used-mem, ...)
//! per non-empty database:
//!   0xFE db-index  0xFB keys-count expires-count
//!   per key: [0xFC expire-ms: i64 LE] type key value-body
//! 0xFF  CRC-64 of everything before it (8 bytes LE; 0 = not checksummed)
//! ```

use super::crc64::crc64;
use super::io::{Reader, Writer};
use super::stream::BodyOut;
use super::{decode_value, encode_body, value_type, value_type_7_0, LoadContext, RdbError, VERSION_REDIS_7_0};
use crate::keyspace::{Entry, Value};
use bytes::Bytes;
use std::io::{self, Write};

const OP_AUX: u8 = 0xFA;
/// The aux field holding the group policies of the stream key that follows it.
const POLICY_AUX: &str = "rill-policy";
/// The aux field holding the settings (MAXAGE) of the stream key that follows it.
const STREAM_AUX: &str = "rill-stream";
const OP_RESIZEDB: u8 = 0xFB;
const OP_EXPIRETIME_MS: u8 = 0xFC;
const OP_EXPIRETIME: u8 = 0xFD;
const OP_SELECTDB: u8 = 0xFE;
const OP_EOF: u8 = 0xFF;
/// Opcodes of newer Redis files we skip over (function libraries, slot info, module aux).
const OP_FUNCTION2: u8 = 0xF5;
const OP_MODULE_AUX: u8 = 0xF7;
const OP_IDLE: u8 = 0xF8;
const OP_FREQ: u8 = 0xF9;
const OP_SLOT_INFO: u8 = 0xF4;

/// Streams a snapshot into `out`, checksumming as it goes.
#[derive(Debug)]
pub struct FileWriter<W: Write> {
    out: W,
    crc: u64,
    written: u64,
    buf: Writer,
    now_ms: i64,
    /// The file is for Redis 7.0 (RDB 10): streams in its type.
    redis_7_0: bool,
    /// Streams in rill's own type (a rill replica's full sync: [`FileWriter::rill_streams`]).
    rill_streams: bool,
}

impl<W: Write> FileWriter<W> {
    /// Start a file: magic, version and aux fields. `version` is the RDB version to stamp
    /// (see [`version_for`]).
    pub fn new(out: W, version: u16, now_ms: i64) -> io::Result<FileWriter<W>> {
        FileWriter::with_aux(out, version, now_ms, &[])
    }

    /// [`FileWriter::new`], with more aux fields after the standard ones (a snapshot's
    /// replication identity: `repl-stream-db`, `repl-id`, `repl-offset`, in Redis' order).
    pub fn with_aux(out: W, version: u16, now_ms: i64, extra: &[(String, String)]) -> io::Result<FileWriter<W>> {
        let redis_7_0 = version <= VERSION_REDIS_7_0;
        let mut w =
            FileWriter { out, crc: 0, written: 0, buf: Writer::default(), now_ms, redis_7_0, rill_streams: false };
        w.buf.raw(format!("REDIS{version:04}").as_bytes());
        let standard = [
            ("redis-ver", "8.2.3".to_string()),
            ("redis-bits", "64".to_string()),
            ("ctime", (now_ms / 1000).to_string()),
            ("rill-ver", env!("CARGO_PKG_VERSION").to_string()),
        ];
        let extra = extra.iter().map(|(k, v)| (k.as_str(), v.clone()));
        for (k, v) in standard.into_iter().chain(extra) {
            w.buf.u8(OP_AUX);
            w.buf.string(k.as_bytes());
            w.buf.string(v.as_bytes());
        }
        w.flush_buf()?;
        Ok(w)
    }

    /// Compress strings over 20 bytes with LZF where that saves 4 bytes (`rdbcompression
    /// yes`), from here on.
    pub fn compress_strings(&mut self) {
        self.buf.compress_strings();
    }

    /// Write streams in rill's own type ([`super::stream::TYPE_STREAM_RILL`]) from here on:
    /// only for a rill replica's full sync, never a file (Redis cannot read it).
    pub fn rill_streams(&mut self) {
        self.rill_streams = true;
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        self.crc = crc64(self.crc, &self.buf.buf);
        self.out.write_all(&self.buf.buf)?;
        self.written += self.buf.buf.len() as u64;
        self.buf.buf.clear();
        Ok(())
    }

    /// One function library (its whole code), before the databases as Redis writes them.
    pub fn function(&mut self, code: &[u8]) -> io::Result<()> {
        self.buf.u8(OP_FUNCTION2);
        self.buf.raw_string(code);
        self.node_done()
    }

    /// Start database `db` holding `keys` keys, `expires` of them with a TTL.
    pub fn select_db(&mut self, db: usize, keys: u64, expires: u64) -> io::Result<()> {
        self.buf.u8(OP_SELECTDB);
        self.buf.length(db as u64);
        self.buf.u8(OP_RESIZEDB);
        self.buf.length(keys);
        self.buf.length(expires);
        self.flush_buf()
    }

    /// One key. In a file of version [`VERSION_REDIS_7_0`], a stream with state Redis 7.0
    /// cannot hold (IDMP, XNACKed entries) fails the file with an `InvalidData` error naming
    /// the key.
    pub fn key(&mut self, key: &[u8], entry: &Entry) -> io::Result<()> {
        let rdb_type = if self.rill_streams && matches!(entry.value, Value::Stream(_)) {
            super::stream::TYPE_STREAM_RILL
        } else if self.redis_7_0 {
            value_type_7_0(&entry.value).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("key '{}' cannot be written in RDB 10 for Redis 7.0: {e}", String::from_utf8_lossy(key)),
                )
            })?
        } else {
            value_type(&entry.value)
        };
        // rill's group policies, which Redis' stream type has no place for, go in an aux field
        // right before the key (Redis skips aux fields it does not know, wherever they are).
        if let crate::Value::Stream(s) = &entry.value {
            if let Some(record) = s.policy_record() {
                self.buf.u8(OP_AUX);
                self.buf.string(POLICY_AUX.as_bytes());
                self.buf.string(&record);
            }
            if let Some(settings) = s.settings_aux() {
                self.buf.u8(OP_AUX);
                self.buf.string(STREAM_AUX.as_bytes());
                self.buf.string(&settings);
            }
        }
        if let Some(t) = entry.expire_at_ms() {
            self.buf.u8(OP_EXPIRETIME_MS);
            self.buf.millis(t);
        }
        self.buf.u8(rdb_type);
        self.buf.string(key);
        let now_ms = self.now_ms;
        encode_body(self, &entry.value, rdb_type, now_ms)?;
        self.node_done()
    }

    /// End the file (EOF opcode and checksum) and return the writer and the bytes written.
    pub fn finish(mut self) -> io::Result<(W, u64)> {
        self.buf.u8(OP_EOF);
        self.flush_buf()?;
        let crc = self.crc.to_le_bytes();
        self.out.write_all(&crc)?;
        self.written += 8;
        Ok((self.out, self.written))
    }
}

impl<W: Write> BodyOut for FileWriter<W> {
    fn w(&mut self) -> &mut Writer {
        &mut self.buf
    }

    /// Pass the bytes on once 64 KiB have gathered.
    fn node_done(&mut self) -> io::Result<()> {
        if self.buf.buf.len() >= 64 * 1024 {
            self.flush_buf()?;
        }
        Ok(())
    }
}

/// Check a file's first 9 bytes: `REDIS` and a version this server reads.
fn check_magic(magic: &[u8]) -> Result<(), RdbError> {
    if magic.get(..5) != Some(b"REDIS") {
        return Err(RdbError::Corrupt("not an RDB file (wrong signature)"));
    }
    let version: u16 = std::str::from_utf8(magic.get(5..9).unwrap_or_default())
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or(RdbError::Corrupt("bad RDB version"))?;
    if version > super::RDB_VERSION {
        return Err(RdbError::VersionOrChecksum);
    }
    Ok(())
}

/// The RDB version a file holding these values needs (a file for Redis 7.0 is stamped
/// [`VERSION_REDIS_7_0`] instead, see [`FileWriter::key`]): 12 (Redis 7.4 / 8.x) unless a stream
/// carries 8.6-only state (IDMP tables or XNACKed entries), then rill's newest.
pub fn version_for<'a>(values: impl IntoIterator<Item = &'a Value>) -> u16 {
    let newest = values.into_iter().any(|v| match v {
        Value::Stream(s) => super::stream::type_for(s) > super::stream::TYPE_STREAM_V3,
        _ => false,
    });
    if newest {
        super::RDB_VERSION
    } else {
        12
    }
}

/// One key read from a file.
#[derive(Debug)]
pub struct LoadedKey {
    /// Database index.
    pub db: usize,
    /// The key.
    pub key: Bytes,
    /// Its value and expiry.
    pub entry: Entry,
}

/// Reads a snapshot from memory, key by key.
#[derive(Debug)]
pub struct FileReader<'a> {
    r: Reader<'a>,
    db: usize,
    /// The server's `databases`: the indexes a file may select.
    databases: usize,
    /// The key whose value is being read, kept for the error message when it fails.
    reading: Option<Bytes>,
    ctx: LoadContext,
    done: bool,
    /// The aux fields read so far, in file order (a name may repeat: the last one counts).
    aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// The `rill-policy` field read for the key that comes next.
    policy: Option<Vec<u8>>,
    /// The `rill-stream` field read for the key that comes next.
    settings: Option<Vec<u8>>,
    /// The function libraries' code read so far (`FUNCTION2` records).
    functions: Vec<Bytes>,
}

impl<'a> FileReader<'a> {
    /// Check the magic, version and (if present) the checksum of `bytes`, for a server with
    /// `databases` databases.
    pub fn new(bytes: &'a [u8], ctx: LoadContext, databases: usize) -> Result<FileReader<'a>, RdbError> {
        check_magic(bytes.get(..9).ok_or(RdbError::Truncated)?)?;
        let split = bytes.len().checked_sub(8).ok_or(RdbError::Truncated)?;
        let (body, crc) = bytes.split_at(split);
        let mut stored = [0u8; 8];
        stored.copy_from_slice(crc);
        let stored = u64::from_le_bytes(stored);
        if body.last() != Some(&OP_EOF) {
            return Err(RdbError::Truncated);
        }
        if stored != 0 && stored != crc64(0, body) {
            return Err(RdbError::VersionOrChecksum);
        }
        let mut r = Reader::new(body);
        r.bytes(9)?;
        Ok(FileReader::at_start(r, ctx, databases))
    }

    /// A reader whose `r` is just past the magic and version.
    fn at_start(r: Reader<'a>, ctx: LoadContext, databases: usize) -> FileReader<'a> {
        FileReader {
            r,
            db: 0,
            databases,
            reading: None,
            ctx,
            done: false,
            aux: Vec::new(),
            policy: None,
            settings: None,
            functions: Vec::new(),
        }
    }

    /// The function libraries read so far (Redis writes them before the first key: after the
    /// last [`FileReader::next_key`] they are all there), taken out of the reader.
    pub fn take_functions(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.functions)
    }

    /// Read a snapshot as it arrives in chunks from `source` (`None`: no more), `total` bytes
    /// long if known: keys are read as soon as their bytes are there, so loading overlaps the
    /// transfer (a replica's full sync). Only the magic and version are checked up front; the
    /// caller checks the checksum that follows the end marker once the payload is all there
    /// (see [`FileReader::position`]).
    pub fn streaming(
        source: impl FnMut() -> Option<Vec<u8>> + 'a,
        total: Option<usize>,
        ctx: LoadContext,
        databases: usize,
    ) -> Result<FileReader<'a>, RdbError> {
        let mut r = Reader::streaming(source, total);
        check_magic(r.bytes(9)?)?;
        Ok(FileReader::at_start(r, ctx, databases))
    }

    /// Byte offset of the reader in the file (progress reports; after the end marker of a
    /// streamed file, where its checksum starts).
    pub fn offset(&self) -> usize {
        self.r.position()
    }

    /// The database and name of the key [`FileReader::next_key`] was reading when it failed
    /// (`None` if it failed between keys).
    pub fn failed_key(&self) -> Option<(usize, &[u8])> {
        self.reading.as_deref().map(|k| (self.db, k))
    }

    /// The value of aux field `name` (its last one), among those read so far: Redis writes
    /// them before the first key, so after the first [`FileReader::next_key`] they are all
    /// known.
    pub fn aux(&self, name: &str) -> Option<&[u8]> {
        self.aux.iter().rev().find(|(k, _)| k.as_slice() == name.as_bytes()).map(|(_, v)| v.as_slice())
    }

    /// The next key, or `None` at the end of the file.
    pub fn next_key(&mut self) -> Result<Option<LoadedKey>, RdbError> {
        self.reading = None;
        let mut expire_at_ms = None;
        loop {
            if self.done {
                return Ok(None);
            }
            let op = self.r.u8()?;
            match op {
                OP_EOF => {
                    self.done = true;
                    return Ok(None);
                }
                OP_AUX => {
                    let name = self.r.string()?;
                    let value = self.r.string()?;
                    if name == POLICY_AUX.as_bytes() {
                        self.policy = Some(value);
                    } else if name == STREAM_AUX.as_bytes() {
                        self.settings = Some(value);
                    } else {
                        self.aux.push((name, value));
                    }
                }
                OP_SELECTDB => {
                    // An index, not a count of things still to read: it is bounded by the
                    // databases the server has, not by the bytes left in the file.
                    let db = self.r.length()?;
                    self.db = usize::try_from(db)
                        .ok()
                        .filter(|db| *db < self.databases)
                        .ok_or(RdbError::DatabaseOutOfRange { db, databases: self.databases })?;
                }
                OP_RESIZEDB => {
                    self.r.length()?;
                    self.r.length()?;
                }
                OP_EXPIRETIME_MS => expire_at_ms = Some(self.r.millis()?),
                OP_EXPIRETIME => {
                    // Seconds as a signed 32-bit time (Redis before 2.6): above 2^31 is before
                    // 1970, an expired key, not one living until 2106.
                    let secs: [u8; 4] = self.r.bytes(4)?.try_into().map_err(|_| RdbError::Truncated)?;
                    expire_at_ms = Some(i64::from(i32::from_le_bytes(secs)) * 1000);
                }
                OP_IDLE => {
                    self.r.length()?;
                }
                OP_FREQ => {
                    self.r.u8()?;
                }
                OP_SLOT_INFO => {
                    self.r.length()?;
                    self.r.length()?;
                    self.r.length()?;
                }
                OP_FUNCTION2 => {
                    let code = self.r.string()?;
                    self.functions.push(Bytes::from(code));
                }
                OP_MODULE_AUX => return Err(RdbError::UnsupportedType(OP_MODULE_AUX)),
                rdb_type => {
                    let key = Bytes::from(self.r.string()?);
                    self.reading = Some(key.clone());
                    let mut value = decode_value(&mut self.r, rdb_type, &self.ctx)?;
                    if let Some(record) = self.policy.take() {
                        if let crate::Value::Stream(s) = &mut value {
                            s.restore_policies(&record).map_err(RdbError::Corrupt)?;
                        }
                    }
                    if let Some(settings) = self.settings.take() {
                        if let crate::Value::Stream(s) = &mut value {
                            s.restore_settings(&settings).map_err(RdbError::Corrupt)?;
                        }
                    }
                    self.reading = None;
                    return Ok(Some(LoadedKey { db: self.db, key, entry: Entry::new(value, expire_at_ms) }));
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::rdb::io::Writer;
    use crate::types::stream::NodeLimits;

    fn ctx() -> LoadContext {
        LoadContext {
            limits: NodeLimits::default(),
            idmp_duration_secs: 100,
            idmp_max_size: 100,
            now_ms: 0,
            rill_streams: false,
        }
    }

    /// A file read as it arrives, in chunks of any sizes (one byte each included), gives the
    /// keys the whole file gives, ends exactly where its checksum starts, and a file cut short
    /// fails as truncated.
    #[test]
    fn a_streamed_file_reads_as_the_whole_one() {
        let mut w = FileWriter::new(Vec::new(), 12, 1_000).unwrap();
        w.select_db(0, 3, 1).unwrap();
        let mut stream = crate::types::stream::Stream::new();
        for i in 1..=20u64 {
            let fields = vec![(Bytes::from_static(b"f"), Bytes::from(format!("{}", i * 7)))];
            stream.append(crate::types::stream::StreamId::new(i, 0), &fields, NodeLimits::new(3, 0)).unwrap();
        }
        w.key(b"s", &Entry::new(Value::Str(Bytes::from(vec![b'x'; 300])), Some(5_000))).unwrap();
        w.key(b"x", &Entry::new(Value::Stream(Box::new(stream)), None)).unwrap();
        w.select_db(2, 1, 0).unwrap();
        w.key(
            b"l",
            &Entry::new(Value::List(["a", "b"].iter().map(|s| Bytes::from_static(s.as_bytes())).collect()), None),
        )
        .unwrap();
        let (bytes, _) = w.finish().unwrap();
        let whole: Vec<LoadedKey> = {
            let mut r = FileReader::new(&bytes, ctx(), 16).unwrap();
            std::iter::from_fn(|| r.next_key().unwrap()).collect()
        };
        let view =
            |keys: &[LoadedKey]| format!("{:?}", keys.iter().map(|k| (k.db, &k.key, &k.entry)).collect::<Vec<_>>());
        for chunk in [1usize, 2, 7, 64, 1000, bytes.len()] {
            let mut parts = bytes.chunks(chunk).map(<[u8]>::to_vec);
            let mut r = FileReader::streaming(move || parts.next(), None, ctx(), 16).unwrap();
            let got: Vec<LoadedKey> = std::iter::from_fn(|| r.next_key().unwrap()).collect();
            assert_eq!(view(&got), view(&whole), "chunks of {chunk}");
            assert_eq!(r.offset(), bytes.len() - 8, "the checksum follows, chunks of {chunk}");
            let cut = bytes[..bytes.len() / 2].to_vec();
            let mut once = Some(cut);
            let mut r = FileReader::streaming(move || once.take(), None, ctx(), 16).unwrap();
            let err = std::iter::from_fn(|| r.next_key().transpose()).find_map(Result::err);
            assert_eq!(err, Some(RdbError::Truncated));
        }
    }

    #[test]
    fn keys_round_trip_and_corruption_is_caught() {
        let mut w = FileWriter::new(Vec::new(), 12, 1_000).unwrap();
        w.select_db(0, 2, 1).unwrap();
        w.key(b"s", &Entry::new(Value::Str(Bytes::from_static(b"v")), Some(5_000))).unwrap();
        w.key(b"n", &Entry::new(Value::Str(Bytes::from_static(b"12")), None)).unwrap();
        w.select_db(3, 1, 0).unwrap();
        let list = Value::List(["a", "b"].iter().map(|s| Bytes::from_static(s.as_bytes())).collect());
        w.key(b"l", &Entry::new(list.clone(), None)).unwrap();
        let (bytes, n) = w.finish().unwrap();
        assert_eq!(n as usize, bytes.len());
        let mut r = FileReader::new(&bytes, ctx(), 16).unwrap();
        let a = r.next_key().unwrap().unwrap();
        assert_eq!((a.db, &a.key[..], a.entry.expire_at_ms()), (0, &b"s"[..], Some(5_000)));
        let b = r.next_key().unwrap().unwrap();
        assert_eq!(b.entry.value, Value::Str(Bytes::from_static(b"12")));
        let c = r.next_key().unwrap().unwrap();
        assert_eq!((c.db, c.entry.value), (3, list));
        assert!(r.next_key().unwrap().is_none());

        let mut bad = bytes.clone();
        bad[12] ^= 1;
        assert!(FileReader::new(&bad, ctx(), 16).is_err());
        assert!(FileReader::new(&bytes[..bytes.len() - 3], ctx(), 16).is_err());
    }

    /// Extra aux fields follow the standard ones and read back, numbers included (written
    /// in the integer encoding, as Redis writes `repl-offset`).
    #[test]
    fn extra_aux_fields_read_back() {
        let extra = [
            ("repl-stream-db".to_string(), "3".to_string()),
            ("repl-id".to_string(), "ab".repeat(20)),
            ("repl-offset".to_string(), "123456789".to_string()),
        ];
        let mut w = FileWriter::with_aux(Vec::new(), 12, 1_000, &extra).unwrap();
        w.select_db(0, 1, 0).unwrap();
        w.key(b"k", &Entry::new(Value::Str(Bytes::from_static(b"v")), None)).unwrap();
        let (bytes, _) = w.finish().unwrap();
        let mut r = FileReader::new(&bytes, ctx(), 16).unwrap();
        assert!(r.aux("repl-id").is_none(), "nothing read yet");
        assert!(r.next_key().unwrap().is_some());
        assert_eq!(r.aux("repl-id"), Some("ab".repeat(20).as_bytes()));
        assert_eq!(r.aux("repl-offset"), Some(&b"123456789"[..]));
        assert_eq!(r.aux("repl-stream-db"), Some(&b"3"[..]));
        assert_eq!(r.aux("redis-ver"), Some(&b"8.2.3"[..]));
        assert!(r.aux("aof-base").is_none());
    }

    /// A file for Redis 7.0 (RDB 10) holds streams in 7.0's type 19, which reads back to the
    /// same stream but the consumers' active-times; a stream with XNACKed entries is refused,
    /// naming its key.
    #[test]
    fn a_file_for_redis_7_0_holds_streams_in_type_19_and_refuses_8_6_state() {
        use crate::types::testkit::Harness;
        let mut h = Harness::new();
        for line in [
            "XADD s 1-1 f v",
            "XADD s 2-1 f w",
            "XGROUP CREATE s g 0",
            "XREADGROUP GROUP g c COUNT 1 STREAMS s >",
            "SADD set a b",
        ] {
            h.run(&line.split(' ').collect::<Vec<_>>());
        }
        let value = |h: &Harness, k: &[u8]| h.engine.db(0).get_raw(k).unwrap().value.clone();
        let file = |h: &Harness| {
            let mut w = FileWriter::new(Vec::new(), VERSION_REDIS_7_0, 1_000).unwrap();
            w.select_db(0, 2, 0).unwrap();
            for k in [&b"s"[..], b"set"] {
                w.key(k, &Entry::new(value(h, k), None))?;
            }
            w.finish().map(|(bytes, _)| bytes)
        };
        let bytes = file(&h).unwrap();
        assert_eq!(&bytes[..9], b"REDIS0010");
        let mut r = FileReader::new(&bytes, ctx(), 16).unwrap();
        let s = r.next_key().unwrap().unwrap();
        let v2 = |v: &Value| {
            let Value::Stream(s) = v else { panic!("not a stream") };
            let mut w = Writer::default();
            crate::rdb::stream::encode(&mut w, s, crate::rdb::stream::TYPE_STREAM_V2, 1_000).unwrap();
            w.buf
        };
        assert_eq!(v2(&s.entry.value), v2(&value(&h, b"s")));
        assert_eq!(r.next_key().unwrap().unwrap().entry.value, value(&h, b"set"));
        h.run(&["XNACK", "s", "g", "FAIL", "IDS", "1", "1-1"]);
        let err = file(&h).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("key 's'"), "{err}");
    }

    /// A file with one small key in a database of a high index.
    fn one_key_in(db: usize) -> Vec<u8> {
        let mut w = FileWriter::new(Vec::new(), 12, 1_000).unwrap();
        w.select_db(db, 1, 0).unwrap();
        w.key(b"a", &Entry::new(Value::Str(Bytes::from_static(b"1")), None)).unwrap();
        w.finish().unwrap().0
    }

    /// `SELECT 15`, `SET a 1`, SAVE: the index is larger than the bytes after it, which is
    /// no reason to refuse the file (it was, when the index was read as a count).
    #[test]
    fn a_database_index_is_bounded_by_the_databases_not_by_the_bytes_left() {
        for db in [15, 63, 64, 200] {
            let bytes = one_key_in(db);
            let mut r = FileReader::new(&bytes, ctx(), 256).unwrap();
            let k = r.next_key().unwrap_or_else(|e| panic!("database {db}: {e}")).unwrap();
            assert_eq!((k.db, &k.key[..]), (db, &b"a"[..]));
            assert!(r.next_key().unwrap().is_none());
        }
        // One past the last database: refused, naming both numbers, before any key is read.
        let bytes = one_key_in(16);
        let mut r = FileReader::new(&bytes, ctx(), 16).unwrap();
        let err = r.next_key().unwrap_err();
        assert_eq!(err, RdbError::DatabaseOutOfRange { db: 16, databases: 16 });
        assert!(r.failed_key().is_none());
        let text = err.to_string();
        assert!(
            text.contains("database 16") && text.contains("16 databases") && text.contains("`databases 17`"),
            "{text}"
        );
        // An index no usize holds (a 64-bit length) is refused the same way, without wrapping.
        let mut huge = bytes.clone();
        let at = huge.windows(2).position(|w| w == [OP_SELECTDB, 16]).unwrap();
        huge.splice(at + 1..at + 2, [0x81u8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        let crc_at = huge.len() - 8;
        let crc = crc64(0, &huge[..crc_at]).to_le_bytes();
        huge[crc_at..].copy_from_slice(&crc);
        let err = FileReader::new(&huge, ctx(), 16).unwrap().next_key().unwrap_err();
        assert_eq!(err, RdbError::DatabaseOutOfRange { db: u64::MAX, databases: 16 });
    }

    /// The seconds form of an expiry (Redis < 2.6) is a signed 32-bit time, as Redis reads it.
    #[test]
    fn expiry_in_seconds_is_a_signed_32_bit_time() {
        for (raw, want) in
            [(1_700_000_000i32, 1_700_000_000_000i64), (-1, -1000), (i32::MIN, i64::from(i32::MIN) * 1000)]
        {
            let mut file = b"REDIS0003".to_vec();
            file.extend_from_slice(&[OP_SELECTDB, 0, OP_EXPIRETIME]);
            file.extend_from_slice(&raw.to_le_bytes());
            file.extend_from_slice(&[0, 1, b'k', 1, b'v', OP_EOF]);
            file.extend_from_slice(&0u64.to_le_bytes());
            let k = FileReader::new(&file, ctx(), 16).unwrap().next_key().unwrap().unwrap();
            assert_eq!(k.entry.expire_at_ms(), Some(want), "{raw}");
        }
    }

    /// A key of a type rill lacks fails the load naming the key and the type.
    #[test]
    fn a_key_of_a_type_rill_lacks_is_named_in_the_error() {
        let mut bytes = one_key_in(3);
        // Turn the string into an array (type 28, newer than any Redis rill follows): its
        // body is then read no further.
        let at = bytes.windows(3).position(|w| w == [0, 1, b'a']).unwrap();
        bytes[at] = 28;
        let crc_at = bytes.len() - 8;
        let crc = crc64(0, &bytes[..crc_at]).to_le_bytes();
        bytes[crc_at..].copy_from_slice(&crc);
        let mut r = FileReader::new(&bytes, ctx(), 16).unwrap();
        let err = r.next_key().unwrap_err();
        assert_eq!(err, RdbError::UnsupportedType(28));
        assert_eq!(r.failed_key(), Some((3, &b"a"[..])));
        assert!(err.to_string().contains("array"), "{err}");
    }

    /// A stream written in rill's own type for a rill replica — entries in several blocks,
    /// deleted ones among them, values of every kind, two groups with owned and XNACKed
    /// pending entries — loads into the same stream, block by block (its blocks equal as
    /// stored, its DUMP byte for byte); only a load that allows the type reads it, a damaged block fails
    /// the load, and a file written without the switch holds Redis' type.
    #[test]
    fn a_stream_in_rills_own_type_loads_as_the_same_stream() {
        let mut h = crate::types::testkit::Harness::new();
        for i in 1..=250u64 {
            let id = format!("{i}-{}", i % 3);
            let price = format!("{}.{:02}", 100 + i, i % 100);
            let n = (i * 37).to_string();
            let args: Vec<&str> = match i % 4 {
                0 => vec!["XADD", "s", &id, "sym", "NVDA", "price", &price, "n", &n],
                1 => vec!["XADD", "s", &id, "sym", "AAPL", "price", &price, "n", &n],
                2 => vec!["XADD", "s", &id, "other", "field", "price", &price],
                _ => vec!["XADD", "s", &id, "blob", "x\r\ny with spaces and a long tail of bytes"],
            };
            h.run(&args);
        }
        h.run(&["XDEL", "s", "5-2", "6-0", "101-2", "250-1"]);
        h.run(&["XGROUP", "CREATE", "s", "g", "0"]);
        h.run(&["XGROUP", "CREATE", "s", "h", "$"]);
        h.run(&["XREADGROUP", "GROUP", "g", "c1", "COUNT", "120", "STREAMS", "s", ">"]);
        h.now_ms += 5;
        h.run(&["XREADGROUP", "GROUP", "g", "c2", "COUNT", "40", "STREAMS", "s", ">"]);
        let nacked = h.run(&["XNACK", "s", "g", "FAIL", "IDS", "2", "7-1", "130-1"]);
        assert_eq!(nacked, rill_resp::Reply::Integer(2), "{nacked:?}");
        let value = h.engine.db(0).get_raw(b"s").unwrap().value.clone();
        let Value::Stream(ref original) = value else { panic!("not a stream") };
        assert!(original.block_count() > 2);

        let write = |rill: bool| {
            let mut w = FileWriter::new(Vec::new(), 12, 1_000).unwrap();
            if rill {
                w.rill_streams();
            }
            w.select_db(0, 1, 0).unwrap();
            w.key(b"s", &Entry::new(value.clone(), None)).unwrap();
            w.finish().unwrap().0
        };
        let read = |bytes: &[u8], rill: bool| {
            let mut r = FileReader::new(bytes, LoadContext { rill_streams: rill, ..ctx() }, 16).unwrap();
            r.next_key()
        };
        let file = write(true);
        let loaded = read(&file, true).unwrap().unwrap();
        let Value::Stream(ref got) = loaded.entry.value else { panic!("not a stream") };
        // The blocks as stored (bytes, counts, marks); the groups as a DUMP shows them (the
        // PEL's internal order keys are rebuilt on any load).
        assert!(got.blocks().eq(original.blocks()));
        assert!(got.validate());
        assert_eq!(crate::rdb::dump(&loaded.entry.value, 1_000), crate::rdb::dump(&value, 1_000));

        assert_eq!(read(&file, false).unwrap_err(), RdbError::UnsupportedType(super::super::stream::TYPE_STREAM_RILL));
        let redis_file = write(false);
        assert!(matches!(read(&redis_file, false), Ok(Some(_))));

        // Damage anywhere (a byte changed, bytes cut out or repeated; the checksum recomputed,
        // as a primary with a bug would send it) fails the load or loads a stream that holds
        // together and whose DUMP (in Redis' type) loads again: never a panic.
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as usize
        };
        let (mut loaded, mut failed) = (0, 0);
        for case in 0..3000 {
            let mut bad = file[..file.len() - 8].to_vec();
            let at = 40 + next(bad.len() - 41);
            match case % 3 {
                0 => bad[at] = next(256) as u8,
                1 => {
                    let n = 1 + next(8).min(bad.len() - at - 1);
                    bad.drain(at..at + n);
                }
                _ => {
                    let piece = bad[at..(at + 1 + next(6)).min(bad.len())].to_vec();
                    bad.splice(at..at, piece);
                }
            }
            let crc = crc64(0, &bad).to_le_bytes();
            bad.extend_from_slice(&crc);
            match read(&bad, true) {
                Ok(Some(k)) => {
                    if let Value::Stream(s) = &k.entry.value {
                        assert!(s.validate(), "case {case}");
                    }
                    let again = crate::rdb::dump(&k.entry.value, 1_000);
                    assert!(crate::rdb::restore(&again, &ctx()).is_ok(), "case {case}: its DUMP does not load");
                    loaded += 1;
                }
                _ => failed += 1,
            }
        }
        assert!(loaded > 0 && failed > 1000, "{loaded} loaded, {failed} failed");
    }
}
