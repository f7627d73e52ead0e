//! The log's directory: the manifest and the names of base and incremental files.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const MANIFEST_HEADER: &str = "rill-manifest 1";
/// The largest sequence number a listed file may carry: one the server could have reached
/// counting up from 1 (Redis' numbers are signed 64-bit too), so the next one never wraps.
const MAX_SEQ: u64 = i64::MAX as u64;
/// The largest manifest read: a manifest lists one line per file, a few dozen bytes each.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Which files make up the log, in replay order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The snapshot file, if any.
    pub base: Option<String>,
    /// Incremental log files, oldest first.
    pub incrs: Vec<String>,
}

/// The log directory and its naming scheme.
#[derive(Debug, Clone)]
pub struct Files {
    /// `dir/appenddirname`.
    pub dir: PathBuf,
    /// `appendfilename`.
    pub name: String,
    /// The manifest as last written.
    pub manifest: Manifest,
    /// The log was just turned on and has no base yet: until the first rewrite finishes,
    /// manifest changes stay in memory and no file is removed (the manifest on disk still
    /// names the files of the log turned off before, if any, so a crash before then restarts
    /// from them and never passes a log without its starting point off as the whole data).
    pub provisional: bool,
    /// The highest sequence number handed out by [`Files::next_seq`], listed or not yet: a
    /// rewrite takes its number before it creates the file, and the writer's recovery must not
    /// take the same one meanwhile.
    reserved: u64,
}

impl Files {
    /// The directory for `appenddirname` / `appendfilename` (relative to the working
    /// directory, which is `dir`).
    pub fn new(dirname: &str, name: &str) -> Files {
        Files {
            dir: PathBuf::from(dirname),
            name: name.to_string(),
            manifest: Manifest::default(),
            provisional: false,
            reserved: 0,
        }
    }

    /// Path of the manifest.
    pub fn manifest_path(&self) -> PathBuf {
        self.dir.join(format!("{}.manifest.rill", self.name))
    }

    /// File name of incremental file number `seq`.
    pub fn incr_name(&self, seq: u64) -> String {
        format!("{}.{seq}.incr.rlog", self.name)
    }

    /// File name of base file number `seq`.
    pub fn base_name(&self, seq: u64) -> String {
        format!("{}.{seq}.base.rdb", self.name)
    }

