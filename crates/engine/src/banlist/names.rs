//! The keys a canonical URL is looked up under: its url key, its prefix keys, its host's
//! parents. Plain string slicing of an already canonical URL (canonicalization itself is
//! done elsewhere); each function mirrors the Python one named in its doc.

/// Bytes whose dots one mask holds (see [`Dots`]).
const WIDTH: usize = 32;

/// `model.url_key`: the canonical URL without its scheme, so http and https match alike.
#[inline(always)]
pub fn url_key(canonical: &str) -> &str {
    match after_scheme(canonical) {
        Some(at) => &canonical[at..],
        None => "",
    }
}

/// Where what follows the first `://` starts (the scheme is a few letters: its colon is
/// almost always the first).
#[inline(always)]
fn after_scheme(canonical: &str) -> Option<usize> {
    let bytes = canonical.as_bytes();
    // `http://` and `https://` (nearly every URL) compared whole first: memchr's setup
    // costs more than the whole search on a string this short
    if bytes.starts_with(b"https://") {
        return Some(8);
    }
    if bytes.starts_with(b"http://") {
        return Some(7);
    }
    memchr::memchr_iter(b':', bytes)
        .find(|&colon| bytes[colon + 1..].starts_with(b"//"))
        .map(|colon| colon + 3)
}

/// `canon.split`'s path: what lies between the host and the query, or None when the string
/// is not a canonical URL (no scheme separator, or no host before the path).
#[inline]
pub fn path_of(canonical: &str) -> Option<&str> {
    let rest = &canonical[after_scheme(canonical)?..];
    let bytes = rest.as_bytes();
    // the first `/` or `?`: a `?` first leaves no path before the query
    let slash = memchr::memchr2(b'/', b'?', bytes)?;
    if bytes[slash] != b'/' || slash == 0 {
        return None;
    }
    let end = memchr::memchr(b'?', &bytes[slash..]).map_or(bytes.len(), |q| slash + q);
    Some(&rest[slash..end])
}

/// A canonical URL's url key and path (`url_key`, `path_of`), and whether the url key is
/// `host + path + …` (the prefix keys are then slices of it).
#[derive(Clone, Copy, Debug)]
pub struct UrlPath<'a> {
    /// `url_key`.
    pub whole: &'a str,
    /// `path_of`.
    pub path: Option<&'a str>,
    /// Whether `whole` starts with the host, then the path.
    pub sliced: bool,
}

/// `url_key`, `path_of` and whether the one is `host + path + …`: for a canonical URL and
/// its own host (nearly always) the path starts right after the host, so neither the path
/// nor the query is searched for with memchr (whose setup costs more than these short
/// strings); anything else as `path_of` finds it.
#[inline]
pub fn url_path<'a>(canonical: &'a str, host: &str) -> UrlPath<'a> {
    let whole = url_key(canonical);
    let (w, h) = (whole.as_bytes(), host.as_bytes());
    if starts_with_host(w, h) {
        let end = h.len() + first_query(&w[h.len()..]);
        return UrlPath {
            whole,
            path: Some(&whole[h.len()..end]),
            sliced: true,
        };
    }
    let path = path_of(canonical);
    let sliced = path.is_some_and(|path| {
        whole
            .strip_prefix(host)
            .is_some_and(|rest| rest.starts_with(path))
    });
    UrlPath {
        whole,
        path,
        sliced,
    }
}

/// Whether the url key `w` is the host `h`, then the path: its first `/` or `?` is the one
/// after the host (`path_of`'s start). Nearly always, for a canonical URL and its own host.
#[inline(always)]
fn starts_with_host(w: &[u8], h: &[u8]) -> bool {
    !h.is_empty()
        && w.get(h.len()) == Some(&b'/')
        && super::shard::same(&w[..h.len()], h)
        && !slash_or_query(h)
}

