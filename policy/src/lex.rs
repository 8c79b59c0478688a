//! Splitting a one-line policy into words, commas and semicolons, each with its byte offset, so
//! that every error can point at the token it is about. Whitespace only separates.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A run of characters that are neither whitespace nor `,` nor `;`.
    Word,
    /// `,`: separates the values of one qualifier.
    Comma,
    /// `;`: separates rules.
    Semi,
}

/// One token of the policy string.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Token<'a> {
    pub kind: Kind,
    pub text: &'a str,
    pub offset: usize,
}

/// The tokens of `s`, in order.
pub(crate) fn tokens<'a>(s: &'a str) -> Vec<Token<'a>> {
    let mut out = Vec::new();
    let mut word_start: Option<usize> = None;
    let word = |out: &mut Vec<Token<'a>>, start: usize, end: usize| {
        out.push(Token {
            kind: Kind::Word,
            text: s.get(start..end).unwrap_or_default(),
            offset: start,
        })
    };
    for (i, c) in s.char_indices() {
        let kind = match c {
            ',' => Some(Kind::Comma),
            ';' => Some(Kind::Semi),
            _ if c.is_whitespace() => None,
            _ => {
                word_start.get_or_insert(i);
                continue;
            }
        };
        if let Some(start) = word_start.take() {
            word(&mut out, start, i);
        }
        if let Some(kind) = kind {
            out.push(Token {
                kind,
                text: s.get(i..i + 1).unwrap_or_default(),
                offset: i,
            });
        }
    }
    if let Some(start) = word_start {
        word(&mut out, start, s.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_commas_semicolons_and_offsets() {
        let t = tokens(" smc port 1 ,2;tcp\t");
        let got: Vec<(Kind, &str, usize)> = t.iter().map(|t| (t.kind, t.text, t.offset)).collect();
        assert_eq!(
            got,
            vec![
                (Kind::Word, "smc", 1),
                (Kind::Word, "port", 5),
                (Kind::Word, "1", 10),
                (Kind::Comma, ",", 12),
                (Kind::Word, "2", 13),
                (Kind::Semi, ";", 14),
                (Kind::Word, "tcp", 15),
            ]
        );
        let t = tokens("é;ü");
        assert_eq!(t[0].text, "é");
        assert_eq!(t[2].offset, 3);
        assert!(tokens(" \t\n").is_empty());
    }
}
