//! Reading a log file record by record, and `rill-server --check-log FILE [--fix]`.

use super::{LOG_MAGIC, MAX_RECORD, RECORD_HEADER};
use bytes::Bytes;
use rill_engine::effect::{decode_record_shared, Effect};

/// How a log file ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// After the last whole record.
    Clean,
    /// A record cut short (or failing its checksum) at the very end: a torn write. `at` is
    /// where the last whole record ends.
    Truncated {
        /// Offset to cut the file back to.
        at: u64,
    },
    /// A bad record with more data after it.
    Corrupt {
        /// Offset of the bad record.
        at: u64,
        /// What is wrong with it.
        reason: String,
    },
}

/// Iterates over the records of a log file held in memory.
#[derive(Debug)]
pub struct Records {
    bytes: Bytes,
    pos: usize,
    /// How the file ends, once iteration stopped.
    pub tail: Option<Tail>,
}

impl Records {
    /// Start after the magic. A file shorter than the magic is a torn creation (tail at 0);
    /// a different magic is corruption at 0.
    pub fn new(bytes: Bytes) -> Records {
        let mut r = Records { bytes, pos: LOG_MAGIC.len(), tail: None };
        if r.bytes.len() < LOG_MAGIC.len() {
            r.tail = Some(if LOG_MAGIC.starts_with(&r.bytes) {
                Tail::Truncated { at: 0 }
            } else {
                Tail::Corrupt { at: 0, reason: "not a rill log file (bad magic)".into() }
            });
        } else if r.bytes.get(..LOG_MAGIC.len()) != Some(&LOG_MAGIC[..]) {
            r.tail = Some(Tail::Corrupt { at: 0, reason: "not a rill log file (bad magic)".into() });
        }
        r
    }

    /// Offset after the last record returned.
    pub fn offset(&self) -> u64 {
        self.pos as u64
    }

    /// The next record: its offset, time and effects. `None` at the end (see `tail`).
    pub fn next_record(&mut self) -> Option<(u64, i64, Vec<Effect>)> {
        if self.tail.is_some() {
            return None;
        }
        let at = self.pos;
        let rest = self.bytes.get(at..).unwrap_or_default();
        if rest.is_empty() {
            self.tail = Some(Tail::Clean);
            return None;
        }
        let Some(header) = rest.get(..RECORD_HEADER) else {
            self.tail = Some(Tail::Truncated { at: at as u64 });
            return None;
        };
        let mut word = [0u8; 4];
        word.copy_from_slice(header.get(..4).unwrap_or(&[0; 4]));
        let len = u32::from_le_bytes(word) as usize;
        word.copy_from_slice(header.get(4..8).unwrap_or(&[0; 4]));
        let crc = u32::from_le_bytes(word);
        let end = RECORD_HEADER + len;
        if len > MAX_RECORD {
            self.tail = Some(Tail::Corrupt { at: at as u64, reason: format!("record length {len} is implausible") });
            return None;
        }
        let Some(body) = rest.get(RECORD_HEADER..end) else {
            self.tail = Some(Tail::Truncated { at: at as u64 });
            return None;
        };
        let last = end == rest.len();
        let bad = |reason: String| if last { Tail::Truncated { at: at as u64 } } else { Tail::Corrupt { at: at as u64, reason } };
        if crc32fast::hash(body) != crc {
            self.tail = Some(bad("checksum mismatch".into()));
            return None;
        }
        let body = self.bytes.slice(at + RECORD_HEADER..at + end);
        match decode_record_shared(body) {
            Ok((time, effects)) => {
                self.pos = at + end;
                Some((at as u64, time, effects))
            }
            Err(e) => {
                self.tail = Some(bad(format!("undecodable record: {e}")));
                None
            }
        }
    }
}

