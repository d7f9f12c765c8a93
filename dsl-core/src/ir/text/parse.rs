//! Reads the text form back into a [`Kernel`]. Errors say where (line:column) and what was
//! expected there.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Mutex;

use crate::ir::{
    Block, ElemTy, Inst, Kernel, LaunchBounds, Operand, Param, ParamKind, Reg, SmemBuffer,
    SourceLoc, StageId, Stmt, Ty,
};

use super::OpKind;
use super::lex::{Tok, Token, lex};
use super::line::{Arg, Line};
use super::ops::build;
use super::words::Word;

/// A place in the text, 1-based.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

/// Why the text is not a kernel, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: u32,
    pub col: u32,
    pub message: String,
}

impl ParseError {
    pub(crate) fn at(pos: Pos, message: String) -> ParseError {
        ParseError {
            line: pos.line,
            col: pos.col,
            message,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Parses a kernel; ops without a location get `<kir>` and their own line and column.
pub fn parse(text: &str) -> Result<Kernel, ParseError> {
    parse_named(text, "<kir>")
}

/// Parses a kernel; ops without a location get `source` and their own line and column, so
/// that a fault in a hand-written kernel points into its file.
pub fn parse_named(text: &str, source: &str) -> Result<Kernel, ParseError> {
    let lines = lex(text)?;
    let mut p = Parser {
        lines,
        next: 0,
        source: intern(source),
        types: Vec::new(),
        first_seen: Vec::new(),
        params: Vec::new(),
        stage: None,
        last: Pos::default(),
    };
    p.kernel()
}

/// Source file names live as long as the program, as those of traced ops do: a parsed
/// kernel names few files, and each is leaked once.
fn intern(s: &str) -> &'static str {
    static FILES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut files = FILES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = files.get(s) {
        return f;
    }
    let f: &'static str = Box::leak(s.to_string().into_boxed_str());
    files.insert(f);
    f
}

struct Parser {
    lines: Vec<Vec<Token>>,
    next: usize,
    source: &'static str,
    /// Per register: its type and where that was said.
    types: Vec<Option<(Ty, Pos)>>,
    /// Per register: where it first appears.
    first_seen: Vec<Option<Pos>>,
    params: Vec<Param>,
    stage: Option<StageId>,
    last: Pos,
}

/// The tokens of one line, taken in order.
struct Cursor<'t> {
    toks: &'t [Token],
    i: usize,
    /// Just past the line, for "expected ... at the end of the line".
    end: Pos,
}

impl<'t> Cursor<'t> {
    fn new(toks: &'t [Token]) -> Self {
        let last = toks.last().map(|t| t.pos).unwrap_or_default();
        Cursor {
            toks,
            i: 0,
            end: Pos {
                line: last.line,
                col: last.col + 1,
            },
        }
    }

    fn peek(&self) -> Option<&'t Tok> {
        self.toks.get(self.i).map(|t| &t.tok)
    }

