//! A test that cannot run all it checks says so through [`skip`], never by returning early in
//! silence: a skipped test must not read as a passed one.
//!
//! libtest has no "skipped" outcome at run time, and it hides the output of passing tests, so
//! a skip leaves a marker file where `scripts/test` counts it: one file per skipping test in
//! the directory named by `RILL_TEST_SKIP_DIR`, holding `EXE<TAB>TEST<TAB>REASON` lines, where
//! EXE is the test executable's file name (as in cargo's `Running ... (target/debug/deps/EXE)`
//! line) and TEST the test's name (libtest runs each test on a thread named after it). The
//! summary then counts it as skipped, not passed (or as failed, if it failed later).
//!
//! Under `CI=true` nothing may be skipped: [`skip`] panics, so a missing tool, privilege or
//! reference server fails the run instead of thinning it.

use crate::binaries::ci;
use std::io::Write as _;
use std::path::PathBuf;

/// The environment variable naming the directory for skip markers (set by `scripts/test`).
pub const SKIP_DIR_ENV: &str = "RILL_TEST_SKIP_DIR";

/// Records that the running test skips all or part of its checks, for `reason` (what is
/// missing, and how to provide it). Prints `SKIPPED: TEST: REASON` on stderr and leaves a
/// marker for `scripts/test`'s count. Under `CI=true` it panics instead: CI must have what
/// every test needs.
///
/// Call it once per missing thing, then return or go on with what can still be checked; a
/// test counts as skipped once however many times it calls this.
#[track_caller]
pub fn skip(reason: &str) {
    let test = current_test();
    if ci() {
        panic!("{test} would skip under CI=true, where every test must run: {reason}");
    }
    eprintln!("SKIPPED: {test}: {reason}");
    if let Some(dir) = std::env::var_os(SKIP_DIR_ENV).filter(|d| !d.is_empty()) {
        let exe = current_exe_name();
        let path = PathBuf::from(dir).join(marker_name(&exe, &test));
        let line = format!("{exe}\t{test}\t{}\n", reason.replace(['\t', '\n'], " "));
        // A skip that cannot be counted would pass as a pass: fail loudly instead.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!("cannot record the skip of {test} in {}: {e}", path.display());
        }
    }
}

/// The running test's name: libtest names each test's thread after it. A thread the test
/// spawned has no name of its own; it is named by its id then.
pub fn current_test() -> String {
    let thread = std::thread::current();
    match thread.name() {
        Some(name) if name != "main" => name.to_owned(),
        _ => format!("{:?}", thread.id()),
    }
}

/// The file name of the running executable (`it-0123abcd...`), or `?`.
fn current_exe_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "?".into())
}

/// One file per (executable, test): repeated skips of one test append to it.
fn marker_name(exe: &str, test: &str) -> String {
    let safe = |s: &str| {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '.' }).collect::<String>()
    };
    format!("{}..{}", safe(exe), safe(test))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn marker_names_are_plain_file_names() {
        let name = marker_name("it-0a1b", "security::no_client/../x y");
        assert_eq!(name, "it-0a1b..security..no_client....x.y");
        assert!(!name.contains('/'));
    }

    #[test]
    fn the_test_name_is_the_thread_name() {
        assert_eq!(current_test(), "skip::tests::the_test_name_is_the_thread_name");
    }

    #[test]
    #[ignore = "helper run by a_skip_leaves_one_marker_and_fails_under_ci"]
    fn skipping_helper() {
        skip("a reason\twith a tab");
        skip("a second reason");
    }

    /// This test binary runs [`skipping_helper`] without CI (a marker with both reasons, one
    /// file) and with `CI=true` (a failure naming the reason).
    #[test]
    fn a_skip_leaves_one_marker_and_fails_under_ci() {
        let dir = crate::TempDir::new("rill-testkit-skip");
        let exe = std::env::current_exe().unwrap();
        let run = |ci: &str| {
            std::process::Command::new(&exe)
                .args(["--exact", "skip::tests::skipping_helper", "--ignored", "--nocapture"])
                .env(SKIP_DIR_ENV, dir.path())
                .env("CI", ci)
                .output()
                .unwrap()
        };
        let out = run("");
        assert!(out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("SKIPPED: skip::tests::skipping_helper: a reason\twith a tab"), "{stderr}");
        let markers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(markers.len(), 1, "{markers:?}");
        let exe_name = exe.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            std::fs::read_to_string(&markers[0]).unwrap(),
            format!(
                "{exe_name}\tskip::tests::skipping_helper\ta reason with a tab\n\
                 {exe_name}\tskip::tests::skipping_helper\ta second reason\n"
            )
        );

        let out = run("true");
        assert!(!out.status.success(), "a skip under CI=true passed: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(text.contains("would skip under CI=true, where every test must run: a reason"), "{text}");
    }
}
