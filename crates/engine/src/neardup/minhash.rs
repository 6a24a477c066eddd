//! MinHash signatures of the published family and their comparison (app/neardup/minhash.py).
//!
//! For k functions and a family seed s: 2k words of SplitMix64 from state s, a_i = word 2i
//! | 1, b_i = word 2i + 1, h_i(x) = a_i x + b_i mod 2^64, value_i = min over the set (2^64 - 1
//! for an empty set). Agreements are counted the way app.neardup.minhash.agreements counts them,
//! one pass per distance in the sorted columns, so `check` is called as often.

use super::Stopped;

/// The value of every position of an empty set's signature.
pub const EMPTY: u64 = u64::MAX;

/// The (a, b) coefficients of k hash functions.
pub struct Family {
    a: Vec<u64>,
    b: Vec<u64>,
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Family {
    /// The k functions of family seed `seed`.
    pub fn new(k: usize, seed: u64) -> Self {
        let mut state = seed;
        let (mut a, mut b) = (Vec::with_capacity(k), Vec::with_capacity(k));
        for _ in 0..k {
            a.push(splitmix64(&mut state) | 1);
            b.push(splitmix64(&mut state));
        }
        Family { a, b }
    }

    /// The signature values of a set of shingle hashes, written into `out` (k long).
    pub fn sign(&self, set: &[u64], out: &mut [u64]) {
        // One function at a time over the whole set, four running minima: the minima stay
        // in registers and the four chains of compares overlap.
        for ((o, &a), &b) in out.iter_mut().zip(&self.a).zip(&self.b) {
            let h = |x: u64| a.wrapping_mul(x).wrapping_add(b);
            let mut m = [EMPTY; 4];
            let mut quads = set.chunks_exact(4);
            for q in &mut quads {
                for lane in 0..4 {
                    m[lane] = m[lane].min(h(q[lane]));
                }
            }
            let rest = quads
                .remainder()
                .iter()
                .fold(EMPTY, |acc, &x| acc.min(h(x)));
            *o = m[0].min(m[1]).min(m[2]).min(m[3]).min(rest);
        }
    }
}

/// (i, j, count) for every pair of rows j < i of `rows` (n signatures of k values, row
/// major) agreeing in count > 0 positions, sorted by i then j.
///
/// As app.neardup.minhash.agreements: each column sorted once; at distance d, the rows equal to the
/// row d places on in a column (within a run of equal values, whatever their order);
/// `check` is called once per distance that has any.
pub fn agreements(
    rows: &[u64],
    n: usize,
    k: usize,
    check: &mut dyn FnMut() -> Result<(), Stopped>,
) -> Result<Vec<(usize, usize, u32)>, Stopped> {
    if n < 2 || k == 0 {
        return Ok(Vec::new());
    }
    // Runs of equal values in the sorted columns: (offset into `order`, length >= 2), and
    // the rows of each run in `order`. Values alone are sorted (most are unique); the rows
    // of the values shared are then placed by one scan of the column, each looked up among
    // the (sorted, few) shared values.
    let mut order: Vec<u32> = Vec::new();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut columns: Vec<u64> = vec![0; n * k]; // column major: a column is contiguous
    for (r, row) in rows.chunks_exact(k).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            columns[c * n + r] = v;
        }
    }
    let mut sorted: Vec<u64> = Vec::with_capacity(n);
    let mut shared: Vec<u64> = Vec::new(); // this column's shared values, ascending
    let mut fill: Vec<usize> = Vec::new(); // where each one's next row goes in `order`
    for column in columns.chunks_exact(n) {
        sorted.clear();
        sorted.extend_from_slice(column);
        sorted.sort_unstable();
        shared.clear();
        fill.clear();
        for run in sorted.chunk_by(|x, y| x == y).filter(|run| run.len() >= 2) {
            shared.push(run[0]);
            fill.push(order.len());
            runs.push((order.len(), run.len()));
            order.resize(order.len() + run.len(), 0);
        }
        if shared.is_empty() {
            continue;
        }
        for (r, v) in column.iter().enumerate() {
            if let Ok(at) = shared.binary_search(v) {
                order[fill[at]] = r as u32;
                fill[at] += 1;
            }
        }
    }
    let mut counts = Counts::new(n);
    let mut lag = 1;
    while !runs.is_empty() {
        check()?;
        for &(start, len) in &runs {
            for at in start..start + len - lag {
                let (a, b) = (order[at] as usize, order[at + lag] as usize);
                counts.add(a.max(b), a.min(b));
            }
        }
        lag += 1;
        runs.retain(|&(_, len)| len > lag);
    }
    Ok(counts.into_sorted())
}

