//! An op line of the text form, between an [`Op`](crate::ir::Op) and its characters:
//! `DEFS = MNEMONIC.SUFFIXES ARG, ARG, ... [if PRED]`. The printer writes lines, the parser
//! reads them; `ops.rs` maps each op kind to and from one.

use crate::ir::{Operand, Reg};

use super::OpKind;
use super::parse::{ParseError, Pos};

/// One argument of an op line.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Arg {
    /// A register or an immediate (`%5`, `16`, `0x7f800000`).
    Val(Operand),
    /// An f32 value: an immediate prints as its bits (`0f3F800000`).
    Float(Operand),
    /// An address with a byte offset: `[%5+16]`, `[%5]`.
    Addr(Operand, i32),
    /// A register list: `{%1, %2}`, with runs printed `%1..%8`.
    List(Vec<Operand>),
    /// A name: a parameter, a special register.
    Word(String),
}

/// An op line: what it defines, its kind, the dotted suffixes after the mnemonic, its
/// arguments and its guard. `pos` and `arg_pos` place a parsed line for messages.
#[derive(Clone, Debug)]
pub(crate) struct Line {
    pub defs: Vec<Reg>,
    pub kind: OpKind,
    pub suffixes: Vec<String>,
    pub args: Vec<Arg>,
    pub pred: Option<Reg>,
    pub pos: Pos,
    pub arg_pos: Vec<Pos>,
}

impl Line {
    pub fn new(kind: OpKind) -> Line {
        Line {
            defs: Vec::new(),
            kind,
            suffixes: Vec::new(),
            args: Vec::new(),
            pred: None,
            pos: Pos::default(),
            arg_pos: Vec::new(),
        }
    }

    pub fn def(mut self, r: Reg) -> Line {
        self.defs.push(r);
        self
    }

    pub fn defs(mut self, rs: &[Reg]) -> Line {
        self.defs.extend_from_slice(rs);
        self
    }

    pub fn suffix(mut self, s: impl Into<String>) -> Line {
        self.suffixes.push(s.into());
        self
    }

    pub fn arg(mut self, a: Arg) -> Line {
        self.args.push(a);
        self
    }

    pub fn val(self, o: Operand) -> Line {
        self.arg(Arg::Val(o))
    }

    pub fn reg(self, r: Reg) -> Line {
        self.arg(Arg::Val(Operand::Reg(r)))
    }

    pub fn int(self, n: impl Into<u64>) -> Line {
        self.arg(Arg::Val(Operand::Imm(n.into())))
    }

    pub fn at(self, o: Operand) -> Line {
        self.arg(Arg::Addr(o, 0))
    }

    pub fn list(self, rs: &[Reg]) -> Line {
        self.arg(Arg::List(rs.iter().map(|&r| Operand::Reg(r)).collect()))
    }

    /// A reader of the parsed line's parts, in order.
    pub fn reader(&self) -> Reader<'_> {
        Reader {
            line: self,
            suffix: 0,
            arg: 0,
        }
    }
}

/// Takes a parsed line's suffixes and arguments in order, with messages that say what was
/// expected where.
pub(crate) struct Reader<'l> {
    line: &'l Line,
    suffix: usize,
    arg: usize,
}

