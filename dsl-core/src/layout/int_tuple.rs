//! Nested integer tuples: the shapes, strides and coordinates of layouts.

use std::fmt;
use std::str::FromStr;

use super::int::{DynInt, Int, StaticOnly};
use super::{LayoutError, LayoutErrorKind, err};

/// An integer or a tuple of int-tuples, as in CuTe: `8`, `(8,16)`, `((8,16),(64,8))`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum IntTuple<D = StaticOnly> {
    Leaf(Int<D>),
    Tuple(Vec<IntTuple<D>>),
}

/// Builds an [`IntTuple`] from nested parentheses: `int_tuple!((8, 16), (64, 8))` is
/// `((8,16),(64,8))`. A leaf is any expression convertible into an `IntTuple` (an `i64`,
/// an [`Int`]); wrap longer expressions in braces: `int_tuple!(({mn / 8}, 8))`.
#[macro_export]
macro_rules! int_tuple {
    (($($inner:tt),+ $(,)?)) => {
        $crate::layout::IntTuple::Tuple(vec![$($crate::int_tuple!($inner)),+])
    };
    ($leaf:expr) => {
        $crate::layout::IntTuple::from($leaf)
    };
    ($($inner:tt),+ $(,)?) => {
        $crate::layout::IntTuple::Tuple(vec![$($crate::int_tuple!($inner)),+])
    };
}

impl<D: DynInt> IntTuple<D> {
    /// A tuple of the given elements.
    pub fn tuple(elements: impl IntoIterator<Item = IntTuple<D>>) -> Self {
        IntTuple::Tuple(elements.into_iter().collect())
    }

    /// A flat tuple of static integers: `IntTuple::of(&[128, 512])` is `(128,512)`.
    pub fn of(values: &[i64]) -> Self {
        IntTuple::Tuple(values.iter().map(|&v| IntTuple::from(v)).collect())
    }

    /// Number of top-level modes (1 for an integer).
    pub fn rank(&self) -> usize {
        match self {
            IntTuple::Leaf(_) => 1,
            IntTuple::Tuple(elements) => elements.len(),
        }
    }

    /// Nesting depth: 0 for an integer, 1 for a flat tuple.
    pub fn depth(&self) -> usize {
        match self {
            IntTuple::Leaf(_) => 0,
            IntTuple::Tuple(elements) => 1 + elements.iter().map(Self::depth).max().unwrap_or(0),
        }
    }

    /// Top-level mode `i` (an integer is its own only mode).
    pub fn mode(&self, i: usize) -> Option<&IntTuple<D>> {
        match self {
            IntTuple::Leaf(_) if i == 0 => Some(self),
            IntTuple::Leaf(_) => None,
            IntTuple::Tuple(elements) => elements.get(i),
        }
    }

    /// The product of all entries (a runtime product if any entry is a runtime value).
    pub fn product(&self) -> Int<D> {
        match self {
            IntTuple::Leaf(v) => v.clone(),
            IntTuple::Tuple(elements) => elements
                .iter()
                .fold(Int::Static(1), |acc, e| acc * e.product()),
        }
    }

    /// The product, if every entry is static; never emits a runtime operation.
    pub fn static_product_if_known(&self) -> Option<i64> {
        self.leaves().iter().map(|v| v.as_static()).product()
    }

    /// The integers in depth-first order.
    pub fn leaves(&self) -> Vec<&Int<D>> {
        let mut out = Vec::new();
        self.collect_leaves(&mut out);
        out
    }

    fn collect_leaves<'a>(&'a self, out: &mut Vec<&'a Int<D>>) {
        match self {
            IntTuple::Leaf(v) => out.push(v),
            IntTuple::Tuple(elements) => elements.iter().for_each(|e| e.collect_leaves(out)),
        }
    }

    pub fn is_static(&self) -> bool {
        self.leaves().iter().all(|v| v.is_static())
    }

    /// Whether `other` has exactly the same tree structure.
    pub fn congruent<E: DynInt>(&self, other: &IntTuple<E>) -> bool {
        match (self, other) {
            (IntTuple::Leaf(_), IntTuple::Leaf(_)) => true,
            (IntTuple::Tuple(a), IntTuple::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.congruent(y))
            }
            _ => false,
        }
    }

    /// The same tuple with every entry lifted to another dynamic type.
    pub fn lift<C: DynInt + From<D>>(self) -> IntTuple<C> {
        match self {
            IntTuple::Leaf(v) => IntTuple::Leaf(v.lift()),
            IntTuple::Tuple(elements) => {
                IntTuple::Tuple(elements.into_iter().map(IntTuple::lift).collect())
            }
        }
    }

    /// The same tuple over [`StaticOnly`], or an error naming the first runtime entry.
    pub fn to_static(&self) -> Result<IntTuple, LayoutError> {
        match self {
            IntTuple::Leaf(Int::Static(v)) => Ok(IntTuple::Leaf(Int::Static(*v))),
            IntTuple::Leaf(Int::Dynamic(d)) => err(
                LayoutErrorKind::NotStatic,
                format!("expected a static integer, got the runtime value {d:?}"),
            ),
            IntTuple::Tuple(elements) => Ok(IntTuple::Tuple(
                elements
                    .iter()
                    .map(Self::to_static)
                    .collect::<Result<_, _>>()?,
            )),
        }
    }
}