/// `rill-server --check-log FILE [--fix]`: report on a log file; with `--fix`, cut a torn or
/// corrupt file back to its last good record. Returns the process exit code.
pub fn run(args: &[String]) -> i32 {
    let Some(path) = args.first() else {
        eprintln!("Usage: rill-server --check-log <file.incr.rlog> [--fix]");
        return 1;
    };
    let fix = args.get(1).is_some_and(|a| a == "--fix");
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("Cannot read {path}: {e}");
            return 1;
        }
    };
    let mut records = Records::new(Bytes::from(bytes.clone()));
    let mut n: u64 = 0;
    let mut effects: u64 = 0;
    while let Some((_, _, e)) = records.next_record() {
        n += 1;
        effects += e.len() as u64;
    }
    let good = records.offset();
    match records.tail.clone().unwrap_or(Tail::Clean) {
        Tail::Clean => {
            println!("{path}: OK, {n} records ({effects} effects), {} bytes", bytes.len());
            0
        }
        Tail::Truncated { at } | Tail::Corrupt { at, .. } if !fix => {
            let what = match records.tail {
                Some(Tail::Corrupt { reason, .. }) => format!("corrupt record at offset {at}: {reason}"),
                _ => format!("truncated record at offset {at} (a torn write)"),
            };
            println!("{path}: {what}; {n} good records end at offset {good}, {} bytes after it", bytes.len() as u64 - good);
            println!("Run with --fix to cut the file back to offset {good}.");
            1
        }
        Tail::Truncated { at } | Tail::Corrupt { at, .. } => {
            let cut = at;
            let r = std::fs::OpenOptions::new().write(true).open(path).and_then(|f| {
                f.set_len(cut)?;
                f.sync_all()
            });
            match r {
                Ok(()) => {
                    println!("{path}: cut back to offset {cut}: {n} records kept, {} bytes dropped", bytes.len() as u64 - cut);
                    0
                }
                Err(e) => {
                    eprintln!("Cannot truncate {path}: {e}");
                    1
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use rill_engine::effect::encode_record;

    fn file(n: usize) -> (Vec<u8>, Vec<usize>) {
        let mut out = LOG_MAGIC.to_vec();
        let mut ends = Vec::new();
        for i in 0..n {
            let mut body = Vec::new();
            let e = Effect::Command { db: 0, args: vec![Bytes::from_static(b"SET"), Bytes::from(format!("k{i}"))] };
            encode_record(&mut body, i as i64, &[e]);
            super::super::frame(&mut out, &body);
            ends.push(out.len());
        }
        (out, ends)
    }

    fn scan(bytes: &[u8]) -> (usize, Tail) {
        let mut r = Records::new(Bytes::copy_from_slice(bytes));
        let mut n = 0;
        while r.next_record().is_some() {
            n += 1;
        }
        (n, r.tail.unwrap())
    }

    proptest::proptest! {
        /// Any damage to a log file (a cut, a flipped byte, garbage appended) yields a prefix
        /// of its records and a tail verdict; the reader never panics.
        #[test]
        fn damaged_files_yield_a_prefix(n in 1usize..8, cut in proptest::prelude::any::<proptest::sample::Index>(),
                                        flip in proptest::prelude::any::<proptest::sample::Index>(),
                                        junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            let (f, _) = file(n);
            let mut damaged = f.clone();
            let i = flip.index(damaged.len());
            damaged[i] ^= 0x5a;
            damaged.truncate(cut.index(damaged.len() + 1).max(1));
            damaged.extend_from_slice(&junk);
            let (kept, _) = scan(&damaged);
            proptest::prop_assert!(kept <= n);
            // Whatever was kept is byte-identical to the original's prefix.
            let mut r = Records::new(Bytes::copy_from_slice(&damaged));
            let mut o = Records::new(Bytes::copy_from_slice(&f));
            for _ in 0..kept {
                proptest::prop_assert_eq!(r.next_record(), o.next_record());
            }
        }
    }

    #[test]
    fn clean_torn_and_corrupt_files() {
        let (f, ends) = file(5);
        assert_eq!(scan(&f), (5, Tail::Clean));
        // Cut anywhere inside the last record: a torn write at the last record's start.
        for cut in ends[3] + 1..ends[4] {
            assert_eq!(scan(&f[..cut]), (4, Tail::Truncated { at: ends[3] as u64 }));
        }
        // A flipped bit in the last record: also torn (nothing after it).
        let mut g = f.clone();
        g[ends[4] - 1] ^= 1;
        assert_eq!(scan(&g), (4, Tail::Truncated { at: ends[3] as u64 }));
        // A flipped bit in a middle record: corruption at its offset.
        let mut h = f.clone();
        h[ends[1] + 9] ^= 1;
        assert!(matches!(scan(&h), (2, Tail::Corrupt { at, .. }) if at == ends[1] as u64));
        assert!(matches!(scan(b"NOTALOGFILE"), (0, Tail::Corrupt { at: 0, .. })));
        assert_eq!(scan(b"RILL"), (0, Tail::Truncated { at: 0 }));
    }
}