    /// Full path of a file in the directory.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The sequence number in a base or incr file name.
    pub fn seq_of(&self, file: &str) -> u64 {
        file.strip_prefix(&self.name)
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|rest| rest.split('.').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// The highest sequence number the manifest uses.
    pub fn last_seq(&self) -> u64 {
        self.manifest.base.iter().chain(self.manifest.incrs.iter()).map(|f| self.seq_of(f)).max().unwrap_or(0)
    }

    /// A sequence number for a new file, above every one in use or handed out before.
    pub fn next_seq(&mut self) -> u64 {
        let seq = self.last_seq().max(self.reserved) + 1;
        self.reserved = seq;
        seq
    }

    /// Read the manifest; `Ok(None)` if there is none.
    pub fn read_manifest(&mut self) -> io::Result<Option<Manifest>> {
        use std::io::Read;
        let mut text = String::new();
        match File::open(self.manifest_path()) {
            // A manifest larger than any this server writes is not read whole into memory.
            Ok(f) => f.take(MAX_MANIFEST_BYTES + 1).read_to_string(&mut text)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if text.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(invalid(format!("manifest larger than {MAX_MANIFEST_BYTES} bytes")));
        }
        let m = self.parse_manifest(&text)?;
        self.manifest = m.clone();
        Ok(Some(m))
    }

    /// A manifest's text as this directory's [`Manifest`]. Each name must be one the server
    /// writes here: a plain file name of this directory (a path would make the log read and
    /// append to a file elsewhere), of the kind its line says, with a sequence number the
    /// server can count on from, listed once (twice would replay its records twice).
    fn parse_manifest(&self, text: &str) -> io::Result<Manifest> {
        let mut lines = text.lines();
        if lines.next() != Some(MANIFEST_HEADER) {
            return Err(invalid("manifest has no rill-manifest header".into()));
        }
        let mut m = Manifest::default();
        for line in lines.filter(|l| !l.trim().is_empty()) {
            let bad = |why: &str| invalid(format!("bad manifest line '{line}': {why}"));
            let (kind, f) = line.split_once(' ').ok_or_else(|| bad("not '<kind> <file>'"))?;
            let suffix = match kind {
                "base" if m.base.is_some() || !m.incrs.is_empty() => {
                    return Err(bad("a second base, or one after incr"))
                }
                "base" => ".base.rdb",
                "incr" => ".incr.rlog",
                _ => return Err(bad("unknown kind")),
            };
            let seq = f
                .strip_prefix(&self.name)
                .and_then(|rest| rest.strip_prefix('.'))
                .and_then(|rest| rest.strip_suffix(suffix))
                .filter(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| bad(&format!("not a file name of the form {}.<number>{suffix}", self.name)))?;
            if seq == 0 || seq > MAX_SEQ {
                return Err(bad("sequence number out of range"));
            }
            if Path::new(f).file_name().and_then(|n| n.to_str()) != Some(f) {
                return Err(bad("a path, not a file name"));
            }
            if m.base.as_deref() == Some(f) || m.incrs.iter().any(|i| i == f) {
                return Err(bad("listed twice"));
            }
            match kind {
                "base" => m.base = Some(f.to_string()),
                _ => m.incrs.push(f.to_string()),
            }
        }
        Ok(m)
    }

    /// Replace the manifest atomically (temp file, fsync, rename, fsync the directory).
    pub fn write_manifest(&mut self, m: Manifest) -> io::Result<()> {
        if self.provisional {
            self.manifest = m;
            return Ok(());
        }
        let mut text = String::from(MANIFEST_HEADER);
        text.push('\n');
        if let Some(b) = &m.base {
            text.push_str(&format!("base {b}\n"));
        }
        for f in &m.incrs {
            text.push_str(&format!("incr {f}\n"));
        }
        let tmp = self.dir.join(format!("temp-{}.manifest.rill", self.name));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        fs::rename(&tmp, self.manifest_path())?;
        sync_dir(&self.dir)?;
        self.manifest = m;
        Ok(())
    }

    /// Create (or truncate) incremental file `seq` with its header, synced.
    pub fn create_incr(&self, seq: u64) -> io::Result<File> {
        let mut f = OpenOptions::new().create(true).write(true).truncate(true).open(self.path(&self.incr_name(seq)))?;
        f.write_all(super::LOG_MAGIC)?;
        f.sync_all()?;
        sync_dir(&self.dir)?;
        Ok(f)
    }

    /// Open an existing incremental file to append to. Not in append mode: the writer
    /// writes each record at its offset, into space that may be preallocated past it (on
    /// Linux, `pwrite` on an `O_APPEND` file writes at the end whatever the offset).
    pub fn open_incr(&self, file: &str) -> io::Result<File> {
        OpenOptions::new().write(true).open(self.path(file))
    }

    /// Remove files of the directory that the manifest no longer names (after a rewrite, or
    /// left over by one that crashed).
    pub fn remove_unlisted(&self) {
        if self.provisional {
            // The files on disk are an earlier log's until the base is written.
            return;
        }
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        let prefix = format!("{}.", self.name);
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let ours = (name.starts_with(&prefix) && (name.ends_with(".incr.rlog") || name.ends_with(".base.rdb")))
                || name.starts_with("temp-");
            let listed = self.manifest.base.as_deref() == Some(&name) || self.manifest.incrs.contains(&name);
            if ours && !listed {
                let _ = fs::remove_file(e.path());
            }
        }
    }