/// The url key and the first length `prefix_lens_short_first` gives of `url_path`'s path,
/// when the url key is `host + path + …` as `url_path` finds it first: only the path's
/// first segment is read (its end, which the query starts, is not looked for). None when
/// `url_path` finds the path the longer way.
#[inline(always)]
pub fn first_short_prefix<'a>(canonical: &'a str, host: &str) -> Option<(&'a str, usize)> {
    let whole = url_key(canonical);
    let (w, h) = (whole.as_bytes(), host.as_bytes());
    if !starts_with_host(w, h) {
        return None;
    }
    // the path and what follows it; it starts with `/`, so the root's length is 0
    let rest = &w[h.len()..];
    // the first `/` or `?` past the path's first byte, a word at a time: past a byte
    // that is neither, it ends the first segment (as the end does)
    let end = 1 + first_slash_or_query(&rest[1..]);
    if end > 1 {
        return Some((whole, end));
    }
    // the segment is empty: the path's end, or the end of the slashes that start it
    let mut at = 1;
    loop {
        match rest.get(at) {
            // the path ends here: its length, unless it ends in a slash (then the root's)
            None | Some(b'?') => {
                return Some((whole, if rest[at - 1] != b'/' { at } else { 0 }));
            }
            Some(b'/') if rest[at - 1] != b'/' => return Some((whole, at)),
            _ => at += 1,
        }
    }
}

/// Where the first `?` of `bytes` is (their length when none is), a word at a time.
#[inline(always)]
fn first_query(bytes: &[u8]) -> usize {
    first_becoming_query(bytes, 0)
}

/// Where the first `/` or `?` of `bytes` is (their length when none is), a word at a time:
/// the two are the same byte once bit 4 is set.
#[inline(always)]
fn first_slash_or_query(bytes: &[u8]) -> usize {
    first_becoming_query(bytes, 0x10)
}

/// Where the first byte of `bytes` that is `?` once the bits of `set` are set in it is
/// (their length when none is), a word at a time.
#[inline(always)]
fn first_becoming_query(bytes: &[u8], set: u8) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // the top bit of each byte that becomes `?`: exact up to the first one (a borrow only
    // runs past a zero byte), so the lowest bit set is the first
    let found = |word: u64| {
        let x = (word | (u64::from(set) * ONES)) ^ (0x3f * ONES);
        x.wrapping_sub(ONES) & !x & (0x80 * ONES)
    };
    let len = bytes.len();
    if len < 8 {
        return bytes.iter().position(|&b| b | set == b'?').unwrap_or(len);
    }
    let mut at = 0;
    while at + 8 < len {
        let f = found(word_at(bytes, at));
        if f != 0 {
            return at + f.trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    // the last word, overlapping bytes already read (none of them one that becomes `?`)
    let f = found(word_at(bytes, len - 8));
    if f != 0 {
        len - 8 + f.trailing_zeros() as usize / 8
    } else {
        len
    }
}

/// Whether `bytes` hold a `/` or a `?` (0x2f, 0x3f: the same byte once bit 4 is set), a
/// word at a time.
#[inline(always)]
fn slash_or_query(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // a byte of the word that is `?` once bit 4 is set becomes 0; whether any byte is 0
    let any = |word: u64| {
        let x = (word | (0x10 * ONES)) ^ (0x3f * ONES);
        x.wrapping_sub(ONES) & !x & (0x80 * ONES) != 0
    };
    let len = bytes.len();
    if len < 8 {
        return bytes.iter().any(|&b| b | 0x10 == 0x3f);
    }
    let mut at = 0;
    while at + 8 < len {
        if any(word_at(bytes, at)) {
            return true;
        }
        at += 8;
    }
    any(word_at(bytes, len - 8))
}

/// The prefix keys of a path, most specific first, each once: `host + p.rstrip("/")` for
/// every `p` of `canon.path_prefixes(path)`, reversed (what `index._prefix_rows` probes).
pub fn prefix_keys(host: &str, path: &str) -> Vec<String> {
    prefix_lens(path)
        .map(|len| format!("{host}{}", &path[..len]))
        .collect()
}

/// The lengths of the path part of the prefix keys of `path`, longest first, each once:
/// every key is `host + &path[..len]`, so a caller holding `host + path` in one string
/// (a canonical URL's url key) slices the keys out of it.
pub fn prefix_lens(path: &str) -> PrefixLens<'_> {
    PrefixLens {
        bytes: path.as_bytes(),
        cursor: path.len(),
        stage: 0,
        last: None,
    }
}

