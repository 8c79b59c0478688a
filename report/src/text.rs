//! Strings that a program or another user chose (a program's name, a path, a cgroup or unit name,
//! a device name from the kernel), as the text views print them: with their control characters
//! escaped, so that none can colour the terminal, move its cursor, or fake a row of its own. The
//! JSON views need none of this (JSON escapes control characters itself).

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` is shown escaped: a C0 or C1 control character or DEL, or one of Unicode's
/// invisible direction controls (which reorder the text around them on a terminal).
fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with its control characters escaped as a shell's `$'...'` would write them: `\n`, `\t`,
/// `\r`, `\e` (ESC), else `\xNN` below U+0100 and `\u{N}` above; `s` itself when it has none.
pub fn safe(s: &str) -> Cow<'_, str> {
    if !s.chars().any(escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{1b}' => out.push_str("\\e"),
            c if escaped(c) && (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if escaped(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::safe;

    #[test]
    fn control_characters_are_escaped_and_nothing_else_is() {
        assert_eq!(safe("ev\u{1b}[31mil\nFAKE"), "ev\\e[31mil\\nFAKE");
        assert_eq!(safe("a\tb\rc\u{7}\u{7f}\u{9b}"), "a\\tb\\rc\\x07\\x7f\\x9b");
        assert_eq!(safe("abc\u{202e}txt.exe"), "abc\\u{202e}txt.exe");
        assert!(matches!(
            safe("/usr/bin/redis-server é ü"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
