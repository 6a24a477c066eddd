//! The engine's global allocator: mimalloc, through its plain entry points wherever the
//! alignment asked is one every mimalloc block has.
//!
//! The mimalloc crate's `GlobalAlloc` calls `mi_malloc_aligned` for every allocation,
//! whatever its alignment; for the 8 bytes nearly every Rust allocation asks, that entry
//! checks and adjusts what `mi_malloc` never needs to (about 95 instructions an
//! allocation against `mi_malloc`'s 25 or so, by callgrind, in a page of banlist lookups
//! that allocates its hits). Every mimalloc block is aligned to a machine word (its size
//! classes are whole words), so an alignment up to 8 is `mi_malloc`'s; a larger one, which
//! only a block whose size class is a multiple of it would give, goes to the aligned entry.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The alignment every mimalloc block has: a machine word.
const WORD: usize = std::mem::size_of::<usize>();

/// mimalloc as the global allocator (see the module's doc).
pub struct MiMalloc;

// SAFETY: each method hands the layout's size to mimalloc, and its alignment too unless
// it is at most `WORD`, which every block mimalloc gives has; a block is freed and grown
// by mimalloc's own `mi_free` and `mi_realloc` (or `mi_realloc_aligned` with the block's
// alignment), whichever entry allocated it.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= WORD {
            mi::mi_malloc(layout.size()).cast()
        } else {
            mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= WORD {
            mi::mi_zalloc(layout.size()).cast()
        } else {
            mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi::mi_free(ptr.cast::<c_void>());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= WORD {
            mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
        } else {
            mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn blocks_have_the_alignment_asked_and_keep_their_bytes() {
        // every size class up to a few pages, at each alignment a Rust type may ask
        // (the plain entry up to a word, the aligned one past it)
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in (1..=2048).step_by(7).chain([4095, 4096, 65536, 1 << 20]) {
                let layout = std::alloc::Layout::from_size_align(size, align).expect("layout");
                let mut v: Vec<(*mut u8, usize)> = Vec::new();
                for zeroed in [false, true] {
                    // SAFETY: a layout of nonzero size; each block is written within its
                    // size, grown with the same layout, and freed once with it.
                    unsafe {
                        let p = if zeroed {
                            std::alloc::alloc_zeroed(layout)
                        } else {
                            std::alloc::alloc(layout)
                        };
                        assert!(!p.is_null());
                        assert_eq!(p as usize % align, 0, "{size} at {align}");
                        if zeroed {
                            assert!((0..size).all(|i| *p.add(i) == 0), "{size} zeroed");
                        }
                        p.write_bytes(0xA5, size);
                        let q = std::alloc::realloc(p, layout, size * 2);
                        assert_eq!(q as usize % align, 0, "{size} grown at {align}");
                        assert!((0..size).all(|i| *q.add(i) == 0xA5), "{size} kept");
                        v.push((q, size * 2));
                    }
                }
                for (p, size) in v {
                    let grown = std::alloc::Layout::from_size_align(size, align).expect("layout");
                    // SAFETY: allocated above with this alignment and grown to `size`.
                    unsafe { std::alloc::dealloc(p, grown) };
                }
            }
        }
    }
}