/// The lengths `prefix_lens` gives, one end at a time: the path, each slash past the
/// first from the last (a slash's end before it and after it trim alike), then the root;
/// each end trimmed of its trailing slashes, and given when it differs from the last.
#[derive(Clone, Debug)]
pub struct PrefixLens<'a> {
    bytes: &'a [u8],
    /// Slashes before this are still to come.
    cursor: usize,
    /// 0: the whole path next, 1: the slashes, 2: the root, 3: done.
    stage: u8,
    last: Option<usize>,
}

impl Iterator for PrefixLens<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        let bytes = self.bytes;
        loop {
            let end = match self.stage {
                0 => {
                    self.stage = 1;
                    bytes.len()
                }
                1 => {
                    let from = 1.min(self.cursor);
                    match bytes[from..self.cursor].iter().rposition(|&b| b == b'/') {
                        Some(at) => {
                            self.cursor = from + at;
                            self.cursor
                        }
                        None => {
                            self.stage = 2;
                            continue;
                        }
                    }
                }
                2 => {
                    self.stage = 3;
                    1.min(bytes.len())
                }
                _ => return None,
            };
            let len = bytes[..end]
                .iter()
                .rposition(|&b| b != b'/')
                .map_or(0, |at| at + 1);
            if self.last != Some(len) {
                self.last = Some(len);
                return Some(len);
            }
        }
    }
}

/// The lengths `prefix_lens` gives, in another order: the shortest past the root first,
/// then each longer one, the root's (the host alone) last. When at most one prefix entry
/// lies under a host the order of its keys does not change the answer, and a banned prefix
/// is most often one or two segments of a deeper path: this finds it in fewer probes.
pub fn prefix_lens_short_first(path: &str) -> ShortFirst<'_> {
    let bytes = path.as_bytes();
    let root = usize::from(bytes.first().is_some_and(|&b| b != b'/'));
    ShortFirst {
        bytes,
        at: 1,
        root: Some(root),
    }
}

/// See [`prefix_lens_short_first`]. Each length `prefix_lens` gives is a slash's offset
/// after a byte that is not one, or the whole path when it does not end in a slash, or the
/// root's; so one pass from the front gives them in ascending order, each once.
#[derive(Clone, Debug)]
pub struct ShortFirst<'a> {
    bytes: &'a [u8],
    /// The next byte to look at; past the end once the whole path's length was given.
    at: usize,
    /// The root's length, given last.
    root: Option<usize>,
}

impl Iterator for ShortFirst<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        let bytes = self.bytes;
        let root = self.root?;
        while self.at < bytes.len() {
            let at = self.at;
            self.at += 1;
            if bytes[at] == b'/' && bytes[at - 1] != b'/' && at != root {
                return Some(at);
            }
        }
        if self.at == bytes.len() {
            self.at += 1;
            let len = bytes.len();
            if bytes.last().is_some_and(|&b| b != b'/') && len != root {
                return Some(len);
            }
        }
        self.root.take()
    }
}

/// The lengths of the prefix keys of `path` in the order a lookup probes them: most
/// specific first (`prefix_lens`: the most specific entry wins), or, when the summary says
/// at most one prefix entry lies under the host (`single`), `prefix_lens_short_first`.
#[inline]
pub fn prefix_order(path: &str, single: bool) -> PrefixOrder<'_> {
    if single {
        PrefixOrder::Short(prefix_lens_short_first(path))
    } else {
        PrefixOrder::Long(prefix_lens(path))
    }
}