impl<'l> Reader<'l> {
    fn mnemonic(&self) -> &'static str {
        self.line.kind.mnemonic()
    }

    pub fn err(&self, message: String) -> ParseError {
        ParseError::at(self.line.pos, message)
    }

    fn arg_err(&self, message: String) -> ParseError {
        let pos = self
            .line
            .arg_pos
            .get(self.arg)
            .or(self.line.arg_pos.last())
            .copied()
            .unwrap_or(self.line.pos);
        ParseError::at(pos, message)
    }

    /// The next suffix as a keyword of `W`.
    pub fn word<W: super::words::Word>(&mut self) -> Result<W, ParseError> {
        let Some(s) = self.line.suffixes.get(self.suffix) else {
            return Err(self.err(format!(
                "`{}` needs {} suffix (one of {})",
                self.mnemonic(),
                W::WHAT,
                W::WORDS.join(", ")
            )));
        };
        self.suffix += 1;
        W::from_word(s).ok_or_else(|| {
            self.err(format!(
                "`{s}` is not {} (one of {})",
                W::WHAT,
                W::WORDS.join(", ")
            ))
        })
    }

    /// Whether the next suffix is `flag`, taking it when it is.
    pub fn flag(&mut self, flag: &str) -> bool {
        let hit = self.line.suffixes.get(self.suffix).map(String::as_str) == Some(flag);
        self.suffix += hit as usize;
        hit
    }

    /// The next suffix, whatever it is.
    pub fn raw_suffix(&mut self, what: &str) -> Result<&'l str, ParseError> {
        let s = self
            .line
            .suffixes
            .get(self.suffix)
            .ok_or_else(|| self.err(format!("`{}` needs {what}", self.mnemonic())))?;
        self.suffix += 1;
        Ok(s)
    }

    fn next(&mut self, what: &str) -> Result<&'l Arg, ParseError> {
        let a = self.line.args.get(self.arg).ok_or_else(|| {
            self.arg_err(format!(
                "`{}` needs {what} as argument {}",
                self.mnemonic(),
                self.arg + 1
            ))
        })?;
        self.arg += 1;
        Ok(a)
    }

    fn back_err(&self, message: String) -> ParseError {
        let pos = self
            .line
            .arg_pos
            .get(self.arg - 1)
            .copied()
            .unwrap_or(self.line.pos);
        ParseError::at(pos, message)
    }

    /// A register or an immediate.
    pub fn operand(&mut self) -> Result<Operand, ParseError> {
        match self.next("a register or an immediate")? {
            Arg::Val(o) | Arg::Float(o) => Ok(*o),
            _ => Err(self.back_err("expected a register or an immediate".into())),
        }
    }

    pub fn reg(&mut self) -> Result<Reg, ParseError> {
        match self.next("a register")? {
            Arg::Val(Operand::Reg(r)) => Ok(*r),
            _ => Err(self.back_err("expected a register (`%N`)".into())),
        }
    }

    /// An immediate that fits `T`.
    pub fn int<T: TryFrom<u64>>(&mut self) -> Result<T, ParseError> {
        match self.next("a number")? {
            Arg::Val(Operand::Imm(n)) => {
                T::try_from(*n).map_err(|_| self.back_err(format!("{n} is out of range here")))
            }
            _ => Err(self.back_err("expected a number".into())),
        }
    }

    /// `[x+offset]`.
    pub fn addr(&mut self) -> Result<(Operand, i32), ParseError> {
        match self.next("an address (`[%N+offset]`)")? {
            Arg::Addr(o, off) => Ok((*o, *off)),
            _ => Err(self.back_err("expected an address (`[%N+offset]`)".into())),
        }
    }

    /// `[x]`.
    pub fn at(&mut self) -> Result<Operand, ParseError> {
        match self.addr()? {
            (o, 0) => Ok(o),
            _ => Err(self.back_err("this address takes no offset".into())),
        }
    }

    /// `{a, b, ...}`.
    pub fn list(&mut self) -> Result<Vec<Operand>, ParseError> {
        match self.next("a list (`{%1, %2}`)")? {
            Arg::List(l) => Ok(l.clone()),
            _ => Err(self.back_err("expected a list (`{%1, %2}`)".into())),
        }
    }

    /// `{%a, %b, ...}` of registers only.
    pub fn reg_list(&mut self) -> Result<Vec<Reg>, ParseError> {
        self.list()?
            .into_iter()
            .map(|o| {
                o.reg()
                    .ok_or_else(|| self.back_err("expected registers only in this list".into()))
            })
            .collect()
    }

    /// A list, or one operand standing for a list of one.
    pub fn operands(&mut self) -> Result<Vec<Operand>, ParseError> {
        match self.next("an operand or a list")? {
            Arg::List(l) => Ok(l.clone()),
            Arg::Val(o) | Arg::Float(o) => Ok(vec![*o]),
            _ => Err(self.back_err("expected an operand or a list (`{%1, %2}`)".into())),
        }
    }

    pub fn name(&mut self) -> Result<&'l str, ParseError> {
        match self.next("a name")? {
            Arg::Word(w) => Ok(w),
            _ => Err(self.back_err("expected a name".into())),
        }
    }

    /// Whether another argument follows.
    pub fn more(&self) -> bool {
        self.arg < self.line.args.len()
    }

    /// The only definition.
    pub fn def(&self) -> Result<Reg, ParseError> {
        match self.line.defs[..] {
            [r] => Ok(r),
            _ => Err(self.err(format!(
                "`{}` defines one register, written `%N:ty = {} ...`",
                self.mnemonic(),
                self.mnemonic()
            ))),
        }
    }

    /// All definitions, at least one.
    pub fn defs(&self) -> Result<Vec<Reg>, ParseError> {
        if self.line.defs.is_empty() {
            return Err(self.err(format!(
                "`{}` defines registers: `%N:ty, ... = {} ...`",
                self.mnemonic(),
                self.mnemonic()
            )));
        }
        Ok(self.line.defs.clone())
    }

    pub fn pred(&self) -> Option<Reg> {
        self.line.pred
    }

    /// Checks that everything was taken: no definitions where the op has none, no extra
    /// suffix or argument, no guard where the op has none.
    pub fn end(&self, defines: bool, guarded: bool) -> Result<(), ParseError> {
        if !defines && !self.line.defs.is_empty() {
            return Err(self.err(format!("`{}` defines no register", self.mnemonic())));
        }
        if let Some(s) = self.line.suffixes.get(self.suffix) {
            return Err(self.err(format!("unexpected suffix `.{s}` on `{}`", self.mnemonic())));
        }
        if self.more() {
            return Err(self.arg_err(format!(
                "`{}` takes {} argument(s)",
                self.mnemonic(),
                self.arg
            )));
        }
        if !guarded && self.line.pred.is_some() {
            return Err(self.err(format!("`{}` cannot be guarded with `if`", self.mnemonic())));
        }
        Ok(())
    }
}