/// Agreement counts per pair: dense over the lower triangle for pages of up to a few
/// thousand rows, else a list of pair keys sorted at the end.
enum Counts {
    Dense(Vec<u32>),
    Keys(Vec<u64>, usize),
}

const DENSE_MAX_PAIRS: usize = 1 << 22; // 16 MiB of u32 counts

impl Counts {
    fn new(n: usize) -> Self {
        let pairs = n * (n - 1) / 2;
        if pairs <= DENSE_MAX_PAIRS {
            Counts::Dense(vec![0; pairs])
        } else {
            Counts::Keys(Vec::new(), n)
        }
    }

    fn add(&mut self, i: usize, j: usize) {
        match self {
            Counts::Dense(cells) => cells[i * (i - 1) / 2 + j] += 1,
            Counts::Keys(keys, n) => keys.push((i * *n + j) as u64),
        }
    }

    fn into_sorted(self) -> Vec<(usize, usize, u32)> {
        let mut out = Vec::new();
        match self {
            Counts::Dense(cells) => {
                let mut at = 0;
                for i in 1.. {
                    if at >= cells.len() {
                        break;
                    }
                    for j in 0..i {
                        if cells[at] > 0 {
                            out.push((i, j, cells[at]));
                        }
                        at += 1;
                    }
                }
            }
            Counts::Keys(mut keys, n) => {
                keys.sort_unstable();
                for run in keys.chunk_by(|x, y| x == y) {
                    let key = run[0] as usize;
                    out.push((key / n, key % n, run.len() as u32));
                }
            }
        }
        out
    }
}

/// The share of A inside B estimated from Jaccard and the set sizes (A not empty), with
/// the reference model's operations (tests/reference/minhash.py, containment_from) in its order.
pub fn containment_from(jac: f64, size_a: u64, size_b: u64) -> f64 {
    let inter = jac * ((size_a + size_b) as f64) / (1.0 + jac);
    (inter / (size_a.max(1) as f64)).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_k4_seed1_matches_the_published_coefficients() {
        // tests/data/minhash_vectors.json, "coefficients_k4_seed1"
        let f = Family::new(4, 1);
        assert_eq!(f.a[0], 10451216379200822465);
        assert_eq!(f.b[0], 13757245211066428519);
        assert_eq!(f.a[3], 16184226688143867045);
        assert_eq!(f.b[3], 9648886400068060533);
    }

    #[test]
    fn agreements_count_equal_positions_one_check_per_distance() {
        // rows 0 and 2 agree in both positions, row 1 with row 2 in the second
        let rows = [5, 7, 1, 7, 5, 7];
        let mut calls = 0;
        let found = agreements(&rows, 3, 2, &mut || {
            calls += 1;
            Ok(())
        });
        assert_eq!(found.ok(), Some(vec![(1, 0, 1), (2, 0, 2), (2, 1, 1)]));
        assert_eq!(calls, 2); // a run of three in the second column: distances 1 and 2
    }

    #[test]
    fn agreements_are_the_pairwise_counts_however_many_values_are_shared() {
        let mut state = 7u64;
        for (n, k, spread) in [(30, 16, 3), (30, 16, 40), (9, 4, 1000), (50, 8, 2)] {
            let rows: Vec<u64> = (0..n * k)
                .map(|_| splitmix64(&mut state) % spread)
                .collect();
            let mut brute = Vec::new();
            for i in 1..n {
                for j in 0..i {
                    let count = (0..k)
                        .filter(|&c| rows[i * k + c] == rows[j * k + c])
                        .count();
                    if count > 0 {
                        brute.push((i, j, count as u32));
                    }
                }
            }
            assert_eq!(agreements(&rows, n, k, &mut || Ok(())).ok(), Some(brute));
        }
    }

    #[test]
    fn sparse_counts_agree_with_dense() {
        let mut dense = Counts::Dense(vec![0; 6]);
        let mut sparse = Counts::Keys(Vec::new(), 4);
        for (i, j) in [(3, 1), (1, 0), (3, 1), (2, 0)] {
            dense.add(i, j);
            sparse.add(i, j);
        }
        assert_eq!(dense.into_sorted(), sparse.into_sorted());
    }
}
