//! Reading a log file record by record, and `rill-server --check-log FILE [--fix]`.

use super::{LOG_MAGIC, LONG_RECORD, LONG_RECORD_LEN_BYTES, MAX_RECORD_BODY_BYTES, RECORD_HEADER_BYTES};
use bytes::Bytes;
use rill_engine::effect::{decode_record_shared, Effect};

/// How a log file ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// After the last whole record.
    Clean,
    /// After the last whole record, only zero bytes to the end of the file: space the
    /// server had preallocated and not used yet (see the module docs of `aof`). Not damage;
    /// start-up cuts it off before appending.
    Padded {
        /// Where the last whole record ends (the logical end of the log).
        at: u64,
        /// Bytes of zeros after it.
        padding: u64,
    },
    /// A record cut short (or failing its checksum) with nothing but zeros after it: a torn
    /// write. `at` is where the last whole record ends.
    Truncated {
        /// Offset to cut the file back to.
        at: u64,
    },
    /// A bad record with non-zero bytes after it (a zero length word followed by data
    /// included).
    Corrupt {
        /// Offset of the bad record.
        at: u64,
        /// What is wrong with it.
        reason: String,
    },
}

fn all_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
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
        // A record's length word is never 0, so on a record this stops within four bytes;
        // only padding is read to the end.
        if all_zero(rest) {
            self.tail = Some(Tail::Padded { at: at as u64, padding: rest.len() as u64 });
            return None;
        }
        let Some(header) = rest.get(..RECORD_HEADER_BYTES) else {
            self.tail = Some(Tail::Truncated { at: at as u64 });
            return None;
        };
        let mut word = [0u8; 4];
        word.copy_from_slice(header.get(..4).unwrap_or(&[0; 4]));
        let short_len = u32::from_le_bytes(word);
        word.copy_from_slice(header.get(4..8).unwrap_or(&[0; 4]));
        let crc = u32::from_le_bytes(word);
        // Where the body starts, and its length: after the header, or (the long form) after
        // the u64 length that follows it.
        let (body_at, len) = if short_len == LONG_RECORD {
            let Some(long) = rest.get(RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + LONG_RECORD_LEN_BYTES) else {
                self.tail = Some(Tail::Truncated { at: at as u64 });
                return None;
            };
            let mut eight = [0u8; 8];
            eight.copy_from_slice(long);
            // A length past the end of the file is a torn or corrupt record (told apart
            // below, as for the short form); one that does not even fit usize is corrupt.
            let Ok(len) = usize::try_from(u64::from_le_bytes(eight)) else {
                self.tail = Some(Tail::Corrupt { at: at as u64, reason: "long record length out of range".into() });
                return None;
            };
            (RECORD_HEADER_BYTES + LONG_RECORD_LEN_BYTES, len)
        } else {
            (RECORD_HEADER_BYTES, short_len as usize)
        };
        if len == 0 {
            // Not padding: non-zero bytes follow (checked above).
            self.tail = Some(Tail::Corrupt { at: at as u64, reason: "zero record length with data after it".into() });
            return None;
        }
        if short_len != LONG_RECORD && len > MAX_RECORD_BODY_BYTES {
            self.tail = Some(Tail::Corrupt { at: at as u64, reason: format!("record length {len} is implausible") });
            return None;
        }
        let Some(end) = body_at.checked_add(len) else {
            self.tail = Some(Tail::Corrupt { at: at as u64, reason: "long record length out of range".into() });
            return None;
        };
        let Some(body) = rest.get(body_at..end) else {
            self.tail = Some(Tail::Truncated { at: at as u64 });
            return None;
        };
        // Torn if nothing but padding follows: the crash hit the last record written.
        let last = rest.get(end..).is_some_and(all_zero);
        let bad = |reason: String| {
            if last {
                Tail::Truncated { at: at as u64 }
            } else {
                Tail::Corrupt { at: at as u64, reason }
            }
        };
        if crc32fast::hash(body) != crc {
            self.tail = Some(bad("checksum mismatch".into()));
            return None;
        }
        let body = self.bytes.slice(at + body_at..at + end);
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

