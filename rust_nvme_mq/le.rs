// SPDX-License-Identifier: GPL-2.0

//! Little-endian field types: every field of memory the controller reads or writes (commands,
//! completions, PRP and SGL entries, Identify and log data) is little-endian whatever the
//! CPU's byte order; these types keep the value in that order and convert on the way in and
//! out, so that a field cannot be read or written in CPU order by mistake.

use kernel::prelude::*;
use zerocopy_derive::Immutable;

macro_rules! le_type {
    ($name:ident, $int:ty) => {
        #[doc = concat!("A little-endian `", stringify!($int), "`.")]
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, PartialEq, Eq, Debug, FromBytes, IntoBytes, Immutable)]
        pub(crate) struct $name($int);

        impl $name {
            pub(crate) const fn new(value: $int) -> Self {
                Self(value.to_le())
            }

            /// The value in CPU byte order.
            pub(crate) const fn get(self) -> $int {
                <$int>::from_le(self.0)
            }
        }

        impl From<$int> for $name {
            fn from(value: $int) -> Self {
                Self::new(value)
            }
        }

        impl From<$name> for $int {
            fn from(value: $name) -> Self {
                value.get()
            }
        }
    };
}

le_type!(Le16, u16);
le_type!(Le32, u32);
le_type!(Le64, u64);

impl Le64 {
    /// The value as stored (its bytes in little-endian order), for memory typed as plain
    /// words (a DMA buffer of `u64`).
    pub(crate) const fn raw(self) -> u64 {
        self.0
    }
}

#[kunit_tests(rust_nvme_mq_le)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_little_endian() {
        // What is stored, in memory order.
        assert_eq!(
            Le32::new(0x1234_5678).0.to_ne_bytes(),
            [0x78, 0x56, 0x34, 0x12]
        );
        assert_eq!(Le16::new(0xabcd).0.to_ne_bytes(), [0xcd, 0xab]);
        assert_eq!(Le64::new(1).0.to_ne_bytes(), [1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            Le64::new(0x0102_0304_0506_0708).get(),
            0x0102_0304_0506_0708
        );
    }
}
