//! The one-line syntax: `RULE; RULE; ...`, `RULE := ACTION QUALIFIER*`, each qualifier at most
//! once and in any order, its values separated by commas. Every error names the token and its
//! byte offset.

use crate::addr::{self, Cidr};
use crate::error::ParseError;
use crate::glob::{self, Glob};
use crate::lex::{tokens, Kind, Token};
use crate::port::{self, PortRange};
use crate::rule::Rule;
use crate::{Action, Role};

/// What may follow an action.
const QUALIFIERS: &str = "one of program, role, remote, local, port";
/// What may start a rule.
const ACTIONS: &str = "smc or tcp";

/// The qualifiers, in canonical order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Qualifier {
    Program,
    Role,
    Remote,
    Local,
    Port,
}

impl Qualifier {
    fn of(word: &str) -> Option<Qualifier> {
        [
            ("program", Qualifier::Program),
            ("role", Qualifier::Role),
            ("remote", Qualifier::Remote),
            ("local", Qualifier::Local),
            ("port", Qualifier::Port),
        ]
        .into_iter()
        .find(|(name, _)| word.eq_ignore_ascii_case(name))
        .map(|(_, q)| q)
    }

    /// What a value of this qualifier looks like.
    fn expected(self) -> &'static str {
        match self {
            Qualifier::Program => glob::EXPECTED,
            Qualifier::Role => "client or server",
            Qualifier::Remote | Qualifier::Local => addr::EXPECTED,
            Qualifier::Port => port::EXPECTED,
        }
    }
}

fn action(t: &Token<'_>) -> Result<Action, ParseError> {
    if t.kind == Kind::Word {
        if t.text.eq_ignore_ascii_case("smc") {
            return Ok(Action::Smc);
        }
        if t.text.eq_ignore_ascii_case("tcp") {
            return Ok(Action::Tcp);
        }
    }
    Err(ParseError::new(
        t.offset,
        t.text,
        "is not an action",
        ACTIONS,
    ))
}

fn role(t: &Token<'_>) -> Result<Role, ParseError> {
    if t.text.eq_ignore_ascii_case("client") {
        Ok(Role::Client)
    } else if t.text.eq_ignore_ascii_case("server") {
        Ok(Role::Server)
    } else {
        Err(ParseError::new(
            t.offset,
            t.text,
            "is not a role",
            "client or server",
        ))
    }
}

/// Parses each value with `parse`, turning its (problem, expected) into a positioned error.
fn each<T>(
    values: &[Token<'_>],
    parse: fn(&str) -> Result<T, (String, String)>,
) -> Result<Vec<T>, ParseError> {
    values
        .iter()
        .map(|t| {
            parse(t.text)
                .map_err(|(problem, expected)| ParseError::new(t.offset, t.text, problem, expected))
        })
        .collect()
}

/// Reads `VALUE (, VALUE)*` from `toks[*i..]` for the qualifier at `kw`.
fn values<'a>(
    toks: &[Token<'a>],
    i: &mut usize,
    kw: &Token<'a>,
    q: Qualifier,
) -> Result<Vec<Token<'a>>, ParseError> {
    let mut out = Vec::new();
    loop {
        match toks.get(*i) {
            Some(t) if t.kind == Kind::Word => out.push(*t),
            Some(t) => {
                return Err(ParseError::new(
                    t.offset,
                    t.text,
                    format!("comes where a value of {} belongs", kw.text),
                    q.expected(),
                ))
            }
            None => {
                return Err(match toks.get((*i).wrapping_sub(1)) {
                    Some(comma) if !out.is_empty() => ParseError::new(
                        comma.offset,
                        comma.text,
                        format!("ends the values of {} with none after it", kw.text),
                        q.expected(),
                    ),
                    _ => ParseError::new(kw.offset, kw.text, "has no value", q.expected()),
                })
            }
        }
        *i += 1;
        match toks.get(*i) {
            Some(t) if t.kind == Kind::Comma => *i += 1,
            _ => return Ok(out),
        }
    }
}

/// Parses the tokens of one rule (not empty, no `;`).
fn rule(toks: &[Token<'_>]) -> Result<Rule, ParseError> {
    let mut i = 0;
    let first = toks
        .get(i)
        .ok_or_else(|| ParseError::new(0, "", "has no rule", ACTIONS))?;
    let mut r = Rule {
        action: action(first)?,
        programs: Vec::new(),
        role: None,
        remote: Vec::new(),
        local: Vec::new(),
        ports: Vec::new(),
    };
    i += 1;
    let mut seen: Vec<Qualifier> = Vec::new();
    while let Some(kw) = toks.get(i) {
        let q = match Qualifier::of(kw.text) {
            Some(q) if kw.kind == Kind::Word => q,
            _ => {
                return Err(ParseError::new(
                    kw.offset,
                    kw.text,
                    "is not a qualifier",
                    QUALIFIERS,
                ))
            }
        };
        if seen.contains(&q) {
            return Err(ParseError::new(
                kw.offset,
                kw.text,
                "is given twice in this rule",
                "each qualifier at most once per rule (list several values with ',')",
            ));
        }
        seen.push(q);
        i += 1;
        let vals = values(toks, &mut i, kw, q)?;
        match q {
            Qualifier::Program => r.programs = each(&vals, Glob::parse)?,
            Qualifier::Role => {
                if let Some(extra) = vals.get(1) {
                    return Err(ParseError::new(
                        extra.offset,
                        extra.text,
                        "is a second role",
                        "one role: client or server",
                    ));
                }
                r.role = vals.first().map(role).transpose()?;
            }
            Qualifier::Remote => r.remote = each(&vals, Cidr::parse)?,
            Qualifier::Local => r.local = each(&vals, Cidr::parse)?,
            Qualifier::Port => r.ports = each(&vals, PortRange::parse)?,
        }
    }
    Ok(r)
}

/// Parses a whole policy: the qualified rules, then the default rule if there is one.
pub(crate) fn policy(s: &str) -> Result<(Vec<Rule>, Option<Action>), ParseError> {
    let toks = tokens(s);
    let mut rules = Vec::new();
    // The default rule, with the offset of its action.
    let mut default: Option<(Action, usize)> = None;
    for part in toks.split(|t| t.kind == Kind::Semi) {
        let Some(first) = part.first() else {
            continue; // an empty rule: `;;` or a trailing `;`
        };
        if let Some((_, at)) = default {
            return Err(ParseError::new(
                first.offset,
                first.text,
                format!("starts a rule after the default rule at offset {at}, which always matches, so it is never reached"),
                "the default rule (an action alone) last",
            ));
        }
        let r = rule(part)?;
        if r.is_default() {
            default = Some((r.action, first.offset));
        } else {
            rules.push(r);
        }
    }
    Ok((rules, default.map(|(a, _)| a)))
}
