// `&&` cannot be overloaded: outside #[kernel] it needs two `bool`s.
use dsl_core::trace::Pred;

fn both(a: Pred, b: Pred) -> bool {
    a && b
}

fn main() {}