/// See [`prefix_order`].
#[derive(Clone, Debug)]
pub enum PrefixOrder<'a> {
    /// Most specific first.
    Long(PrefixLens<'a>),
    /// Shortest past the root first, the root last.
    Short(ShortFirst<'a>),
}

impl Iterator for PrefixOrder<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        match self {
            PrefixOrder::Long(lens) => lens.next(),
            PrefixOrder::Short(lens) => lens.next(),
        }
    }
}

/// `canon.is_ipv4`: a dotted quad of 1-3 digit groups.
pub fn is_ipv4(host: &str) -> bool {
    if !host.as_bytes().last().is_some_and(u8::is_ascii_digit) {
        return false;
    }
    let mut parts = 0;
    for part in host.split('.') {
        parts += 1;
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    parts == 4
}

/// The dots of a name from the last to the first, as byte offsets: those in its last
/// 32 bytes (where a site's two dots almost always are) from one bit mask made 16 bytes at
/// a time, without a loop over bytes to leave at an unpredictable place; any before them by
/// a byte scan.
#[derive(Clone, Debug)]
pub struct Dots<'a> {
    bytes: &'a [u8],
    /// Bit `j`: byte `len - 32 + j` is a dot not yet given.
    mask: u32,
    /// Bytes before this are not in the mask.
    rest: usize,
}

impl<'a> Dots<'a> {
    /// The dots of `name`.
    #[inline(always)]
    pub fn of(name: &'a str) -> Self {
        let bytes = name.as_bytes();
        Dots {
            bytes,
            mask: tail_dots(bytes),
            rest: bytes.len().saturating_sub(WIDTH),
        }
    }
}

impl Iterator for Dots<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        if self.mask != 0 {
            let j = 31 - self.mask.leading_zeros() as usize;
            self.mask ^= 1 << j;
            return Some(self.bytes.len() + j - WIDTH);
        }
        let dot = self.bytes[..self.rest].iter().rposition(|&b| b == b'.')?;
        self.rest = dot;
        Some(dot)
    }
}

/// Bit `t` set when byte `at + t` is a dot, for the 16 bytes from `at`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn dots16(bytes: &[u8], at: usize) -> u32 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    let block: &[u8; 16] = match bytes[at..at + 16].try_into() {
        Ok(block) => block,
        Err(_) => return 0,
    };
    // (SSE2 is part of x86_64; recent compilers call these intrinsics safe)
    #[allow(unused_unsafe)]
    // SAFETY: `block` is 16 readable bytes; an unaligned load reads exactly those.
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast());
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'.' as i8))) as u32
    }
}

/// Bit `t` set when byte `at + t` is a dot, for the 16 bytes from `at`.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn dots16(bytes: &[u8], at: usize) -> u32 {
    word_dots(word_at(bytes, at)) | word_dots(word_at(bytes, at + 8)) << 8
}

/// Bit `t` set when byte `t` of `lo` (bits 0 to 7) or byte `t - 8` of `hi` (bits 8 to 15) is
/// a dot, the words read little-endian: two words of a name in one compare.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn dots_of_words(lo: u64, hi: u64) -> u32 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set1_epi8, _mm_set_epi64x};
    // (SSE2 is part of x86_64; recent compilers call these intrinsics safe)
    #[allow(unused_unsafe)]
    // SAFETY: register operations only, on values (no memory is read).
    unsafe {
        let v = _mm_set_epi64x(hi as i64, lo as i64);
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'.' as i8))) as u32
    }
}

/// Bit `t` set when byte `t` of `lo` (bits 0 to 7) or byte `t - 8` of `hi` (bits 8 to 15) is
/// a dot, the words read little-endian.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn dots_of_words(lo: u64, hi: u64) -> u32 {
    word_dots(lo) | word_dots(hi) << 8
}