impl IntTuple {
    /// The static value of an integer leaf.
    pub(crate) fn leaf_value(&self) -> Option<i64> {
        match self {
            IntTuple::Leaf(v) => Some(v.value()),
            IntTuple::Tuple(_) => None,
        }
    }

    /// The product of a static tuple.
    pub(crate) fn static_product(&self) -> i64 {
        self.leaves().iter().map(|v| v.value()).product()
    }
}

impl<D> From<i64> for IntTuple<D> {
    fn from(v: i64) -> Self {
        IntTuple::Leaf(Int::Static(v))
    }
}

impl<D> From<Int<D>> for IntTuple<D> {
    fn from(v: Int<D>) -> Self {
        IntTuple::Leaf(v)
    }
}

impl<D: fmt::Debug> fmt::Display for IntTuple<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntTuple::Leaf(v) => write!(f, "{v}"),
            IntTuple::Tuple(elements) => {
                f.write_str("(")?;
                for (i, e) in elements.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl<D: fmt::Debug> fmt::Debug for IntTuple<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Parses `8`, `(8,16)`, `((8,16),(64,8))`; CuTe's static marker `_8` is accepted too.
impl FromStr for IntTuple {
    type Err = LayoutError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut parser = Parser { text, pos: 0 };
        let tuple = parser.int_tuple()?;
        parser.skip_spaces();
        if parser.pos != text.len() {
            return parser.fail("end of input");
        }
        Ok(tuple)
    }
}

/// Recursive-descent parser: `tuple := int | '(' tuple (',' tuple)* ')'`.
pub(crate) struct Parser<'a> {
    pub(crate) text: &'a str,
    pub(crate) pos: usize,
}

impl Parser<'_> {
    pub(crate) fn skip_spaces(&mut self) {
        while self.text[self.pos..].starts_with(char::is_whitespace) {
            self.pos += 1;
        }
    }

    pub(crate) fn eat(&mut self, c: char) -> bool {
        self.skip_spaces();
        if self.text[self.pos..].starts_with(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub(crate) fn fail<T>(&self, expected: &str) -> Result<T, LayoutError> {
        err(
            LayoutErrorKind::Parse,
            format!(
                "cannot parse `{}`: expected {expected} at byte {}, got `{}`",
                self.text,
                self.pos,
                &self.text[self.pos..]
            ),
        )
    }

    pub(crate) fn int_tuple(&mut self) -> Result<IntTuple, LayoutError> {
        if self.eat('(') {
            let mut elements = vec![self.int_tuple()?];
            while self.eat(',') {
                elements.push(self.int_tuple()?);
            }
            if !self.eat(')') {
                return self.fail("`,` or `)`");
            }
            return Ok(IntTuple::Tuple(elements));
        }
        self.skip_spaces();
        let rest = &self.text[self.pos..];
        let marker = usize::from(rest.starts_with('_'));
        let digits = rest[marker..]
            .char_indices()
            .take_while(|&(i, c)| c.is_ascii_digit() || (i == 0 && c == '-'))
            .count();
        match rest[marker..marker + digits].parse::<i64>() {
            Ok(v) => {
                self.pos += marker + digits;
                Ok(IntTuple::from(v))
            }
            Err(_) => self.fail("an integer or `(`"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prints_and_measures_nested_tuples() {
        let t: IntTuple = "((8,16),(64, 8))".parse().unwrap();
        assert_eq!(t.to_string(), "((8,16),(64,8))");
        assert_eq!(t.rank(), 2);
        assert_eq!(t.depth(), 2);
        assert_eq!(t.product(), Int::Static(8 * 16 * 64 * 8));
        assert_eq!(t, crate::int_tuple!((8, 16), (64, 8)));
        assert_eq!("_8".parse::<IntTuple>().unwrap(), IntTuple::from(8));
        assert_eq!("(3)".parse::<IntTuple>().unwrap().to_string(), "(3)");
    }

    #[test]
    fn rejects_malformed_text_with_position() {
        let e = "(8,16".parse::<IntTuple>().unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::Parse);
        assert!(e.message().contains("expected `,` or `)`"), "{e}");
        assert!("(8,x)".parse::<IntTuple>().is_err());
        assert!("8 8".parse::<IntTuple>().is_err());
    }

    #[test]
    fn congruence_compares_structure_only() {
        let a: IntTuple = "((8,16),4)".parse().unwrap();
        let b: IntTuple = "((1,2),3)".parse().unwrap();
        let c: IntTuple = "(8,16,4)".parse().unwrap();
        assert!(a.congruent(&b));
        assert!(!a.congruent(&c));
    }
}
