//! The crate's memcmp and bcmp agree with a byte-by-byte reference on every length, prefix and
//! difference position. (In this test binary the crate's symbols are the process's memcmp.)

// The crate is empty off x86_64 Linux.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use proptest::prelude::*;

fn reference(a: &[u8], b: &[u8]) -> i32 {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return if x < y { -1 } else { 1 };
        }
    }
    0
}

fn ours(a: &[u8], b: &[u8]) -> (i32, i32) {
    assert_eq!(a.len(), b.len());
    // SAFETY: both slices hold `len` bytes.
    unsafe {
        (
            ravel_memcmp::memcmp(a.as_ptr(), b.as_ptr(), a.len()).signum(),
            ravel_memcmp::bcmp(a.as_ptr(), b.as_ptr(), a.len()),
        )
    }
}

#[test]
fn every_length_and_difference_position() {
    for n in 0..80usize {
        let a: Vec<u8> = (0..n).map(|i| (i * 37 % 251) as u8).collect();
        assert_eq!(ours(&a, &a), (0, 0), "equal, n={n}");
        for pos in 0..n {
            for delta in [1u8, 0x80, 0xff] {
                let mut b = a.clone();
                b[pos] = b[pos].wrapping_add(delta);
                let (m, e) = ours(&a, &b);
                assert_eq!(m, reference(&a, &b), "n={n} pos={pos} delta={delta}");
                assert_ne!(e, 0, "n={n} pos={pos}");
                // A later difference never outweighs an earlier one.
                if pos + 1 < n {
                    b[n - 1] = b[n - 1].wrapping_add(0x7f);
                    assert_eq!(ours(&a, &b).0, reference(&a, &b), "n={n} pos={pos}, two");
                }
            }
        }
    }
}

#[test]
fn slices_compare_through_the_symbol() {
    // Rust's slice order and equality call memcmp/bcmp; in this binary that is this crate.
    let mut v: Vec<Vec<u8>> = (0..2000u32)
        .map(|i| format!("http://example{}.ru/{}", i % 7, i.wrapping_mul(2654435761)).into_bytes())
        .collect();
    v.sort();
    assert!(v.windows(2).all(|w| reference(
        &w[0][..w[0].len().min(w[1].len())],
        &w[1][..w[0].len().min(w[1].len())]
    ) <= 0));
    assert!(v.iter().all(|x| x == &x.clone()));
}

proptest! {
    #[test]
    fn agrees_with_reference(prefix in proptest::collection::vec(any::<u8>(), 0..40),
                             a in proptest::collection::vec(any::<u8>(), 0..40),
                             b in proptest::collection::vec(any::<u8>(), 0..40)) {
        let n = a.len().min(b.len());
        let x = [prefix.as_slice(), &a[..n]].concat();
        let y = [prefix.as_slice(), &b[..n]].concat();
        let (m, e) = ours(&x, &y);
        prop_assert_eq!(m, reference(&x, &y));
        prop_assert_eq!(e == 0, x == y);
        prop_assert_eq!(x.cmp(&y), reference(&x, &y).cmp(&0));
    }
}

/// glibc's own `memcmp` and `bcmp`, found past this binary's (which are the crate's).
mod glibc {
    use std::ffi::{c_char, c_void};

    type Cmp = unsafe extern "C" fn(*const u8, *const u8, usize) -> i32;

    unsafe extern "C" {
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }

    /// glibc's `RTLD_NEXT`: the next object in search order after this one.
    const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

    fn next(symbol: &std::ffi::CStr) -> Cmp {
        // SAFETY: dlsym with a NUL-terminated name; the result is checked for null and is a
        // C function of memcmp's signature.
        unsafe {
            let f = dlsym(RTLD_NEXT, symbol.as_ptr());
            assert!(!f.is_null(), "glibc has no {symbol:?}");
            std::mem::transmute::<*mut c_void, Cmp>(f)
        }
    }

    /// glibc's (memcmp sign, bcmp != 0) for two slices of one length.
    pub fn cmp(a: &[u8], b: &[u8]) -> (i32, bool) {
        assert_eq!(a.len(), b.len());
        let (memcmp, bcmp) = (next(c"memcmp"), next(c"bcmp"));
        assert_ne!(
            memcmp as *const (),
            ravel_memcmp::memcmp as *const (),
            "found the crate's own"
        );
        // SAFETY: both slices hold `len` bytes.
        unsafe {
            (
                memcmp(a.as_ptr(), b.as_ptr(), a.len()).signum(),
                bcmp(a.as_ptr(), b.as_ptr(), a.len()) != 0,
            )
        }
    }
}

#[test]
fn long_values_agree_with_glibc() {
    // 1 MiB and 1 MiB + 3 (a tail shorter than one eight-byte step), as long URLs are.
    for n in [1 << 20, (1 << 20) + 3] {
        let a: Vec<u8> = (0..n).map(|i| (i * 31 % 253) as u8).collect();
        assert_eq!(ours(&a, &a), (0, 0), "equal, n={n}");
        assert_eq!(glibc::cmp(&a, &a), (0, false), "glibc equal, n={n}");
        for pos in [0, n / 2, n - 4, n - 1] {
            for delta in [1u8, 0x80, 0xff] {
                let mut b = a.clone();
                b[pos] = b[pos].wrapping_add(delta);
                let (m, e) = ours(&a, &b);
                let (gm, ge) = glibc::cmp(&a, &b);
                assert_eq!(m, gm, "memcmp, n={n} pos={pos} delta={delta}");
                assert_eq!(m, reference(&a, &b), "n={n} pos={pos} delta={delta}");
                assert!(e != 0 && ge, "bcmp, n={n} pos={pos}");
                // Swapped operands flip the sign, as glibc's do.
                assert_eq!(ours(&b, &a).0, -m, "swapped, n={n} pos={pos}");
                assert_eq!(glibc::cmp(&b, &a).0, -m, "glibc swapped, n={n} pos={pos}");
            }
        }
    }
}
