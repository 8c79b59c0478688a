//! Program name patterns (`program`): `*` any run of bytes, `?` one byte, `[abc]`, `[a-z]`,
//! `[!abc]` one byte of (or not of) a set. A pattern with a `/` is matched against the
//! executable's full path, any other against its basename. Matching does not allocate.

use std::fmt;

/// What a bad pattern is said to be expected.
pub(crate) const EXPECTED: &str =
    "a program name or glob, e.g. redis-server or redis-*, with every '[' closed by ']'";

/// A checked pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Glob(String);

/// Matches one `[...]` class starting at `p[start] == b'['` against byte `c`: whether it matched
/// and where the pattern goes on, or `None` when the class is not closed.
fn class(p: &[u8], start: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = matches!(p.get(i), Some(b'!') | Some(b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let lo = *p.get(i)?;
        if lo == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        match (p.get(i + 1), p.get(i + 2)) {
            (Some(b'-'), Some(&hi)) if hi != b']' => {
                matched |= lo <= c && c <= hi;
                i += 3;
            }
            _ => {
                matched |= lo == c;
                i += 1;
            }
        }
    }
}

/// Whether `s` matches pattern `p` (both bytes; a pattern is checked before use, so an unclosed
/// class cannot occur here, and would simply not match).
fn matches(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0usize, 0usize);
    // Where the last `*` was: the pattern position after it, and how much of `s` it has taken.
    let mut star: Option<(usize, usize)> = None;
    while let Some(&c) = s.get(si) {
        let step = match p.get(pi) {
            Some(b'*') => {
                star = Some((pi + 1, si));
                pi += 1;
                continue;
            }
            Some(b'?') => Some(pi + 1),
            Some(b'[') => match class(p, pi, c) {
                Some((true, next)) => Some(next),
                _ => None,
            },
            Some(&q) if q == c => Some(pi + 1),
            _ => None,
        };
        match (step, star) {
            (Some(next), _) => {
                pi = next;
                si += 1;
            }
            (None, Some((after, taken))) => {
                pi = after;
                si = taken + 1;
                star = Some((after, taken + 1));
            }
            (None, None) => return false,
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|&b| b == b'*'))
}

impl Glob {
    /// Checks a pattern. The error is (what is wrong, what was expected).
    pub(crate) fn parse(text: &str) -> Result<Glob, (String, String)> {
        let p = text.as_bytes();
        let mut i = 0;
        while let Some(&b) = p.get(i) {
            i = match b {
                b'[' => match class(p, i, 0) {
                    Some((_, next)) => next,
                    None => return Err(("has a '[' that is not closed".into(), EXPECTED.into())),
                },
                _ => i + 1,
            };
        }
        if text.is_empty() {
            return Err(("is not a program name".into(), EXPECTED.into()));
        }
        Ok(Glob(text.to_string()))
    }

    /// Whether the executable at `exe` (a path as the kernel gives it) matches.
    pub(crate) fn matches_exe(&self, exe: &[u8]) -> bool {
        let p = self.0.as_bytes();
        if p.contains(&b'/') {
            matches(p, exe)
        } else {
            let base = match exe.iter().rposition(|&b| b == b'/') {
                Some(i) => exe.get(i + 1..).unwrap_or_default(),
                None => exe,
            };
            matches(p, base)
        }
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matching() {
        for (p, s, want) in [
            ("redis-server", "redis-server", true),
            ("redis-server", "redis-server2", false),
            ("redis-*", "redis-benchmark", true),
            ("redis-*", "redis-", true),
            ("redis-*", "redis", false),
            ("*", "", true),
            ("", "", true),
            ("*sql*", "mysqld", true),
            ("*sql*", "postgres", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("?ysqld", "mysqld", true),
            ("?ysqld", "ysqld", false),
            ("[mp]ysqld", "pysqld", true),
            ("[!mp]ysqld", "mysqld", false),
            ("[!mp]ysqld", "xysqld", true),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("[]]x", "]x", true),
            ("[a-]x", "-x", true),
            ("**", "anything", true),
            (
                "*a",
                "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                false,
            ),
        ] {
            assert_eq!(matches(p.as_bytes(), s.as_bytes()), want, "{p} vs {s}");
        }
    }

    #[test]
    fn basename_or_full_path() {
        let name = Glob::parse("redis-*").unwrap();
        assert!(name.matches_exe(b"/usr/bin/redis-server"));
        assert!(name.matches_exe(b"redis-server"));
        assert!(!name.matches_exe(b"/opt/redis-7/bin/server"));
        let path = Glob::parse("/usr/bin/*").unwrap();
        assert!(path.matches_exe(b"/usr/bin/redis-server"));
        assert!(!path.matches_exe(b"/usr/local/bin/redis-server"));
        assert!(!path.matches_exe(b"redis-server"));
        let exact = Glob::parse("/usr/bin/redis-server").unwrap();
        assert!(exact.matches_exe(b"/usr/bin/redis-server"));
        assert!(!exact.matches_exe(b"/usr/bin/redis-server.bak"));
        assert!(name.matches_exe(b"/odd/\xff/redis-\xfe"));
    }

    #[test]
    fn unclosed_classes_are_refused() {
        assert!(Glob::parse("[abc").is_err());
        assert!(Glob::parse("x[!").is_err());
        assert!(Glob::parse("[]").is_err());
        assert!(Glob::parse("").is_err());
        assert!(Glob::parse("[]]").is_ok());
        assert!(Glob::parse("a]").is_ok());
    }
}
