//! CuTe's `Swizzle<B, M, S>`: an XOR of address bits that spreads the rows of a tile across
//! shared-memory banks.

use std::fmt;

use super::int::{Affine, DynInt, Int, xor_shifted_bits};
use super::{LayoutError, LayoutErrorKind, err};

/// `Swizzle<B, M, S>`: the `B` bits starting at bit `M + S` are XORed into the `B` bits
/// starting at bit `M`: `o ^ ((o >> S) & (((1 << B) - 1) << M))`.
///
/// In this module swizzles act on **byte** offsets. With `M = 4` the unit is a 16-byte
/// chunk, and the MMA swizzles are [`Swizzle::B128`] (`Sw<3,4,3>`: chunk ^= row % 8 for
/// 128-byte rows), [`Swizzle::B64`], [`Swizzle::B32`] and [`Swizzle::NONE`] (`Sw<0,4,3>`,
/// the identity). Because `S >= B` the bits read are never the bits written, so a swizzle
/// is its own inverse and a bijection on every aligned block of [`Swizzle::period`] bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Swizzle {
    bits: u32,
    base: u32,
    shift: u32,
}

impl Swizzle {
    /// `Sw<0,4,3>`: no swizzle (the MMA "interleave" layouts of 8 x 16-byte core matrices).
    pub const NONE: Swizzle = Swizzle {
        bits: 0,
        base: 4,
        shift: 3,
    };
    /// `Sw<1,4,3>`: 32-byte swizzle; pattern 256 B.
    pub const B32: Swizzle = Swizzle {
        bits: 1,
        base: 4,
        shift: 3,
    };
    /// `Sw<2,4,3>`: 64-byte swizzle; pattern 512 B.
    pub const B64: Swizzle = Swizzle {
        bits: 2,
        base: 4,
        shift: 3,
    };
    /// `Sw<3,4,3>`: 128-byte swizzle; pattern 1024 B.
    pub const B128: Swizzle = Swizzle {
        bits: 3,
        base: 4,
        shift: 3,
    };

    /// `Swizzle<bits, base, shift>`; needs `shift >= bits` (so it is an involution) and all
    /// touched bits below bit 62.
    pub fn new(bits: u32, base: u32, shift: u32) -> Result<Swizzle, LayoutError> {
        if shift < bits || bits + base + shift > 62 {
            return err(
                LayoutErrorKind::Unsupported,
                format!(
                    "Swizzle<{bits},{base},{shift}>: expected shift >= bits (the XOR must not \
                     read the bits it writes) and bits + base + shift <= 62"
                ),
            );
        }
        Ok(Swizzle { bits, base, shift })
    }

    /// `B`: how many bits are XORed.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// `M`: the lowest bit that changes (4 for 16-byte chunks).
    pub fn base(&self) -> u32 {
        self.base
    }

    /// `S`: the distance from the bits read to the bits written.
    pub fn shift(&self) -> u32 {
        self.shift
    }

    pub fn is_identity(&self) -> bool {
        self.bits == 0
    }

    /// The bits that may flip: `((1 << B) - 1) << M`.
    fn flipped_bits(&self) -> i64 {
        ((1i64 << self.bits) - 1) << self.base
    }

    /// The repeat of the pattern in bytes, `2^(B+M+S)` (1024 for `Sw<3,4,3>`; 1 for the
    /// identity). Adding a multiple of it commutes with the swizzle, and a swizzled tile's
    /// base address must be a multiple of it.
    pub fn period(&self) -> i64 {
        if self.is_identity() {
            1
        } else {
            1i64 << (self.bits + self.base + self.shift)
        }
    }

    /// The swizzled image of a non-negative offset.
    pub fn apply(&self, offset: i64) -> i64 {
        offset ^ ((offset >> self.shift) & self.flipped_bits())
    }

    /// The swizzled image of a possibly runtime offset: a runtime value costs exactly one
    /// `shr_const`, one `and_const` and one `xor`.
    pub fn apply_int<C: DynInt>(&self, offset: Int<C>) -> Int<C> {
        let mut affine = Affine::zero();
        affine.add_int(offset);
        self.apply_affine(affine)
    }