    fn peek2(&self) -> Option<&'t Tok> {
        self.toks.get(self.i + 1).map(|t| &t.tok)
    }

    fn pos(&self) -> Pos {
        self.toks.get(self.i).map_or(self.end, |t| t.pos)
    }

    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError::at(self.pos(), message.into())
    }

    fn bump(&mut self) -> Option<&'t Tok> {
        let t = self.peek();
        self.i += 1;
        t
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Sym(c)) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), ParseError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.err(format!("expected `{c}`")))
        }
    }

    fn keyword(&mut self, w: &str) -> Result<(), ParseError> {
        match self.peek() {
            Some(Tok::Word(s)) if s == w => {
                self.i += 1;
                Ok(())
            }
            _ => Err(self.err(format!("expected `{w}`"))),
        }
    }

    fn word(&mut self, what: &str) -> Result<&'t str, ParseError> {
        match self.peek() {
            Some(Tok::Word(s)) => {
                self.i += 1;
                Ok(s)
            }
            _ => Err(self.err(format!("expected {what}"))),
        }
    }

    fn name(&mut self, what: &str) -> Result<String, ParseError> {
        match self.peek() {
            Some(Tok::Word(s) | Tok::Str(s)) => {
                self.i += 1;
                Ok(s.clone())
            }
            _ => Err(self.err(format!("expected {what}"))),
        }
    }

    fn string(&mut self, what: &str) -> Result<String, ParseError> {
        match self.peek() {
            Some(Tok::Str(s)) => {
                self.i += 1;
                Ok(s.clone())
            }
            _ => Err(self.err(format!("expected {what} as a quoted string"))),
        }
    }

    fn keyword_of<W: Word>(&mut self) -> Result<W, ParseError> {
        let pos = self.pos();
        let w = self.word(W::WHAT)?;
        W::from_word(w).ok_or_else(|| {
            ParseError::at(
                pos,
                format!("`{w}` is not {} (one of {})", W::WHAT, W::WORDS.join(", ")),
            )
        })
    }

    fn num<T: TryFrom<u64>>(&mut self, what: &str) -> Result<T, ParseError> {
        let pos = self.pos();
        match self.peek() {
            Some(Tok::Num(n)) => {
                self.i += 1;
                T::try_from(*n)
                    .map_err(|_| ParseError::at(pos, format!("{n} is too large for {what}")))
            }
            _ => Err(self.err(format!("expected {what} (a number)"))),
        }
    }

    fn triple(&mut self, what: &str) -> Result<[u32; 3], ParseError> {
        let x = self.num(what)?;
        self.expect(',')?;
        let y = self.num(what)?;
        self.expect(',')?;
        let z = self.num(what)?;
        Ok([x, y, z])
    }

    fn done(&self) -> Result<(), ParseError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.err("unexpected text at the end of the line")),
        }
    }

    fn at_end(&self) -> bool {
        self.i >= self.toks.len()
    }
}

impl Parser {
    fn line(&mut self) -> Option<Vec<Token>> {
        let toks = self.lines.get(self.next)?.clone();
        self.next += 1;
        self.last = toks[0].pos;
        Some(toks)
    }

    fn end_err(&self, message: &str) -> ParseError {
        ParseError::at(
            Pos {
                line: self.last.line + 1,
                col: 1,
            },
            message.to_string(),
        )
    }

    fn note_reg(&mut self, r: u32, pos: Pos) {
        let i = r as usize;
        if self.first_seen.len() <= i {
            self.first_seen.resize(i + 1, None);
            self.types.resize(i + 1, None);
        }
        self.first_seen[i].get_or_insert(pos);
    }

    fn set_type(&mut self, r: u32, ty: Ty, pos: Pos) -> Result<(), ParseError> {
        self.note_reg(r, pos);
        match self.types[r as usize] {
            Some((had, at)) if had != ty => Err(ParseError::at(
                pos,
                format!(
                    "%{r} is {} here but {} at {}:{}",
                    ty.word(),
                    had.word(),
                    at.line,
                    at.col
                ),
            )),
            Some(_) => Ok(()),
            None => {
                self.types[r as usize] = Some((ty, pos));
                Ok(())
            }
        }
    }

