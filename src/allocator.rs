//! The process's allocator: mimalloc, asked the way its own `malloc` is asked.
//!
//! The `mimalloc` crate's `GlobalAlloc` passes every request to `mi_malloc_aligned` with the
//! layout's alignment. mimalloc v3 serves that as plain `malloc` only when the request is
//! small and its size class has an aligned free block at hand, or when the class size is a
//! power of two; any other request (every block over 1 KiB that is not a power of two, and a
//! small one whose class has to start a page) takes the generic aligned path, which
//! over-allocates by `alignment - 1` and so lands in the next size class up. Every block
//! mimalloc hands out is aligned to a machine word (size classes are whole words, pages start
//! 16-aligned), so here a request aligned to a word or less goes to `mi_malloc`, `mi_zalloc`
//! and `mi_realloc`, and a larger alignment keeps the aligned calls (docs/benchmarks.md,
//! "Measured alternatives").
//!
//! Shared by the binary and the benchmarks (which include this file), so that both measure the
//! same allocator; the library itself forbids `unsafe`.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};

/// The alignment of every block `mi_malloc` returns: a machine word.
const WORD_ALIGN: usize = std::mem::size_of::<usize>();

/// mimalloc, with word-aligned requests through its plain functions.
pub struct MiMalloc;

// SAFETY: every function hands the request to mimalloc, which returns a block of at least
// `layout.size()` bytes aligned to `layout.align()` (a word for the plain functions, which are
// used only when the alignment is a word or less), or null; `dealloc` and `realloc` receive
// only pointers these functions returned, which `mi_free` and `mi_realloc*` accept whichever
// of them made the block.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD_ALIGN {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD_ALIGN {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: see the impl.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD_ALIGN {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    // Imports sit in each test: the benchmarks include this file with `cfg(test)` but without
    // the test harness, which drops the tests.

    /// A word-aligned request gets a block of its own size class, on a thread whose pages are
    /// all new (where `mi_malloc_aligned` found no free block at hand and took the next class
    /// up: a 768-byte request got 896 bytes).
    #[test]
    fn a_block_is_of_its_own_size_class() {
        use libmimalloc_sys::{mi_good_size, mi_usable_size};

        use super::{GlobalAlloc, Layout, MiMalloc};

        std::thread::spawn(|| {
            for size in (8..=1024).step_by(8) {
                let layout = Layout::from_size_align(size, 8).unwrap();
                // SAFETY: a non-zero size; freed with its layout.
                unsafe {
                    let block = MiMalloc.alloc(layout);
                    assert_eq!(mi_usable_size(block.cast()), mi_good_size(size), "{size}");
                    MiMalloc.dealloc(block, layout);
                }
            }
        })
        .join()
        .unwrap();
    }

    /// Every size up to a large block, at every alignment up to 4 KiB: the block is aligned,
    /// writable over its whole size, keeps its contents across a grow and a shrink, and a
    /// zeroed one is zero.
    #[test]
    fn blocks_are_aligned_and_keep_their_contents() {
        use super::{GlobalAlloc, Layout, MiMalloc};

        let sizes = (1..=1100).chain([4000, 4096, 65_536, 300_000, 5_000_000]);
        let mut held = Vec::new();
        for size in sizes {
            for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: the layout has a non-zero size; each block is used within its
                // layout and freed with it.
                unsafe {
                    let zeroed = MiMalloc.alloc_zeroed(layout);
                    assert!(!zeroed.is_null());
                    assert_eq!(zeroed as usize % align, 0, "zeroed {size}/{align}");
                    assert!(
                        std::slice::from_raw_parts(zeroed, size)
                            .iter()
                            .all(|&b| b == 0)
                    );
                    MiMalloc.dealloc(zeroed, layout);

                    let block = MiMalloc.alloc(layout);
                    assert!(!block.is_null());
                    assert_eq!(block as usize % align, 0, "{size}/{align}");
                    let byte = (size % 251) as u8;
                    block.write_bytes(byte, size);
                    let grown = MiMalloc.realloc(block, layout, size * 2 + 8);
                    assert_eq!(grown as usize % align, 0, "grown {size}/{align}");
                    assert!(
                        std::slice::from_raw_parts(grown, size)
                            .iter()
                            .all(|&b| b == byte)
                    );
                    let larger = Layout::from_size_align(size * 2 + 8, align).unwrap();
                    let shrunk = MiMalloc.realloc(grown, larger, size.div_ceil(2));
                    assert_eq!(shrunk as usize % align, 0, "shrunk {size}/{align}");
                    assert!(
                        std::slice::from_raw_parts(shrunk, size.div_ceil(2))
                            .iter()
                            .all(|&b| b == byte)
                    );
                    // Keep some blocks live, so later requests come from used pages too.
                    if size % 7 == 0 {
                        held.push((
                            shrunk,
                            Layout::from_size_align(size.div_ceil(2), align).unwrap(),
                        ));
                    } else {
                        MiMalloc.dealloc(
                            shrunk,
                            Layout::from_size_align(size.div_ceil(2), align).unwrap(),
                        );
                    }
                }
            }
        }
        for (block, layout) in held {
            // SAFETY: allocated above with this layout.
            unsafe { MiMalloc.dealloc(block, layout) }
        }
    }
}
