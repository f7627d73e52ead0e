//! Redis-style glob matching (`KEYS`, `SCAN MATCH`, `CONFIG GET`, `COMMAND LIST PATTERN`):
//! `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, and `\` escapes.

/// Whether `s` matches `pattern`. `nocase` folds ASCII case.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    glob_inner(pattern, s, nocase, 0)
}

fn lc(c: u8, nocase: bool) -> u8 {
    if nocase {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

fn glob_inner(mut p: &[u8], mut s: &[u8], nocase: bool, depth: u32) -> bool {
    if depth > 1000 {
        return false;
    }
    while let Some((&pc, prest)) = p.split_first() {
        match pc {
            b'*' => {
                let mut rest = prest;
                while let Some((b'*', r)) = rest.split_first() {
                    rest = r;
                }
                if rest.is_empty() {
                    return true;
                }
                for i in 0..=s.len() {
                    if glob_inner(rest, s.get(i..).unwrap_or(&[]), nocase, depth + 1) {
                        return true;
                    }
                }
                return false;
            }
            b'?' => {
                let Some((_, srest)) = s.split_first() else { return false };
                s = srest;
                p = prest;
            }
            b'[' => {
                let Some((&sc, srest)) = s.split_first() else { return false };
                let mut q = prest;
                let not = matches!(q.first(), Some(b'^'));
                if not {
                    q = q.get(1..).unwrap_or(&[]);
                }
                let mut matched = false;
                loop {
                    match q {
                        [] => break,
                        [b']', ..] => {
                            q = q.get(1..).unwrap_or(&[]);
                            break;
                        }
                        [b'\\', c, ..] => {
                            if lc(*c, nocase) == lc(sc, nocase) {
                                matched = true;
                            }
                            q = q.get(2..).unwrap_or(&[]);
                        }
                        [a, b'-', b, ..] if *b != b']' => {
                            let (lo, hi) = if a <= b { (*a, *b) } else { (*b, *a) };
                            let c = lc(sc, nocase);
                            if (lc(lo, nocase)..=lc(hi, nocase)).contains(&c) {
                                matched = true;
                            }
                            q = q.get(3..).unwrap_or(&[]);
                        }
                        [c, ..] => {
                            if lc(*c, nocase) == lc(sc, nocase) {
                                matched = true;
                            }
                            q = q.get(1..).unwrap_or(&[]);
                        }
                    }
                }
                if matched == not {
                    return false;
                }
                p = q;
                s = srest;
            }
            b'\\' if !prest.is_empty() => {
                let Some((&sc, srest)) = s.split_first() else { return false };
                if lc(prest.first().copied().unwrap_or(0), nocase) != lc(sc, nocase) {
                    return false;
                }
                p = prest.get(1..).unwrap_or(&[]);
                s = srest;
            }
            c => {
                let Some((&sc, srest)) = s.split_first() else { return false };
                if lc(c, nocase) != lc(sc, nocase) {
                    return false;
                }
                p = prest;
                s = srest;
            }
        }
    }
    s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match(b"*", b"", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h*llo", b"heeeello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"h\\*llo", b"h*llo", false));
        assert!(!glob_match(b"h\\*llo", b"hello", false));
        assert!(glob_match(b"stream-node-*", b"stream-node-max-bytes", false));
        assert!(glob_match(b"MAXMEMORY", b"maxmemory", true));
    }
}