    /// Total size of the files the manifest names, counting the incremental file being
    /// written, `active`, as `active_len` bytes: its logical end, without the space
    /// preallocated after it.
    pub fn total_size(&self, active: &str, active_len: u64) -> u64 {
        self.manifest
            .base
            .iter()
            .chain(self.manifest.incrs.iter())
            .filter_map(
                |f| if f == active { Some(active_len) } else { fs::metadata(self.path(f)).ok().map(|m| m.len()) },
            )
            .sum()
    }

    /// Size of the base file (0 without one).
    pub fn base_size(&self) -> u64 {
        self.manifest.base.as_ref().and_then(|f| fs::metadata(self.path(f)).ok()).map(|m| m.len()).unwrap_or(0)
    }
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// fsync a directory, so a rename or create in it survives a power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn parse(text: &str) -> io::Result<Manifest> {
        Files::new("appendonlydir", "appendonly.aof").parse_manifest(text)
    }

    #[test]
    fn a_manifest_the_server_writes_reads_back() {
        let m = parse("rill-manifest 1\nbase appendonly.aof.7.base.rdb\nincr appendonly.aof.9.incr.rlog\nincr appendonly.aof.8.incr.rlog\n")
            .unwrap();
        assert_eq!(m.base.as_deref(), Some("appendonly.aof.7.base.rdb"));
        assert_eq!(m.incrs, ["appendonly.aof.9.incr.rlog", "appendonly.aof.8.incr.rlog"]);
        let big = format!("rill-manifest 1\nincr appendonly.aof.{MAX_SEQ}.incr.rlog\n");
        assert_eq!(parse(&big).unwrap().incrs.len(), 1);
    }

    /// Names are file names of this directory, of their line's kind, numbered so that the
    /// next number does not wrap, each listed once.
    #[test]
    fn names_outside_the_directory_or_the_scheme_are_refused() {
        for (line, why) in [
            ("incr /etc/passwd", "form"),
            ("incr ../appendonly.aof.1.incr.rlog", "form"),
            ("incr appendonly.aof.1/../../x.incr.rlog", "form"),
            ("incr appendonly.aof./x.incr.rlog", "form"),
            ("incr appendonly.aof.1.base.rdb", "form"),
            ("base appendonly.aof.1.incr.rlog", "form"),
            ("incr appendonly.aof.-1.incr.rlog", "form"),
            ("incr appendonly.aof.+1.incr.rlog", "form"),
            ("incr appendonly.aof.0.incr.rlog", "out of range"),
            ("incr appendonly.aof.18446744073709551615.incr.rlog", "out of range"),
            ("incr appendonly.aof.18446744073709551616.incr.rlog", "form"),
            ("incr appendonly.aof.1.incr.rlog\nincr appendonly.aof.1.incr.rlog", "listed twice"),
            ("incr appendonly.aof.1.incr.rlog\nbase appendonly.aof.2.base.rdb", "second base"),
            ("file appendonly.aof.1.incr.rlog", "unknown kind"),
        ] {
            let err = parse(&format!("rill-manifest 1\n{line}\n")).unwrap_err().to_string();
            assert!(err.contains(why), "{line}: {err}");
        }
    }

    #[test]
    fn a_manifest_larger_than_any_the_server_writes_is_refused_unread() {
        let dir = std::env::temp_dir().join(format!("rill-manifest-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut files = Files::new(dir.to_str().unwrap(), "appendonly.aof");
        let mut text = String::from("rill-manifest 1\n");
        while text.len() as u64 <= MAX_MANIFEST_BYTES {
            text.push_str("\n\n\n\n\n\n\n\n");
        }
        fs::write(files.manifest_path(), &text).unwrap();
        assert!(files.read_manifest().unwrap_err().to_string().contains("larger than"));
        fs::write(files.manifest_path(), "rill-manifest 1\nincr appendonly.aof.3.incr.rlog\n").unwrap();
        assert_eq!(files.read_manifest().unwrap().unwrap().incrs, ["appendonly.aof.3.incr.rlog"]);
        assert_eq!(files.last_seq(), 3);
        fs::remove_dir_all(&dir).unwrap();
    }
}
