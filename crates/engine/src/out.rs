//! Where the JSON writers (`crate::json`) append: `Sink`, for a `Vec<u8>` and for `PyOut`,
//! the response written straight into the Python bytes object it is returned as instead
//! of into a Vec that is then copied into one (a commercial page's response is some 60 KB).

use std::ffi::c_int;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

extern "C" {
    // CPython's resize of a bytes object that has a single reference, not yet shared;
    // pyo3-ffi declares it for its own use only.
    fn _PyBytes_Resize(bytes: *mut *mut ffi::PyObject, newsize: ffi::Py_ssize_t) -> c_int;
}

/// Where JSON text is appended: a `Vec<u8>`, or the response's own bytes object
/// (`PyOut`), written in place instead of copied into one at the end.
pub trait Sink {
    /// Bytes written so far.
    fn len(&self) -> usize;
    /// True when nothing is written.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Room for at least `additional` more bytes.
    fn reserve(&mut self, additional: usize);
    /// The text written so far.
    fn as_slice(&self) -> &[u8];
    /// The start of the buffer (its first `len()` bytes are the text).
    fn as_mut_ptr(&mut self) -> *mut u8;
    /// Make the first `new_len` bytes the text.
    ///
    /// # Safety
    /// `new_len` must be within the reserved room, its bytes written.
    unsafe fn set_len(&mut self, new_len: usize);
    /// Take back the last byte written (nothing when empty).
    fn unpush(&mut self) {
        let n = self.len();
        if n > 0 {
            // SAFETY: shorter than the text written, so every byte kept is written.
            unsafe { self.set_len(n - 1) }
        }
    }
    /// Append one byte.
    #[inline]
    fn push(&mut self, byte: u8) {
        self.reserve(1);
        let at = self.len();
        // SAFETY: one byte of room was reserved.
        unsafe {
            *self.as_mut_ptr().add(at) = byte;
            self.set_len(at + 1);
        }
    }
    /// Append `bytes`.
    #[inline]
    fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.reserve(bytes.len());
        let at = self.len();
        // SAFETY: room for `bytes` was reserved, and a caller's slice cannot overlap it.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.as_mut_ptr().add(at), bytes.len());
            self.set_len(at + bytes.len());
        }
    }
    /// Append a copy of the bytes at `range` of the text written so far.
    #[inline]
    fn extend_from_within(&mut self, range: std::ops::Range<usize>) {
        let at = self.len();
        assert!(
            range.start <= range.end && range.end <= at,
            "a range of the text"
        );
        let n = range.end - range.start;
        self.reserve(n);
        // SAFETY: the range lies in the written text, the copy lands in reserved room past
        // it (the buffer is not moved between the two pointers being taken), so the two do
        // not overlap.
        unsafe {
            let base = self.as_mut_ptr();
            std::ptr::copy_nonoverlapping(base.add(range.start), base.add(at), n);
            self.set_len(at + n);
        }
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn len(&self) -> usize {
        Vec::len(self)
    }
    #[inline]
    fn as_slice(&self) -> &[u8] {
        self
    }
    #[inline]
    fn reserve(&mut self, additional: usize) {
        Vec::reserve(self, additional)
    }
    #[inline]
    fn as_mut_ptr(&mut self) -> *mut u8 {
        Vec::as_mut_ptr(self)
    }
    #[inline]
    unsafe fn set_len(&mut self, new_len: usize) {
        // SAFETY: the caller's promise is Vec::set_len's.
        unsafe { Vec::set_len(self, new_len) }
    }
    #[inline]
    fn push(&mut self, byte: u8) {
        Vec::push(self, byte)
    }
    #[inline]
    fn extend_from_slice(&mut self, bytes: &[u8]) {
        Vec::extend_from_slice(self, bytes)
    }
    #[inline]
    fn extend_from_within(&mut self, range: std::ops::Range<usize>) {
        Vec::extend_from_within(self, range)
    }
}

/// A bytes object being written: `len` bytes of text in room for `cap`.
pub struct PyOut {
    /// Owned (one reference), and seen by no other code until `finish`.
    obj: *mut ffi::PyObject,
    data: *mut u8,
    len: usize,
    cap: usize,
}

impl PyOut {
    /// An empty text with room for `cap` bytes.
    pub fn with_capacity(py: Python<'_>, cap: usize) -> PyResult<Self> {
        let cap = cap.max(1);
        // SAFETY: a NULL source asks CPython for an uninitialized object of `cap` bytes.
        let obj = unsafe { ffi::PyBytes_FromStringAndSize(std::ptr::null(), cap as _) };
        if obj.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(PyOut {
            obj,
            // SAFETY: `obj` is a bytes object.
            data: unsafe { ffi::PyBytes_AS_STRING(obj) as *mut u8 },
            len: 0,
            cap,
        })
    }

    /// The bytes object, cut to the text.
    pub fn finish(mut self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        // SAFETY: `obj` has one reference, ours; on failure CPython frees it, sets it to
        // NULL (so Drop has nothing to release) and raises.
        if self.len != self.cap && unsafe { _PyBytes_Resize(&mut self.obj, self.len as _) } != 0 {
            return Err(PyErr::fetch(py));
        }
        let obj = std::mem::replace(&mut self.obj, std::ptr::null_mut());
        // SAFETY: the reference we owned is handed over, to a bytes object.
        Ok(unsafe { Bound::from_owned_ptr(py, obj).cast_into_unchecked::<PyBytes>() }.unbind())
    }

    #[cold]
    fn grow(&mut self, additional: usize) {
        let cap = (self.len + additional).max(self.cap * 2);
        // SAFETY: as in `finish`; a failed resize is out of memory, which aborts as a
        // Vec's does.
        if unsafe { _PyBytes_Resize(&mut self.obj, cap as _) } != 0 {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::array::<u8>(cap).unwrap_or(std::alloc::Layout::new::<u8>()),
            );
        }
        // SAFETY: `obj` is the resized bytes object.
        self.data = unsafe { ffi::PyBytes_AS_STRING(self.obj) as *mut u8 };
        self.cap = cap;
    }
}

impl Sink for PyOut {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: the first `len` bytes of the object's buffer are written.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }

    #[inline]
    fn reserve(&mut self, additional: usize) {
        if self.cap - self.len < additional {
            self.grow(additional);
        }
    }

    #[inline]
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.data
    }

    #[inline]
    unsafe fn set_len(&mut self, new_len: usize) {
        debug_assert!(new_len <= self.cap);
        self.len = new_len;
    }
}

impl Drop for PyOut {
    fn drop(&mut self) {
        if !self.obj.is_null() {
            // SAFETY: our one reference; a PyOut lives only inside a call holding the GIL.
            unsafe { ffi::Py_DECREF(self.obj) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::write_str;

    #[test]
    fn grows_and_is_cut_to_its_text() {
        Python::initialize();
        Python::attach(|py| {
            let mut out = PyOut::with_capacity(py, 4).unwrap();
            let long = "x".repeat(1000);
            write_str(&mut out, &long);
            out.push(b'!');
            out.extend_from_within(1..4);
            let want = format!("\"{long}\"!xxx");
            assert_eq!(out.as_slice(), want.as_bytes());
            let bytes = out.finish(py).unwrap();
            assert_eq!(bytes.bind(py).as_bytes(), want.as_bytes());
            let empty = PyOut::with_capacity(py, 16).unwrap().finish(py).unwrap();
            assert_eq!(empty.bind(py).as_bytes(), b"");
            drop(PyOut::with_capacity(py, 16).unwrap()); // released unfinished
        });
    }
}