/// Bit `t` set when byte `len - 16 + t` of `bytes` is a dot: its last 16 bytes in one
/// compare, or all of a name of 8 to 15 bytes (the bits below `16 - len` clear). A name
/// has at least 8 bytes here (`HostSummary::site` sends a shorter one to a byte scan).
#[inline(always)]
pub fn last16_dots(bytes: &[u8]) -> u32 {
    let len = bytes.len();
    debug_assert!(len >= 8, "last16_dots of {len} bytes");
    if len >= 16 {
        dots16(bytes, len - 16)
    } else {
        // the first word's bytes shifted to where they are, the last word's in place (bytes
        // in both give the same bit twice)
        let dots = dots_of_words(word_at(bytes, 0), word_at(bytes, len - 8));
        (dots & 0xff) << (16 - len) | (dots & 0xff00)
    }
}

/// The last dot of `bytes[..end]` (its `rposition`): among the 16 bytes before `end` in one
/// compare when the name has 16 bytes, before them by a byte scan.
#[inline(always)]
pub fn last_dot(bytes: &[u8], end: usize) -> Option<usize> {
    let head = &bytes[..end];
    if bytes.len() < 16 {
        return head.iter().rposition(|&b| b == b'.');
    }
    // the 16 bytes ending at `end`, or the first 16 (only those before `end` kept)
    let from = end.max(16) - 16;
    let dots = dots16(bytes, from) & ((1u32 << (end - from)) - 1);
    if dots != 0 {
        return Some(from + 31 - dots.leading_zeros() as usize);
    }
    if from == 0 {
        // the 16 bytes held all of `head` (most often: a site's label below starts a host)
        return None;
    }
    head[..from].iter().rposition(|&b| b == b'.')
}

