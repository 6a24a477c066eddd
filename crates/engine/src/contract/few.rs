//! `Few`: a list that keeps its first few items inline and moves to the heap only past
//! them. A document's factors, topics and regions are a handful each, so decoding a page
//! allocates none of them.
//!
//! Hand-made rather than `smallvec`: smallvec names its item through an array type's
//! associated type, which makes the borrowed document types (`Cow<'a, str>`) invariant in
//! `'a`; this one is covariant (a test below says so to the compiler).

use std::fmt;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};

/// Up to `N` items inline; all of them in `spill` once there are more.
pub struct Few<T, const N: usize> {
    /// Items initialized in `inline` (0 once spilled).
    len: usize,
    inline: [MaybeUninit<T>; N],
    /// Every item, once more than `N` were pushed; empty (unallocated) until then.
    spill: Vec<T>,
}

impl<T, const N: usize> Few<T, N> {
    /// An empty list (allocates nothing).
    pub const fn new() -> Self {
        Few {
            len: 0,
            // An array of uninitialized slots needs no initialization.
            inline: [const { MaybeUninit::uninit() }; N],
            spill: Vec::new(),
        }
    }

    /// Append `item`; the `N + 1`-th moves every item to the heap.
    #[inline]
    pub fn push(&mut self, item: T) {
        if self.len < N && self.spill.is_empty() {
            self.inline[self.len].write(item);
            self.len += 1;
        } else {
            self.push_spilled(item);
        }
    }

    /// `push` past the inline room.
    #[cold]
    fn push_spilled(&mut self, item: T) {
        if self.spill.is_empty() {
            let mut spill = Vec::with_capacity(2 * N + 1);
            let n = std::mem::replace(&mut self.len, 0);
            for slot in &self.inline[..n] {
                // SAFETY: slots below the old `len` are initialized; `len` is 0 now, so
                // each is read (moved out) exactly once and never dropped here.
                spill.push(unsafe { slot.assume_init_read() });
            }
            self.spill = spill;
        }
        self.spill.push(item);
    }

    /// The items.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        if self.spill.is_empty() {
            // SAFETY: the first `len` slots are initialized.
            unsafe { std::slice::from_raw_parts(self.inline.as_ptr().cast::<T>(), self.len) }
        } else {
            &self.spill
        }
    }

    /// The items, mutable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        if self.spill.is_empty() {
            // SAFETY: the first `len` slots are initialized.
            unsafe {
                std::slice::from_raw_parts_mut(self.inline.as_mut_ptr().cast::<T>(), self.len)
            }
        } else {
            &mut self.spill
        }
    }

    /// The items as a `Vec` (the heap's own when spilled).
    pub fn into_vec(mut self) -> Vec<T> {
        if !self.spill.is_empty() {
            return std::mem::take(&mut self.spill);
        }
        let n = std::mem::replace(&mut self.len, 0);
        let mut out = Vec::with_capacity(n);
        for slot in &self.inline[..n] {
            // SAFETY: as in `push`: initialized, and `len` is 0, so moved out once.
            out.push(unsafe { slot.assume_init_read() });
        }
        out
    }
}

impl<T, const N: usize> Drop for Few<T, N> {
    #[inline]
    fn drop(&mut self) {
        if std::mem::needs_drop::<T>() && self.len > 0 {
            let n = std::mem::replace(&mut self.len, 0);
            let items = std::ptr::slice_from_raw_parts_mut(self.inline.as_mut_ptr().cast::<T>(), n);
            // SAFETY: the first `n` slots are initialized, and dropped once (`len` is 0 now).
            unsafe { std::ptr::drop_in_place(items) };
        }
    }
}

impl<T, const N: usize> Default for Few<T, N> {
    fn default() -> Self {
        Few::new()
    }
}

impl<T, const N: usize> Deref for Few<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T, const N: usize> DerefMut for Few<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Clone, const N: usize> Clone for Few<T, N> {
    fn clone(&self) -> Self {
        self.iter().cloned().collect()
    }
}

impl<T: fmt::Debug, const N: usize> fmt::Debug for Few<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: PartialEq<U>, U, const N: usize, const M: usize> PartialEq<Few<U, M>> for Few<T, N> {
    fn eq(&self, other: &Few<U, M>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: PartialEq<U>, U, const N: usize> PartialEq<Vec<U>> for Few<T, N> {
    fn eq(&self, other: &Vec<U>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T, const N: usize> FromIterator<T> for Few<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let mut out = Few::new();
        for item in items {
            out.push(item);
        }
        out
    }
}

impl<T, const N: usize> From<Vec<T>> for Few<T, N> {
    fn from(items: Vec<T>) -> Self {
        items.into_iter().collect()
    }
}

impl<'s, T, const N: usize> IntoIterator for &'s Few<T, N> {
    type Item = &'s T;
    type IntoIter = std::slice::Iter<'s, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::rc::Rc;

    use super::Few;

    #[test]
    fn keeps_order_inline_and_past_the_spill() {
        for n in 0..12 {
            let few: Few<String, 4> = (0..n).map(|i| i.to_string()).collect();
            let want: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            assert_eq!(few.as_slice(), want.as_slice(), "{n} items");
            assert_eq!(few.len(), n);
            assert_eq!(few.clone(), want);
            assert_eq!(few.into_vec(), want);
        }
    }

    #[test]
    fn drops_every_item_once() {
        let item = Rc::new(());
        for n in 0..10 {
            let mut few: Few<Rc<()>, 3> = Few::new();
            for _ in 0..n {
                few.push(item.clone());
            }
            assert_eq!(Rc::strong_count(&item), n + 1);
            let copy = few.clone();
            assert_eq!(Rc::strong_count(&item), 2 * n + 1);
            drop(few);
            assert_eq!(Rc::strong_count(&item), n + 1);
            let v = copy.into_vec();
            assert_eq!(Rc::strong_count(&item), n + 1);
            drop(v);
            assert_eq!(Rc::strong_count(&item), 1);
        }
    }

    #[test]
    fn is_mutable_in_place() {
        let mut few: Few<(Cow<'_, str>, f64), 2> = Few::new();
        few.push(("a".into(), 1.0));
        few.push(("b".into(), 2.0));
        few[1].1 = 3.0;
        assert_eq!(few, vec![(Cow::from("a"), 1.0), (Cow::from("b"), 3.0)]);
        few.push(("c".into(), 4.0));
        few[0].1 = 5.0;
        assert_eq!(
            few,
            vec![
                (Cow::from("a"), 5.0),
                (Cow::from("b"), 3.0),
                (Cow::from("c"), 4.0)
            ]
        );
    }

    /// Covariant in the items' lifetime, as the borrowed document types need.
    #[allow(dead_code)]
    fn shorten<'long: 'short, 'short>(few: Few<Cow<'long, str>, 4>) -> Few<Cow<'short, str>, 4> {
        few
    }
}
