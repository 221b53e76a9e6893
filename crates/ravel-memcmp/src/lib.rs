//! `memcmp` and `bcmp` for the short byte strings a load compares by the billion.
//!
//! Linking this crate into a binary (`use ravel_memcmp as _;`) makes every `memcmp` and `bcmp`
//! call of the binary's own code — Rust's slice comparisons, parquet-rs's string statistics and
//! dictionary interner, the Bloom filters' run check, the statically linked zstd — resolve to
//! the functions below instead of glibc's. It was written for Intel VMs with AVX-512, where
//! glibc selects `__memcmp_evex_movbe`, whose fault-suppressing masked loads stall on short
//! inputs. The binaries link it through their `memcmp` feature, on by default on x86_64 Linux
//! only; elsewhere this crate compiles to nothing.
//!
//! What it buys on the current load, measured on an Intel Xeon VM (2 cores, AVX-512, glibc
//! selecting the EVEX variant): the load's wall time with the crate over without it was
//! **0.552** (0.551–0.584), median (min–max) of 5 interleaved rounds of a 2M-row generated hits
//! load, 6.44 s without it and 3.65 s with it, the same objects either way:
//!
//! ```text
//! cargo build --release -p ravel-load -p ravel-bench && cp target/release/ravel-load on
//! cargo build --release -p ravel-load --no-default-features && cp target/release/ravel-load off
//! target/release/ravel-bench ab --a off --b on --runs 5 --steps load
//! ```
//!
//! Where glibc selects its AVX2 variant instead (an AMD EPYC VM without AVX-512), the same
//! command gave 1.005 (0.995–1.023): nothing bought, nothing lost.
//!
//! Like a global allocator, this is a binary's choice: libraries never link it.
//!
//! The functions compare eight bytes at a time with unaligned loads, byte-swapped so that
//! integer order is byte order, and finish with an overlapping load of the last eight bytes.
//! The crate is `no_builtins` so that the compiler never turns these loops back into calls
//! of the functions they define.

// The measurement is of x86_64 Linux (glibc); elsewhere the crate is empty and the platform's
// own memcmp/bcmp stay.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]
#![no_builtins]

use core::ptr::read_unaligned;

#[inline(always)]
unsafe fn load64(p: *const u8) -> u64 {
    // SAFETY: the caller guarantees 8 readable bytes at `p`.
    u64::from_be(unsafe { read_unaligned(p as *const u64) })
}

#[inline(always)]
unsafe fn load32(p: *const u8) -> u32 {
    // SAFETY: the caller guarantees 4 readable bytes at `p`.
    u32::from_be(unsafe { read_unaligned(p as *const u32) })
}

#[inline(always)]
fn order<T: Ord>(x: T, y: T) -> i32 {
    if x < y { -1 } else { 1 }
}

/// Compares `n` bytes at `a` and `b` as unsigned bytes: negative, zero or positive.
///
/// # Safety
/// `a` and `b` must each point to `n` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    unsafe {
        if n >= 8 {
            let mut i = 0;
            while i + 8 <= n {
                let (x, y) = (load64(a.add(i)), load64(b.add(i)));
                if x != y {
                    return order(x, y);
                }
                i += 8;
            }
            if i < n {
                // The last eight bytes, overlapping bytes already found equal.
                let (x, y) = (load64(a.add(n - 8)), load64(b.add(n - 8)));
                if x != y {
                    return order(x, y);
                }
            }
            0
        } else if n >= 4 {
            let (x, y) = (load32(a), load32(b));
            if x != y {
                return order(x, y);
            }
            let (x, y) = (load32(a.add(n - 4)), load32(b.add(n - 4)));
            if x != y {
                return order(x, y);
            }
            0
        } else {
            let mut i = 0;
            while i < n {
                let (x, y) = (*a.add(i), *b.add(i));
                if x != y {
                    return x as i32 - y as i32;
                }
                i += 1;
            }
            0
        }
    }
}

/// Whether `n` bytes at `a` and `b` differ: zero when equal, nonzero otherwise.
///
/// # Safety
/// `a` and `b` must each point to `n` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    unsafe {
        if n >= 8 {
            let mut diff = 0u64;
            let mut i = 0;
            while i + 8 <= n {
                diff |=
                    read_unaligned(a.add(i) as *const u64) ^ read_unaligned(b.add(i) as *const u64);
                if diff != 0 {
                    return 1;
                }
                i += 8;
            }
            diff |= read_unaligned(a.add(n - 8) as *const u64)
                ^ read_unaligned(b.add(n - 8) as *const u64);
            (diff != 0) as i32
        } else if n >= 4 {
            let x = read_unaligned(a as *const u32) ^ read_unaligned(b as *const u32);
            let y = read_unaligned(a.add(n - 4) as *const u32)
                ^ read_unaligned(b.add(n - 4) as *const u32);
            (x | y != 0) as i32
        } else {
            let mut i = 0;
            while i < n {
                if *a.add(i) != *b.add(i) {
                    return 1;
                }
                i += 1;
            }
            0
        }
    }
}
