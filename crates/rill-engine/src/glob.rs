//! Redis-style glob matching (`KEYS`, `SCAN MATCH`, `CONFIG GET`, `COMMAND LIST PATTERN`):
//! `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, and `\` escapes, with Redis' edge cases:
//!
//! - A class runs to its `]` or to the end of the pattern; `x-y` is a range whatever `y` is
//!   (`[A-]` is the range `A` to `]`, so the class has no end), reversed ranges are swapped, and
//!   a `\` escape inside a class compares exactly even when case is folded.
//! - A `\` at the very end of the pattern is a literal backslash.
//! - `*` never matches at the end of the string: `*` alone does not match the empty string
//!   (KEYS and SCAN treat the pattern `*` as "everything" before matching).
//!
//! Time: a `*` tries each position of the rest of the string, but once the pattern after one
//! `*` has failed at every position, no longer match for an earlier `*` can help (it would
//! leave less string for the same rest), so the whole match fails there, as in Redis. That
//! keeps patterns such as `a*a*a*a*a*a*a*a*a*a*a*a*b` fast, where plain backtracking on a
//! 40-byte key was still running after five minutes, with the server deaf to everyone. And as
//! in Redis, a match that needs more than 1 000 nested `*` fails.

/// Whether `s` matches `pattern`. `nocase` folds ASCII case.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    matches!(match_from(pattern, s, nocase, 0), Outcome::Match)
}

/// How deep `*` may nest before a match fails.
const MAX_NESTING: u32 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Match,
    /// No match from here; an enclosing `*` may try its next position.
    NoMatch,
    /// No match, and no enclosing `*` can find one either (see the module doc).
    GiveUp,
}

fn same(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

fn match_from(mut p: &[u8], mut s: &[u8], nocase: bool, nesting: u32) -> Outcome {
    if nesting > MAX_NESTING {
        return Outcome::NoMatch;
    }
    while let ([_, ..], [sc, s_rest @ ..]) = (p, s) {
        p = match p {
            [b'*', ..] => {
                // A run of stars is one star.
                let rest = without_leading_stars(p);
                if rest.is_empty() {
                    return Outcome::Match;
                }
                let mut tail = s;
                while !tail.is_empty() {
                    match match_from(rest, tail, nocase, nesting + 1) {
                        Outcome::NoMatch => {}
                        done => return done,
                    }
                    tail = tail.get(1..).unwrap_or_default();
                }
                return Outcome::GiveUp;
            }
            [b'?', rest @ ..] => rest,
            [b'[', body @ ..] => match class(body, *sc, nocase) {
                (true, after) => after,
                (false, _) => return Outcome::NoMatch,
            },
            [b'\\', escaped, rest @ ..] | [escaped, rest @ ..] => {
                if !same(*escaped, *sc, nocase) {
                    return Outcome::NoMatch;
                }
                rest
            }
            [] => break,
        };
        s = s_rest;
        if s.is_empty() {
            // Stars left over match the empty rest.
            p = without_leading_stars(p);
        }
    }
    if p.is_empty() && s.is_empty() {
        Outcome::Match
    } else {
        Outcome::NoMatch
    }
}

fn without_leading_stars(p: &[u8]) -> &[u8] {
    let stars = p.iter().take_while(|&&c| c == b'*').count();
    p.get(stars..).unwrap_or_default()
}

/// Match `c` against the class whose body starts at `p` (just after `[`): whether it is in the
/// class (negated by a leading `^`), and the pattern after the class.
fn class(p: &[u8], c: u8, nocase: bool) -> (bool, &[u8]) {
    let (negated, mut p) = match p {
        [b'^', rest @ ..] => (true, rest),
        _ => (false, p),
    };
    let mut found = false;
    loop {
        match p {
            // The end of the pattern ends an unterminated class.
            [] => break,
            [b'\\', escaped, rest @ ..] => {
                found |= *escaped == c;
                p = rest;
            }
            [b']', rest @ ..] => {
                p = rest;
                break;
            }
            [from, b'-', to, rest @ ..] => {
                let (mut lo, mut hi) = if from <= to { (*from, *to) } else { (*to, *from) };
                let mut c = c;
                if nocase {
                    (lo, hi, c) = (lo.to_ascii_lowercase(), hi.to_ascii_lowercase(), c.to_ascii_lowercase());
                }
                found |= (lo..=hi).contains(&c);
                p = rest;
            }
            [x, rest @ ..] => {
                found |= same(*x, c, nocase);
                p = rest;
            }
        }
    }
    (found != negated, p)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
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

    /// Cases where Redis 8.2.3's KEYS differs from textbook globbing.
    #[test]
    fn redis_edge_cases() {
        // `*` does not match at the end of the string.
        assert!(!glob_match(b"*", b"", false));
        assert!(!glob_match(b"**", b"", false));
        assert!(glob_match(b"a*", b"a", false));
        assert!(glob_match(b"a**", b"a", false));
        // A range may end in `]`; the class then runs to the end of the pattern.
        assert!(glob_match(b"[A-]", b"\\", false));
        assert!(glob_match(b"[*^-][\\", b"\\", false));
        // Reversed ranges are swapped.
        assert!(glob_match(b"[z-a]", b"m", false));
        // A trailing backslash is a literal.
        assert!(glob_match(b"a\\", b"a\\", false));
        // Escapes in a class compare exactly, even with case folded.
        assert!(!glob_match(b"[\\A]", b"a", true));
        assert!(glob_match(b"[A]", b"a", true));
    }

    #[test]
    fn nested_stars_stay_fast_and_limited() {
        let key = [b'a'; 40];
        let pattern = b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        assert!(!glob_match(pattern, &key, false));
        // Redis gives up past 1 000 nested stars.
        let long = vec![b'a'; 50_000];
        assert!(!glob_match(&b"*?".repeat(50_000), &long, false));
        assert!(glob_match(&b"*?".repeat(500), long.get(..500).unwrap_or_default(), false));
    }
}