    fn kernel(&mut self) -> Result<Kernel, ParseError> {
        let toks = self.line().ok_or_else(|| {
            ParseError::at(Pos { line: 1, col: 1 }, "expected `kernel NAME`".into())
        })?;
        let mut c = Cursor::new(&toks);
        c.keyword("kernel")?;
        let name = c.name("the kernel's name")?;
        c.done()?;
        let toks = self
            .line()
            .ok_or_else(|| self.end_err("expected `target sm_90a|sm_100a`"))?;
        let mut c = Cursor::new(&toks);
        c.keyword("target")?;
        let target = c.keyword_of()?;
        c.done()?;
        let toks = self
            .line()
            .ok_or_else(|| self.end_err("expected `threads X, Y, Z`"))?;
        let mut c = Cursor::new(&toks);
        c.keyword("threads")?;
        let threads = c.triple("a thread count")?;
        c.done()?;
        let mut launch = LaunchBounds {
            threads,
            ..LaunchBounds::default()
        };
        let mut smem_bytes = 0;
        let mut smem_buffers = Vec::new();
        let mut stages = Vec::new();
        loop {
            let Some(toks) = self.line() else {
                return Err(self.end_err("expected the body: `{`"));
            };
            let mut c = Cursor::new(&toks);
            let pos = c.pos();
            if c.eat('{') {
                c.done()?;
                break;
            }
            let key = c.word("a header line (min_ctas_per_sm, max_regs, cluster, param, smem, smem_buffer, stage, reg) or `{`")?;
            match key {
                "min_ctas_per_sm" => launch.min_ctas_per_sm = Some(c.num("a CTA count")?),
                "max_regs" => launch.max_regs = Some(c.num("a register count")?),
                "cluster" => launch.cluster = Some(c.triple("a cluster extent")?),
                "param" => {
                    let name = c.name("the parameter's name")?;
                    if self.params.iter().any(|p| p.name == name) {
                        return Err(ParseError::at(
                            pos,
                            format!("parameter `{name}` is declared twice"),
                        ));
                    }
                    c.expect(':')?;
                    let kind = param_kind(&mut c)?;
                    self.params.push(Param { name, kind });
                }
                "smem" => smem_bytes = c.num("a byte count")?,
                "smem_buffer" => {
                    let name = c.name("the buffer's name")?;
                    let field = |c: &mut Cursor<'_>, key: &str| -> Result<u32, ParseError> {
                        c.keyword(key)?;
                        c.expect('=')?;
                        c.num(key)
                    };
                    let offset = field(&mut c, "offset")?;
                    let bytes = field(&mut c, "bytes")?;
                    let align = field(&mut c, "align")?;
                    let layout = if c.at_end() {
                        None
                    } else {
                        c.keyword("layout")?;
                        c.expect('=')?;
                        Some(c.string("the layout")?)
                    };
                    smem_buffers.push(SmemBuffer {
                        name,
                        offset,
                        bytes,
                        align,
                        layout,
                    });
                }
                "stage" => {
                    let id: usize = c.num("the stage number")?;
                    if id != stages.len() {
                        return Err(ParseError::at(
                            pos,
                            format!(
                                "stage {id} is declared where stage {} is next",
                                stages.len()
                            ),
                        ));
                    }
                    stages.push(c.string("the stage's title")?);
                }
                "reg" => {
                    let at = c.pos();
                    let Some(Tok::Reg(r)) = c.bump() else {
                        return Err(ParseError::at(at, "expected a register (`%N`)".into()));
                    };
                    c.expect(':')?;
                    let ty = c.keyword_of()?;
                    self.set_type(*r, ty, at)?;
                }
                other => {
                    return Err(ParseError::at(
                        pos,
                        format!(
                            "unknown header line `{other}`: expected min_ctas_per_sm, max_regs, cluster, param, smem, smem_buffer, stage, reg, or `{{` to start the body"
                        ),
                    ));
                }
            }
            c.done()?;
        }
        let (body, end) = self.block()?;
        if end != BlockEnd::Close {
            return Err(ParseError::at(
                self.last,
                "expected `}` to end the kernel's body".into(),
            ));
        }
        if let Some(extra) = self.lines.get(self.next) {
            return Err(ParseError::at(
                extra[0].pos,
                "unexpected text after the kernel's body".into(),
            ));
        }
        let mut regs = Vec::with_capacity(self.types.len());
        for (i, t) in self.types.iter().enumerate() {
            match t {
                Some((ty, _)) => regs.push(*ty),
                None => {
                    let (pos, why) = match self.first_seen[i] {
                        Some(pos) => (pos, "no line defines it"),
                        None => (
                            Pos { line: 1, col: 1 },
                            "registers are numbered from %0 without gaps",
                        ),
                    };
                    return Err(ParseError::at(
                        pos,
                        format!(
                            "%{i} has no type: {why}; declare it in the header with `reg %{i}: TYPE`"
                        ),
                    ));
                }
            }
        }
        let kernel = Kernel {
            name,
            target,
            params: std::mem::take(&mut self.params),
            regs,
            body,
            stages,
            launch,
            smem_bytes,
            smem_buffers,
        };
        let mut bad = None;
        kernel.body.for_each_inst(&mut |i| {
            if let Some(s) = i.stage.filter(|s| s.0 as usize >= kernel.stages.len()) {
                bad.get_or_insert(s);
            }
        });
        if let Some(s) = bad {
            return Err(ParseError::at(
                Pos { line: 1, col: 1 },
                format!("stage {} is used but not declared in the header", s.0),
            ));
        }
        Ok(kernel)
    }

    /// Statements up to a closing line, and which closing line it was.
    fn block(&mut self) -> Result<(Block, BlockEnd), ParseError> {
        let mut stmts = Vec::new();
        loop {
            let Some(toks) = self.lines.get(self.next) else {
                return Err(self.end_err("expected `}`: a block is not closed"));
            };
            let toks = toks.clone();
            self.next += 1;
            self.last = toks[0].pos;
            let mut c = Cursor::new(&toks);
            if c.eat('}') {
                if c.at_end() {
                    return Ok((Block { stmts }, BlockEnd::Close));
                }
                let pos = c.pos();
                match c.bump() {
                    Some(Tok::Word(w)) if w == "else" => {
                        c.expect('{')?;
                        c.done()?;
                        return Ok((Block { stmts }, BlockEnd::Else));
                    }
                    Some(Tok::Word(w)) if w == "while" => {
                        let cond = self.use_reg(&mut c)?;
                        c.expect('{')?;
                        c.done()?;
                        return Ok((Block { stmts }, BlockEnd::While(cond)));
                    }
                    _ => {
                        return Err(ParseError::at(
                            pos,
                            "expected `}`, `} else {` or `} while %N {`".into(),
                        ));
                    }
                }
            }
            let stmt = match c.peek() {
                Some(Tok::Word(w)) if w == "if" => {
                    c.bump();
                    let cond = self.use_reg(&mut c)?;
                    c.expect('{')?;
                    let loc = self.loc(&mut c, toks[0].pos)?;
                    let (then_body, end) = self.block()?;
                    let else_body = match end {
                        BlockEnd::Close => Block::default(),
                        BlockEnd::Else => match self.block()? {
                            (b, BlockEnd::Close) => b,
                            _ => {
                                return Err(ParseError::at(
                                    self.last,
                                    "expected `}` to end the else block".into(),
                                ));
                            }
                        },
                        BlockEnd::While(_) => {
                            return Err(ParseError::at(
                                self.last,
                                "`} while` ends a loop's header, not an `if`".into(),
                            ));
                        }
                    };
                    Stmt::If {
                        cond,
                        then_body,
                        else_body,
                        loc,
                    }
                }
                Some(Tok::Word(w)) if w == "loop" => {
                    c.bump();
                    c.expect('{')?;
                    let loc = self.loc(&mut c, toks[0].pos)?;
                    let (header, end) = self.block()?;
                    let BlockEnd::While(cond) = end else {
                        return Err(ParseError::at(
                            self.last,
                            "a loop's header ends with `} while %N {`".into(),
                        ));
                    };
                    let (body, end) = self.block()?;
                    if end != BlockEnd::Close {
                        return Err(ParseError::at(
                            self.last,
                            "expected `}` to end the loop".into(),
                        ));
                    }
                    Stmt::Loop {
                        header,
                        cond,
                        body,
                        loc,
                    }
                }
                Some(Tok::Word(w)) if w == "stage" && matches!(c.peek2(), Some(Tok::Num(_))) => {
                    c.bump();
                    let id = StageId(c.num("the stage number")?);
                    c.done()?;
                    self.stage = Some(id);
                    Stmt::Stage(id)
                }
                Some(Tok::Word(w)) if w == "comment" && matches!(c.peek2(), Some(Tok::Str(_))) => {
                    c.bump();
                    let text = c.string("the comment")?;
                    c.done()?;
                    Stmt::Comment(text)
                }
                _ => Stmt::Inst(self.inst(&mut c)?),
            };
            stmts.push(stmt);
        }
    }

    fn use_reg(&mut self, c: &mut Cursor<'_>) -> Result<Reg, ParseError> {
        let pos = c.pos();
        match c.bump() {
            Some(Tok::Reg(r)) => {
                self.note_reg(*r, pos);
                Ok(Reg(*r))
            }
            _ => Err(ParseError::at(pos, "expected a register (`%N`)".into())),
        }
    }

    /// The trailing `@file:line:col`, or the line's own place in the text.
    fn loc(&self, c: &mut Cursor<'_>, at: Pos) -> Result<SourceLoc, ParseError> {
        let pos = c.pos();
        let loc = match c.peek() {
            None => SourceLoc {
                file: self.source,
                line: at.line,
                column: at.col,
            },
            Some(Tok::Loc(text)) => {
                c.bump();
                let bad = || {
                    ParseError::at(
                        pos,
                        format!("`@{text}` is not a source location `@file:line:column`"),
                    )
                };
                let mut parts = text.rsplitn(3, ':');
                let column = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
                let line = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
                let file = parts.next().filter(|f| !f.is_empty()).ok_or_else(bad)?;
                SourceLoc {
                    file: intern(file),
                    line,
                    column,
                }
            }
            Some(_) => {
                return Err(
                    c.err("unexpected text: expected the end of the line or `@file:line:column`")
                );
            }
        };
        c.done()?;
        Ok(loc)
    }

    fn inst(&mut self, c: &mut Cursor<'_>) -> Result<Inst, ParseError> {
        let start = c.pos();
        let mut defs = Vec::new();
        if matches!(c.peek(), Some(Tok::Reg(_))) {
            loop {
                let pos = c.pos();
                let first = self.use_reg(c)?;
                let last = if c.peek() == Some(&Tok::DotDot) {
                    c.bump();
                    self.use_reg(c)?
                } else {
                    first
                };
                if last.0 < first.0 {
                    return Err(ParseError::at(
                        pos,
                        "a run of registers goes up: `%1..%4`".into(),
                    ));
                }
                if c.peek() != Some(&Tok::Sym(':')) {
                    return Err(c.err("a defined register shows its type: `%N:u32`"));
                }
                c.bump();
                let ty = c.keyword_of()?;
                for r in first.0..=last.0 {
                    self.set_type(r, ty, pos)?;
                    defs.push(Reg(r));
                }
                if !c.eat(',') {
                    break;
                }
            }
            c.expect('=')?;
        }
        let pos = c.pos();
        let word = c.word("an op mnemonic")?;
        let parts: Vec<&str> = word.split('.').collect();
        let (kind, n) = (1..=parts.len())
            .rev()
            .find_map(|n| OpKind::from_mnemonic(&parts[..n].join(".")).map(|k| (k, n)))
            .ok_or_else(|| ParseError::at(pos, format!("unknown op `{word}`")))?;
        let mut line = Line::new(kind);
        line.defs = defs;
        line.suffixes = parts[n..].iter().map(|s| s.to_string()).collect();
        line.pos = pos;
        let trailing = |c: &Cursor<'_>| {
            matches!(c.peek(), None | Some(Tok::Loc(_)))
                || matches!((c.peek(), c.peek2()), (Some(Tok::Word(w)), Some(Tok::Reg(_))) if w == "if")
                || matches!((c.peek(), c.peek2()), (Some(Tok::Word(w)), Some(Tok::Sym('='))) if w == "stage")
        };
        if !trailing(c) {
            loop {
                line.arg_pos.push(c.pos());
                let a = self.arg(c)?;
                line.args.push(a);
                if !c.eat(',') {
                    break;
                }
            }
        }
        if matches!(c.peek(), Some(Tok::Word(w)) if w == "if") {
            c.bump();
            line.pred = Some(self.use_reg(c)?);
        }
        let mut stage = self.stage;
        if matches!(c.peek(), Some(Tok::Word(w)) if w == "stage") {
            c.bump();
            c.expect('=')?;
            stage = match c.peek() {
                Some(Tok::Word(w)) if w == "none" => {
                    c.bump();
                    None
                }
                _ => Some(StageId(c.num("a stage number or `none`")?)),
            };
        }
        let loc = self.loc(c, start)?;
        let op = build(&line, &self.params)?;
        Ok(Inst { op, loc, stage })
    }

    fn operand(&mut self, c: &mut Cursor<'_>) -> Result<Operand, ParseError> {
        let pos = c.pos();
        match c.peek() {
            Some(Tok::Reg(_)) => Ok(Operand::Reg(self.use_reg(c)?)),
            Some(Tok::Num(n)) => {
                c.bump();
                Ok(Operand::Imm(*n))
            }
            _ => Err(ParseError::at(
                pos,
                "expected a register or an immediate".into(),
            )),
        }
    }

    fn arg(&mut self, c: &mut Cursor<'_>) -> Result<Arg, ParseError> {
        match c.peek() {
            Some(Tok::Sym('[')) => {
                c.bump();
                let base = self.operand(c)?;
                let offset = if c.eat('+') {
                    c.num::<i32>("an offset")?
                } else if c.eat('-') {
                    let pos = c.pos();
                    let n: u32 = c.num("an offset")?;
                    0i32.checked_sub_unsigned(n).ok_or_else(|| {
                        ParseError::at(pos, format!("-{n} is too small for an offset"))
                    })?
                } else {
                    0
                };
                c.expect(']')?;
                Ok(Arg::Addr(base, offset))
            }
            Some(Tok::Sym('{')) => {
                c.bump();
                let mut items = Vec::new();
                if !c.eat('}') {
                    loop {
                        let pos = c.pos();
                        let first = self.operand(c)?;
                        if c.peek() == Some(&Tok::DotDot) {
                            c.bump();
                            let last = self.use_reg(c)?;
                            let Operand::Reg(first) = first else {
                                return Err(ParseError::at(
                                    pos,
                                    "a run is of registers: `%1..%4`".into(),
                                ));
                            };
                            if last.0 < first.0 {
                                return Err(ParseError::at(
                                    pos,
                                    "a run of registers goes up: `%1..%4`".into(),
                                ));
                            }
                            items.extend((first.0..=last.0).map(|r| Operand::Reg(Reg(r))));
                        } else {
                            items.push(first);
                        }
                        if c.eat('}') {
                            break;
                        }
                        c.expect(',')?;
                    }
                }
                Ok(Arg::List(items))
            }
            Some(Tok::Word(w) | Tok::Str(w)) => {
                c.bump();
                Ok(Arg::Word(w.clone()))
            }
            _ => Ok(Arg::Val(self.operand(c)?)),
        }
    }
}

fn param_kind(c: &mut Cursor<'_>) -> Result<ParamKind, ParseError> {
    let pos = c.pos();
    let w =
        c.word("a parameter kind (a register type, tensor<ELEM, RANK> or tensor_map<ELEM, RANK>)")?;
    let shaped = |c: &mut Cursor<'_>| -> Result<(ElemTy, u8), ParseError> {
        c.expect('<')?;
        let elem = c.keyword_of()?;
        c.expect(',')?;
        let rank = c.num("a rank")?;
        c.expect('>')?;
        Ok((elem, rank))
    };
    match w {
        "tensor" => {
            let (elem, rank) = shaped(c)?;
            Ok(ParamKind::Tensor { elem, rank })
        }
        "tensor_map" => {
            let (elem, rank) = shaped(c)?;
            Ok(ParamKind::TensorMap { elem, rank })
        }
        other => Ty::from_word(other).map(ParamKind::Scalar).ok_or_else(|| {
            ParseError::at(
                pos,
                format!("`{other}` is not a parameter kind: a register type ({}), tensor<ELEM, RANK> or tensor_map<ELEM, RANK>", Ty::WORDS.join(", ")),
            )
        }),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockEnd {
    Close,
    Else,
    While(Reg),
}