/// `rill-server --check-log FILE [--fix]`: report on a log file (zero padding after the last
/// record is fine); with `--fix`, cut a torn or corrupt file back to its last good record,
/// and cut padding off. Returns the process exit code.
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
        Tail::Padded { at, padding } if !fix => {
            println!(
                "{path}: OK, {n} records ({effects} effects), {at} bytes, then {padding} bytes of zero padding (space preallocated by the server that wrote it)"
            );
            0
        }
        Tail::Padded { at, padding } => {
            match cut(path, at) {
                Ok(()) => {
                    println!("{path}: OK, {n} records ({effects} effects), {at} bytes; {padding} bytes of zero padding cut off");
                    0
                }
                Err(e) => {
                    eprintln!("Cannot truncate {path}: {e}");
                    1
                }
            }
        }
        Tail::Truncated { at } | Tail::Corrupt { at, .. } if !fix => {
            let what = match records.tail {
                Some(Tail::Corrupt { reason, .. }) => format!("corrupt record at offset {at}: {reason}"),
                _ => format!("truncated record at offset {at} (a torn write if this is the file written last; in an earlier file, corruption)"),
            };
            println!(
                "{path}: {what}; {n} good records end at offset {good}, {} bytes after it",
                bytes.len() as u64 - good
            );
            println!("Run with --fix to cut the file back to offset {good}.");
            1
        }
        Tail::Truncated { at } | Tail::Corrupt { at, .. } => match cut(path, at) {
            Ok(()) => {
                println!(
                    "{path}: cut back to offset {at}: {n} records kept, {} bytes dropped",
                    bytes.len() as u64 - at
                );
                0
            }
            Err(e) => {
                eprintln!("Cannot truncate {path}: {e}");
                1
            }
        },
    }
}

