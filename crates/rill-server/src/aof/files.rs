//! The log's directory: the manifest and the names of base and incremental files.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const MANIFEST_HEADER: &str = "rill-manifest 1";

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
        let text = match fs::read_to_string(self.manifest_path()) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut lines = text.lines();
        if lines.next() != Some(MANIFEST_HEADER) {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "manifest has no rill-manifest header"));
        }
        let mut m = Manifest::default();
        for line in lines.filter(|l| !l.trim().is_empty()) {
            match line.split_once(' ') {
                Some(("base", f)) if m.base.is_none() && m.incrs.is_empty() => m.base = Some(f.to_string()),
                Some(("incr", f)) => m.incrs.push(f.to_string()),
                _ => return Err(io::Error::new(io::ErrorKind::InvalidData, format!("bad manifest line '{line}'"))),
            }
        }
        self.manifest = m.clone();
        Ok(Some(m))
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

/// fsync a directory, so a rename or create in it survives a power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
