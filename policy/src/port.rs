//! Port ranges (`port`): a single port or `LOW-HIGH`, inclusive.

use std::fmt;

/// What a bad port is said to be expected.
pub(crate) const EXPECTED: &str =
    "a port from 0 to 65535 or a range LOW-HIGH, e.g. 6379 or 8000-8099";

/// An inclusive range of ports; a single port is a range of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PortRange {
    pub low: u16,
    pub high: u16,
}

fn number(s: &str) -> Option<u16> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl PortRange {
    /// Parses `P` or `P-Q`. The error is (what is wrong, what was expected).
    pub(crate) fn parse(text: &str) -> Result<PortRange, (String, String)> {
        let (low, high) = match text.split_once('-') {
            Some((l, h)) => (number(l), number(h)),
            None => (number(text), number(text)),
        };
        match (low, high) {
            (Some(low), Some(high)) if low <= high => Ok(PortRange { low, high }),
            (Some(_), Some(_)) => Err((
                "is an empty range".into(),
                "the lower port first, e.g. 8000-8099".into(),
            )),
            _ => Err(("is not a port".into(), EXPECTED.into())),
        }
    }

    /// Whether `port` is in the range.
    pub(crate) fn contains(self, port: u16) -> bool {
        self.low <= port && port <= self.high
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.low == self.high {
            write!(f, "{}", self.low)
        } else {
            write!(f, "{}-{}", self.low, self.high)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_ranges() {
        for (text, want) in [
            ("6379", Some((6379, 6379))),
            ("0", Some((0, 0))),
            ("65535", Some((65535, 65535))),
            ("8000-8099", Some((8000, 8099))),
            ("80-80", Some((80, 80))),
            ("65536", None),
            ("-1", None),
            ("1-", None),
            ("+80", None),
            ("80-70", None),
            ("1-2-3", None),
            ("http", None),
            ("", None),
        ] {
            let got = PortRange::parse(text).ok().map(|r| (r.low, r.high));
            assert_eq!(got, want, "{text}");
        }
        assert_eq!(PortRange::parse("80-80").unwrap().to_string(), "80");
        assert_eq!(
            PortRange::parse("80-70").unwrap_err().0,
            "is an empty range"
        );
        let r = PortRange::parse("8000-8099").unwrap();
        assert!(r.contains(8000) && r.contains(8099) && !r.contains(8100) && !r.contains(7999));
    }
}