    /// Swizzles `dynamic + constant`. The part of the constant that is a multiple of the
    /// period is added after the XOR (it commutes), so `base + 16384` swizzles like `base`.
    pub(crate) fn apply_affine<C: DynInt>(&self, offset: Affine<C>) -> Int<C> {
        let Some(dynamic) = offset.dynamic else {
            return Int::Static(self.apply(offset.constant));
        };
        if self.is_identity() {
            return Affine {
                dynamic: Some(dynamic),
                constant: offset.constant,
            }
            .into_int();
        }
        let period = self.period();
        let whole_periods = offset.constant.div_euclid(period) * period;
        let inside = Affine {
            dynamic: Some(dynamic),
            constant: offset.constant - whole_periods,
        }
        .into_int();
        let Int::Dynamic(x) = inside else {
            unreachable!("a runtime term stays runtime")
        };
        Int::Dynamic(xor_shifted_bits(x, self.shift, self.flipped_bits())) + whole_periods
    }
}

impl fmt::Display for Swizzle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sw<{},{},{}>", self.bits, self.base, self.shift)
    }
}

impl fmt::Debug for Swizzle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Hand-worked Sw<3,4,3> on byte offsets (ptx-reference.md §5: a ^ (((a >> 7) & 7) << 4),
    // i.e. the 16-byte chunk (bits 4-6) is XORed with the 128-byte row within the 1024-byte
    // pattern (bits 7-9)).
    #[test]
    fn sw128_on_hand_worked_byte_offsets() {
        let rows = [
            // (offset, swizzled): row 0 is unchanged.
            (0x000, 0x000),
            (0x070, 0x070),
            // 0x080 is row 1, chunk 0 -> chunk 1: 0x090.
            (0x080, 0x090),
            // 0x0A6 is row 1, chunk 2, byte 6 -> chunk 3: 0x0B6.
            (0x0A6, 0x0B6),
            // 0x3F0 is row 7, chunk 7 -> chunk 0: 0x380.
            (0x3F0, 0x380),
            // 0x41A is row 0 of the next pattern (bits 7-9 = 0): unchanged.
            (0x41A, 0x41A),
            // 0x88A = 2048 + 138: row 1, chunk 0, byte 10 -> 2048 + 128 + 16 + 10 = 0x89A.
            (0x88A, 0x89A),
        ];
        for (offset, swizzled) in rows {
            assert_eq!(
                Swizzle::B128.apply(offset),
                swizzled,
                "Sw<3,4,3>({offset:#x})"
            );
        }
        // Sw<2,4,3>: 64-byte rows; row 3 (0xC0) flips chunk bits 4-5 by (0xC0 >> 7) & 3 = 1.
        assert_eq!(Swizzle::B64.apply(0xC0), 0xD0);
        // Sw<1,4,3>: only bit 7 moves into bit 4: 0x80 -> 0x90, 0x90 -> 0x80.
        assert_eq!(Swizzle::B32.apply(0x80), 0x90);
        assert_eq!(Swizzle::B32.apply(0x90), 0x80);
        assert_eq!(Swizzle::NONE.apply(0x3F0), 0x3F0);
    }

    #[test]
    fn every_mma_swizzle_is_an_involution_and_a_bijection_on_its_pattern() {
        for sw in [Swizzle::NONE, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            let period = sw.period().max(1024);
            let mut seen = vec![false; period as usize];
            for offset in 0..period {
                let image = sw.apply(offset);
                assert_eq!(sw.apply(image), offset, "{sw} is not its own inverse");
                assert!((0..period).contains(&image), "{sw} leaves the pattern");
                assert!(!seen[image as usize], "{sw} maps two offsets to {image}");
                seen[image as usize] = true;
                // Adding whole periods commutes with the swizzle.
                assert_eq!(sw.apply(offset + 3 * sw.period()), image + 3 * sw.period());
            }
        }
    }

    #[test]
    fn rejects_swizzles_that_read_the_bits_they_write() {
        let e = Swizzle::new(3, 4, 2).unwrap_err();
        assert!(e.message().contains("shift >= bits"), "{e}");
        assert_eq!(Swizzle::new(3, 4, 3).unwrap(), Swizzle::B128);
        assert_eq!(Swizzle::B128.to_string(), "Sw<3,4,3>");
        assert_eq!(Swizzle::B128.period(), 1024);
        assert_eq!(Swizzle::B64.period(), 512);
        assert_eq!(Swizzle::B32.period(), 256);
    }
}