/// Cut the file at `path` back to `len` bytes, synced.
fn cut(path: &str, len: u64) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.set_len(len)?;
    f.sync_all()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use bytes::Bytes;

    use super::super::test_log as file;

    fn scan(bytes: &[u8]) -> (usize, Tail) {
        let mut r = Records::new(Bytes::copy_from_slice(bytes));
        let mut n = 0;
        while r.next_record().is_some() {
            n += 1;
        }
        (n, r.tail.unwrap())
    }

    proptest::proptest! {
        /// Any damage to a log file (a cut, a flipped byte, garbage appended) yields exactly
        /// the records before the first changed byte and a tail verdict; the reader never
        /// panics.
        #[test]
        fn damaged_files_yield_a_prefix(n in 1usize..8, cut in proptest::prelude::any::<proptest::sample::Index>(),
                                        flip in proptest::prelude::any::<proptest::sample::Index>(),
                                        junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            let (f, ends) = file(n);
            let mut damaged = f.clone();
            let i = flip.index(damaged.len());
            damaged[i] ^= 0x5a;
            damaged.truncate(cut.index(damaged.len() + 1).max(1));
            damaged.extend_from_slice(&junk);
            let (kept, _) = scan(&damaged);
            // Every record that ends before the first byte that differs from the original (the
            // flip, the cut, or junk, which may happen to repeat the bytes it replaces) is whole
            // and must be read; none after it can pass its checksum (junk forming a valid record
            // has odds of 2^-32).
            let first_change = f.iter().zip(&damaged).position(|(a, b)| a != b).unwrap_or(f.len().min(damaged.len()));
            let intact = ends.iter().filter(|&&end| end <= first_change).count();
            proptest::prop_assert_eq!(kept, intact);
            // Whatever was kept is byte-identical to the original's prefix.
            let mut r = Records::new(Bytes::copy_from_slice(&damaged));
            let mut o = Records::new(Bytes::copy_from_slice(&f));
            for _ in 0..kept {
                proptest::prop_assert_eq!(r.next_record(), o.next_record());
            }
        }
    }

    /// A log of `SET k<i>` records framed by the writer's own framing, with bodies above
    /// `short_max` bytes in the long form.
    fn framed(n: usize, short_max: usize) -> (Vec<u8>, Vec<usize>) {
        use rill_engine::effect::{encode_record, Effect};
        let mut out = LOG_MAGIC.to_vec();
        let mut ends = Vec::new();
        for i in 0..n {
            let start = out.len();
            out.extend_from_slice(&[0u8; RECORD_HEADER_BYTES]);
            let key = Bytes::from(format!("k{i}").repeat(i + 1));
            encode_record(&mut out, i as i64, &[Effect::command(0, vec![Bytes::from_static(b"SET"), key])]);
            super::super::writer::frame_in_place(&mut out, start, short_max);
            ends.push(out.len());
        }
        (out, ends)
    }

    /// A body over the short form's 2 GiB takes the long form (its length a u64 after the
    /// checksum): before, the writer cut its length to 32 bits and start-up refused the log.
    /// The framing is the writer's, with the threshold lowered so that small bodies take it.
    #[test]
    fn the_long_form_reads_back_and_its_damage_is_told_like_the_short_forms() {
        let (short, _) = framed(4, MAX_RECORD_BODY_BYTES);
        let (long, ends) = framed(4, 24);
        assert_ne!(short, long, "some records took the long form");
        let long_words = ends.iter().take(3).filter(|&&e| long[e..e + 4] == LONG_RECORD.to_le_bytes()).count();
        assert!(long_words >= 1, "a record after the first is in the long form");
        let records = |bytes: &[u8]| {
            let mut r = Records::new(Bytes::copy_from_slice(bytes));
            let mut v = Vec::new();
            while let Some((_, t, e)) = r.next_record() {
                v.push((t, e));
            }
            (v, r.tail.unwrap())
        };
        // Both forms hold the same records.
        assert_eq!(records(&long), records(&short));
        assert_eq!(records(&long).1, Tail::Clean);
        // Torn inside the long length or the body of the last record; corrupt in the middle.
        for cut in [ends[2] + 9, ends[2] + 15, ends[3] - 1] {
            assert_eq!(scan(&long[..cut]), (3, Tail::Truncated { at: ends[2] as u64 }), "cut at {cut}");
        }
        let mut bad = long.clone();
        bad[ends[1] + RECORD_HEADER_BYTES + LONG_RECORD_LEN_BYTES + 2] ^= 1;
        assert!(matches!(scan(&bad), (2, Tail::Corrupt { at, .. }) if at == ends[1] as u64));
        // A short length word above 2 GiB is still corruption.
        let mut huge = short.clone();
        huge[ends[1]..ends[1] + 4].copy_from_slice(&((MAX_RECORD_BODY_BYTES + 1) as u32).to_le_bytes());
        assert!(matches!(scan(&huge), (2, Tail::Corrupt { .. })));
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

    fn zeros(n: usize) -> Vec<u8> {
        vec![0u8; n]
    }

    #[test]
    fn zero_padding_after_the_last_record_is_a_clean_end() {
        let (f, ends) = file(5);
        // Any amount, down to a length word cut by the end of the file.
        for pad in [1, 3, 4, 8, 9, 4096, 1 << 20] {
            let g = [f.clone(), zeros(pad)].concat();
            assert_eq!(
                scan(&g),
                (5, Tail::Padded { at: ends[4] as u64, padding: pad as u64 }),
                "{pad} bytes of padding"
            );
        }
        // A file that holds nothing but its magic and padding.
        let g = [LOG_MAGIC.to_vec(), zeros(100)].concat();
        assert_eq!(scan(&g), (0, Tail::Padded { at: LOG_MAGIC.len() as u64, padding: 100 }));
    }

    #[test]
    fn a_torn_record_followed_by_zeros_is_a_torn_tail() {
        let (f, ends) = file(5);
        // The last record written only in part, the rest of it (and its header) still zeros.
        for cut in ends[3] + 1..ends[4] {
            let mut g = f.clone();
            g[cut..].fill(0);
            g.extend_from_slice(&zeros(4096));
            assert_eq!(scan(&g), (4, Tail::Truncated { at: ends[3] as u64 }), "written up to {cut}");
        }
        // A length whose body runs past the end of the padding.
        let g = [f[..ends[3]].to_vec(), vec![0xff, 0xff, 0, 0, 1, 2, 3, 4], zeros(100)].concat();
        assert_eq!(scan(&g), (4, Tail::Truncated { at: ends[3] as u64 }));
        // A bad checksum in the last record, then padding.
        let mut g = [f.clone(), zeros(64)].concat();
        g[ends[4] - 1] ^= 1;
        assert_eq!(scan(&g), (4, Tail::Truncated { at: ends[3] as u64 }));
    }

    #[test]
    fn a_corrupt_record_before_a_valid_one_is_corruption_even_with_padding() {
        let (f, ends) = file(5);
        let mut g = [f.clone(), zeros(4096)].concat();
        g[ends[1] + 9] ^= 1;
        assert!(matches!(scan(&g), (2, Tail::Corrupt { at, .. }) if at == ends[1] as u64), "{:?}", scan(&g));
        // A record cut short in the middle (its tail zeroed), valid records after it.
        let mut g = [f.clone(), zeros(4096)].concat();
        g[ends[1] + 12..ends[2]].fill(0);
        assert!(matches!(scan(&g), (2, Tail::Corrupt { at, .. }) if at == ends[1] as u64), "{:?}", scan(&g));
    }

    #[test]
    fn a_zero_length_word_followed_by_data_is_corruption() {
        let (f, ends) = file(5);
        // Zeros, then garbage, then zeros again: not padding.
        let g = [f.clone(), zeros(100), vec![1, 2, 3], zeros(100)].concat();
        assert!(matches!(scan(&g), (5, Tail::Corrupt { at, .. }) if at == ends[4] as u64), "{:?}", scan(&g));
        // A zeroed record in the middle of the file: the records after it are not dropped
        // silently.
        let mut g = f.clone();
        g[ends[1]..ends[2]].fill(0);
        assert!(matches!(scan(&g), (2, Tail::Corrupt { at, .. }) if at == ends[1] as u64), "{:?}", scan(&g));
        // Just a zero length word and one stray byte at the end.
        let g = [f.clone(), zeros(8), vec![7]].concat();
        assert!(matches!(scan(&g), (5, Tail::Corrupt { at, .. }) if at == ends[4] as u64), "{:?}", scan(&g));
    }
}
