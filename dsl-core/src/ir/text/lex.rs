//! The tokens of the text form, with their line and column. `;` starts a comment that runs
//! to the end of the line; `@` starts a source location that does.

use super::parse::{ParseError, Pos};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// `%12`.
    Reg(u32),
    /// A number as bits: decimal, `0x` hex, `0f` hex f32 bits, or a decimal f32 (`1.5`,
    /// `-2e3`).
    Num(u64),
    /// A keyword, a mnemonic with its suffixes, or a name: letters, digits, `_`, `.`, `::`.
    Word(String),
    /// A quoted string, unescaped.
    Str(String),
    /// One of `, = { } [ ] + - : < >`.
    Sym(char),
    /// `..` between the registers of a run.
    DotDot,
    /// `@file:line:col`: the text after the `@`.
    Loc(String),
}

#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub pos: Pos,
}

/// The tokens of each non-empty line, in order.
pub(crate) fn lex(text: &str) -> Result<Vec<Vec<Token>>, ParseError> {
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let toks = lex_line(line, i as u32 + 1)?;
        if !toks.is_empty() {
            lines.push(toks);
        }
    }
    Ok(lines)
}

fn is_word_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

fn lex_line(line: &str, number: u32) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let pos = Pos {
            line: number,
            col: i as u32 + 1,
        };
        let err = |message: String| ParseError::at(pos, message);
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == ';' {
            break;
        }
        let tok = if c == '@' {
            let rest: String = chars[i + 1..].iter().collect();
            i = chars.len();
            Tok::Loc(rest.trim().to_string())
        } else if c == '%' {
            let start = i + 1;
            let mut j = start;
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
            if j == start {
                return Err(err(
                    "`%` starts a register: `%` and its number, like `%12`".into()
                ));
            }
            let digits: String = chars[start..j].iter().collect();
            i = j;
            Tok::Reg(
                digits
                    .parse()
                    .map_err(|_| err(format!("register number {digits} is too large")))?,
            )
        } else if c.is_ascii_digit() || negative_number(&chars, i) {
            let mut j = i + 1;
            while j < chars.len()
                && (chars[j].is_ascii_alphanumeric()
                    || chars[j] == '_'
                    || (chars[j] == '.' && chars.get(j + 1) != Some(&'.'))
                    || ((chars[j] == '-' || chars[j] == '+')
                        && matches!(chars[j - 1], 'e' | 'E')
                        && !is_hex_prefixed(&chars[i..j])))
            {
                j += 1;
            }
            let s: String = chars[i..j].iter().collect();
            i = j;
            Tok::Num(number_bits(&s).ok_or_else(|| err(format!("`{s}` is not a number")))?)
        } else if is_word_start(c) {
            let mut j = i;
            while j < chars.len() {
                if is_word_char(chars[j]) {
                    j += 1;
                } else if chars[j] == ':' && chars.get(j + 1) == Some(&':') {
                    j += 2;
                } else {
                    break;
                }
            }
            let s: String = chars[i..j].iter().collect();
            i = j;
            Tok::Word(s)
        } else if c == '"' {
            let (s, end) = string(&chars, i).map_err(|(at, m)| {
                ParseError::at(
                    Pos {
                        line: number,
                        col: at as u32 + 1,
                    },
                    m,
                )
            })?;
            i = end;
            Tok::Str(s)
        } else if c == '.' && chars.get(i + 1) == Some(&'.') {
            i += 2;
            Tok::DotDot
        } else if ",={}[]+-:<>".contains(c) {
            i += 1;
            Tok::Sym(c)
        } else {
            return Err(err(format!("unexpected character `{c}`")));
        };
        out.push(Token { tok, pos });
    }
    Ok(out)
}

fn is_hex_prefixed(s: &[char]) -> bool {
    matches!(
        s,
        ['-', '0', 'x' | 'X' | 'f' | 'F', ..] | ['0', 'x' | 'X' | 'f' | 'F', ..]
    )
}

/// A `-` that starts a number: before a digit, where no value ends (`[%5-16]` subtracts).
fn negative_number(chars: &[char], i: usize) -> bool {
    chars[i] == '-'
        && chars.get(i + 1).is_some_and(char::is_ascii_digit)
        && (i == 0 || matches!(chars[i - 1], ' ' | '\t' | ',' | '{' | '='))
}

/// The bits of a number token; a negative integer as its two's complement in 64 bits.
fn number_bits(s: &str) -> Option<u64> {
    if let Some(abs) = s.strip_prefix('-') {
        if abs.contains(['.', 'e', 'E']) && !is_hex_prefixed(&abs.chars().collect::<Vec<_>>()) {
            return abs.parse::<f32>().ok().map(|f| (-f).to_bits() as u64);
        }
        return number_bits(abs).map(|n| (n as i64).wrapping_neg() as u64);
    }
    let clean = s.replace('_', "");
    if let Some(hex) = clean
        .strip_prefix("0x")
        .or_else(|| clean.strip_prefix("0X"))
    {
        return u64::from_str_radix(hex, 16).ok();
    }
    if let Some(hex) = clean
        .strip_prefix("0f")
        .or_else(|| clean.strip_prefix("0F"))
    {
        return u32::from_str_radix(hex, 16).ok().map(u64::from);
    }
    if clean.contains(['.', 'e', 'E']) {
        return clean.parse::<f32>().ok().map(|f| f.to_bits() as u64);
    }
    clean.parse().ok()
}

/// The string starting at the quote `chars[start]`, and the index after its closing quote.
fn string(chars: &[char], start: usize) -> Result<(String, usize), (usize, String)> {
    let mut s = String::new();
    let mut i = start + 1;
    loop {
        match chars.get(i) {
            None => return Err((start, "this string has no closing `\"`".into())),
            Some('"') => return Ok((s, i + 1)),
            Some('\\') => {
                let c = match chars.get(i + 1) {
                    Some('n') => '\n',
                    Some('t') => '\t',
                    Some('\\') => '\\',
                    Some('"') => '"',
                    Some('u') => {
                        let close = (i + 2..chars.len()).find(|&j| chars[j] == '}');
                        let code = close
                            .filter(|_| chars.get(i + 2) == Some(&'{'))
                            .and_then(|end| {
                                let hex: String = chars[i + 3..end].iter().collect();
                                u32::from_str_radix(&hex, 16).ok().map(|v| (v, end))
                            })
                            .and_then(|(v, end)| char::from_u32(v).map(|c| (c, end)));
                        let Some((c, end)) = code else {
                            return Err((i, "expected `\\u{HEX}`".into()));
                        };
                        s.push(c);
                        i = end + 1;
                        continue;
                    }
                    _ => {
                        return Err((
                            i,
                            "unknown escape: use \\n, \\t, \\\\, \\\" or \\u{HEX}".into(),
                        ));
                    }
                };
                s.push(c);
                i += 2;
            }
            Some(&c) => {
                s.push(c);
                i += 1;
            }
        }
    }
}

/// `s` as a quoted string the lexer reads back as `s`.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `s` lexes as one word (else it is printed quoted).
pub(crate) fn is_word(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next().is_some_and(is_word_start) && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
