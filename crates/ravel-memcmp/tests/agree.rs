//! The crate's memcmp and bcmp agree with a byte-by-byte reference on every length, prefix and
//! difference position. (In this test binary the crate's symbols are the process's memcmp.)

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