/// Bit `t` set when byte `t` of the word (little-endian) is a dot.
#[inline(always)]
fn word_dots(word: u64) -> u32 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let x = word ^ 0x2e2e_2e2e_2e2e_2e2e; // a dot's byte becomes 0
                                          // the top bit of each byte that is 0, exactly (no borrow crosses a byte)
    let zero = !((x & LOW7).wrapping_add(LOW7) | x | LOW7);
    // gather the 8 top bits into one byte: bit t from byte t
    ((zero >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32
}

#[inline(always)]
fn word_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Bit `j` set when byte `len - 32 + j` is a dot: the last 32 bytes, read as (overlapping)
/// blocks, each block's bits shifted to where its bytes are.
#[inline(always)]
pub fn tail_dots(bytes: &[u8]) -> u32 {
    let len = bytes.len();
    if len >= 16 {
        tail_dots_after(bytes, dots16(bytes, len - 16))
    } else if len >= 8 {
        word_dots(word_at(bytes, 0)) << (WIDTH - len) | word_dots(word_at(bytes, len - 8)) << 24
    } else {
        let mut word = [0; 8];
        word[8 - len..].copy_from_slice(bytes);
        word_dots(u64::from_le_bytes(word)) << 24
    }
}

/// `tail_dots` of a name of at least 16 bytes, given the dots of its last 16
/// (`last16_dots`): the 16 bytes before those (or its first 16, shifted to where they are)
/// in one compare more.
#[inline(always)]
pub fn tail_dots_after(bytes: &[u8], last16: u32) -> u32 {
    let len = bytes.len();
    debug_assert!(len >= 16);
    let head = if len >= WIDTH {
        dots16(bytes, len - WIDTH)
    } else {
        dots16(bytes, 0) << (WIDTH - len)
    };
    head | last16 << 16
}

/// How many labels a name has (what bounds the parents worth probing).
pub fn labels(name: &str) -> usize {
    name.bytes().filter(|&b| b == b'.').count() + 1
}

/// `index._parents`: the host and its parents that a domain entry or org member could be,
/// most specific first, only those of at most `limit` labels and never the bare TLD; an IP
/// is only itself.
pub fn suffixes(host: &str, limit: usize) -> Vec<&str> {
    if host.starts_with('[') || is_ipv4(host) {
        return vec![host];
    }
    let bytes = host.as_bytes();
    let mut starts: Vec<usize> = Vec::new(); // starts[k - 1]: where the parent of k labels begins
    let mut pos = bytes.len();
    let mut whole = false;
    while starts.len() < limit {
        match bytes[..pos].iter().rposition(|&b| b == b'.') {
            Some(dot) => {
                starts.push(dot + 1);
                pos = dot;
            }
            None => {
                whole = true;
                break;
            }
        }
    }
    let mut found = Vec::with_capacity(starts.len() + 1);
    if whole {
        found.push(host);
    }
    for k in (2..=starts.len()).rev() {
        found.push(&host[starts[k - 1]..]);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_keys_dedup_and_order_like_python() {
        assert_eq!(prefix_keys("h", "/a/b/c"), ["h/a/b/c", "h/a/b", "h/a", "h"]);
        assert_eq!(prefix_keys("h", "/a//b"), ["h/a//b", "h/a", "h"]);
        assert_eq!(prefix_keys("h", "/"), ["h"]);
        assert_eq!(prefix_keys("h", "/a/"), ["h/a", "h"]);
    }

    #[test]
    fn suffixes_stop_at_the_limit_and_skip_the_tld() {
        assert_eq!(suffixes("a.b.c.d", 2), ["c.d"]);
        assert_eq!(suffixes("a.b.c.d", 9), ["a.b.c.d", "b.c.d", "c.d"]);
        assert_eq!(suffixes("c.d", 2), ["c.d"]);
        assert_eq!(suffixes("localhost", 1), ["localhost"]);
        assert_eq!(suffixes("a.b.c", 1), Vec::<&str>::new());
        assert_eq!(suffixes("1.2.3.4", 9), ["1.2.3.4"]);
        assert_eq!(suffixes("[::1]", 9), ["[::1]"]);
    }

    #[test]
    fn the_portable_blocks_find_what_the_vector_ones_do() {
        let name = b"a.b..cc.ddd.eeeeeeeee.f.";
        for at in 0..=name.len() - 16 {
            let portable = word_dots(word_at(name, at)) | word_dots(word_at(name, at + 8)) << 8;
            assert_eq!(dots16(name, at), portable);
        }
    }

    #[test]
    fn the_portable_words_find_what_the_vector_ones_do() {
        let name = b"a.b..cc.ddd.eeeeeeeee.f.";
        for at in 0..=name.len() - 8 {
            for other in 0..=name.len() - 8 {
                let (lo, hi) = (word_at(name, at), word_at(name, other));
                let portable = word_dots(lo) | word_dots(hi) << 8;
                assert_eq!(dots_of_words(lo, hi), portable);
            }
        }
    }

    #[test]
    fn the_last_dots_as_a_byte_scan_finds_them() {
        let mut names: Vec<String> = vec!["".into(), ".".into(), "é.a".into()];
        for len in 0..40 {
            for dot in 0..len {
                let mut name = "a".repeat(len);
                name.replace_range(dot..=dot, ".");
                if dot + 5 < len {
                    name.replace_range(dot + 5..=dot + 5, ".");
                }
                names.push(name);
            }
            names.push(".".repeat(len));
            names.push("a".repeat(len));
        }
        for name in &names {
            let bytes = name.as_bytes();
            let len = bytes.len();
            // bit t: byte len - 16 + t
            let want: u32 = (0..len)
                .filter(|&at| bytes[at] == b'.' && at + 16 >= len)
                .map(|at| 1 << (at + 16 - len))
                .sum();
            if len >= 8 {
                assert_eq!(last16_dots(bytes), want, "{name:?}");
            }
            for end in 0..=len {
                let want = bytes[..end].iter().rposition(|&b| b == b'.');
                assert_eq!(last_dot(bytes, end), want, "{name:?} {end}");
            }
        }
    }

    #[test]
    fn dots_from_the_end_as_a_byte_scan_finds_them() {
        let mut names: Vec<String> = ["", ".", "a", "a.", ".a", "a..b", "www.example.com", "x.co"]
            .map(String::from)
            .to_vec();
        // every length to past two windows, dots at every place
        for len in 0..80 {
            for dot in 0..len {
                let mut name = "a".repeat(len);
                name.replace_range(dot..=dot, ".");
                if dot + 3 < len {
                    name.replace_range(dot + 3..=dot + 3, ".");
                }
                names.push(name);
            }
            names.push(".".repeat(len));
            names.push("é.".repeat(len / 3));
        }
        for name in &names {
            let want: Vec<usize> = name.match_indices('.').map(|(at, _)| at).rev().collect();
            assert_eq!(Dots::of(name).collect::<Vec<_>>(), want, "{name:?}");
        }
    }

    /// The iterator chain `PrefixLens` replaced.
    fn reference_prefix_lens(path: &str) -> impl Iterator<Item = usize> + '_ {
        let bytes = path.as_bytes();
        let trimmed = move |end: usize| {
            bytes[..end]
                .iter()
                .rposition(|&b| b != b'/')
                .map_or(0, |at| at + 1)
        };
        // the ends of `canon.path_prefixes`: the path, each slash past the first (before it and
        // after it), and the root; a prefix's key drops its trailing slashes
        let slashes = bytes
            .iter()
            .enumerate()
            .skip(1)
            .rev()
            .filter(|(_, &b)| b == b'/')
            .flat_map(|(at, _)| [at + 1, at]);
        let mut last = None;
        std::iter::once(bytes.len())
            .chain(slashes)
            .chain(std::iter::once(1.min(bytes.len())))
            .map(trimmed)
            .filter(move |&len| {
                let new = last != Some(len);
                last = Some(len);
                new
            })
    }

    #[test]
    fn prefix_lens_as_the_chain_of_iterators_gives_them() {
        let parts = ["", "/", "//", "a", "bc", "/x/", "é"];
        for a in parts {
            for b in parts {
                for c in parts {
                    for d in parts {
                        let path = format!("{a}{b}{c}{d}");
                        let got: Vec<usize> = prefix_lens(&path).collect();
                        let want: Vec<usize> = reference_prefix_lens(&path).collect();
                        assert_eq!(got, want, "{path:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn short_first_gives_the_prefix_lens_shortest_first_and_the_root_last() {
        let parts = ["", "/", "//", "a", "bc", "/x/", "é"];
        for a in parts {
            for b in parts {
                for c in parts {
                    for d in parts {
                        let path = format!("{a}{b}{c}{d}");
                        let got: Vec<usize> = prefix_lens_short_first(&path).collect();
                        let mut want: Vec<usize> = prefix_lens(&path).collect();
                        // ascending, the root's (the shortest) moved last
                        want.reverse();
                        want.rotate_left(1);
                        assert_eq!(got, want, "{path:?}");
                    }
                }
            }
        }
    }

    /// The byte-at-a-time `path_of` and `url_key` the block scans replaced.
    fn reference_path_of(canonical: &str) -> Option<&str> {
        let bytes = canonical.as_bytes();
        let colon = bytes.windows(3).position(|w| w == b"://")?;
        let rest = &canonical[colon + 3..];
        let bytes = rest.as_bytes();
        let end = bytes.iter().position(|&b| b == b'?').unwrap_or(bytes.len());
        let slash = bytes[..end].iter().position(|&b| b == b'/')?;
        (slash > 0).then(|| &rest[slash..end])
    }

    fn reference_url_key(canonical: &str) -> &str {
        let colon = canonical.as_bytes().windows(3).position(|w| w == b"://");
        colon.map_or("", |at| &canonical[at + 3..])
    }

    #[test]
    fn paths_and_url_keys_as_a_byte_scan_finds_them() {
        let parts = [
            "",
            "h",
            "a:",
            "://",
            "/",
            "?",
            "x.example",
            "//",
            ":/",
            "é",
            "http",
            "https",
        ];
        let mut x: u64 = 3;
        for _ in 0..20_000 {
            let mut url = String::new();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for k in 0..(x % 9) {
                let pick = (x >> (4 * k + 8)) as usize % parts.len();
                url.push_str(parts[pick]);
                if (x >> (k + 40)) & 1 == 1 {
                    url.push_str("abcdefghijklmnopq");
                }
            }
            assert_eq!(path_of(&url), reference_path_of(&url), "{url:?}");
            assert_eq!(url_key(&url), reference_url_key(&url), "{url:?}");
            // the url's own host, or another, or one holding `/` or `?`
            let key = reference_url_key(&url);
            let own = key.find(['/', '?']).map_or(key, |at| &key[..at]);
            for host in [own, "x.example", "h", "", "a/b", "a?", "abcdefghijklmnopq/"] {
                let got = url_path(&url, host);
                let path = reference_path_of(&url);
                let sliced = path.is_some_and(|p| {
                    key.strip_prefix(host)
                        .is_some_and(|rest| rest.starts_with(p))
                });
                assert_eq!(
                    (got.whole, got.path, got.sliced),
                    (key, path, sliced),
                    "{url:?} {host:?}"
                );
                // the first short prefix without the path's end: what the path gives
                let short = first_short_prefix(&url, host);
                let first = path.and_then(|p| prefix_lens_short_first(p).next());
                if let Some((whole, len)) = short {
                    assert!(
                        sliced && whole == key && Some(len) == first,
                        "{url:?} {host:?}"
                    );
                }
                // found so whenever the url key is the host, then its path
                let plain = !host.is_empty() && !host.contains(['/', '?']);
                let after = key.strip_prefix(host).is_some_and(|r| r.starts_with('/'));
                assert_eq!(short.is_some(), plain && after, "{url:?} {host:?}");
            }
        }
    }

    #[test]
    fn the_first_query_a_word_at_a_time_is_the_first_byte_scan_finds() {
        for len in 0..40 {
            for q in 0..=len {
                for other in [b'a', b'/', b'?' ^ 0x80, b'?' + 1, 0] {
                    let mut bytes = vec![other; len];
                    if q < len {
                        bytes[q] = b'?';
                        if q + 2 < len {
                            bytes[q + 2] = b'?';
                        }
                    }
                    let want = bytes.iter().position(|&b| b == b'?').unwrap_or(len);
                    assert_eq!(first_query(&bytes), want, "{bytes:?}");
                    let slash = bytes.iter().any(|&b| b == b'/' || b == b'?');
                    assert_eq!(slash_or_query(&bytes), slash, "{bytes:?}");
                    let first = bytes.iter().position(|&b| b == b'/' || b == b'?');
                    let first = first.unwrap_or(len);
                    assert_eq!(first_slash_or_query(&bytes), first, "{bytes:?}");
                }
            }
        }
    }

    #[test]
    fn paths_and_url_keys() {
        assert_eq!(path_of("http://h/p/x?q=1"), Some("/p/x"));
        assert_eq!(path_of("http:///x"), None);
        assert_eq!(path_of("nope"), None);
        assert_eq!(url_key("https://h/p?q"), "h/p?q");
        assert_eq!(url_key("h:/x://y"), "y");
        assert_eq!(url_key("http:/x"), "");
        assert_eq!(path_of("http://h?q=/a"), None);
        assert_eq!(path_of("http://h/?q=/a"), Some("/"));
        assert_eq!(path_of("a://é/ü?x"), Some("/ü"));
        assert!(is_ipv4("1.2.3.4") && !is_ipv4("1.2.3") && !is_ipv4("1.2.3.4444"));
    }
}
