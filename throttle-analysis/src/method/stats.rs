//! Small statistics used by the analysis: medians with a distribution-free confidence
//! interval, coefficient of variation, pool-adjacent-violators, and a seeded generator for
//! the bootstrap.

/// Median of `x` (which must be non-empty).
pub fn median(x: &[f64]) -> f64 {
    let mut s = x.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The interval of the median from order statistics (binomial, no distributional
/// assumption) and its exact coverage: the narrowest [x_(k), x_(n-k+1)] that covers at
/// least 95%, or, with fewer than 6 values where none does, the full range, whose
/// coverage is 1 - 2^(1-n) (75% for 3 runs, 87.5% for 4, 93.75% for 5).
pub fn median_interval(x: &[f64]) -> (f64, f64, f64) {
    let mut s = x.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    // P(Bin(n, 1/2) <= j) for j = 0.. ; [x_(k), x_(n-k+1)] covers 1 - 2 P(Bin <= k - 1).
    let half_n = 0.5f64.powi(n as i32);
    let mut cdf = Vec::with_capacity(n);
    let (mut acc, mut choose) = (0.0, 1.0f64);
    for j in 0..n {
        acc += choose * half_n;
        cdf.push(acc);
        choose = choose * (n - j) as f64 / (j + 1) as f64;
    }
    let coverage = |k: usize| 1.0 - 2.0 * cdf[k - 1];
    let mut k = 1;
    while k < n.div_ceil(2) && coverage(k + 1) >= 0.95 {
        k += 1;
    }
    if n == 1 {
        return (s[0], s[0], 0.0);
    }
    (s[k - 1], s[n - k], coverage(k))
}

/// Coefficient of variation (sample standard deviation / mean); 0 for one value.
pub fn cv(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    if x.len() < 2 {
        return 0.0;
    }
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    if mean == 0.0 {
        0.0
    } else {
        var.sqrt() / mean.abs()
    }
}

/// Root mean square of `x`; 0 for none.
pub fn rms(x: &[f64]) -> f64 {
    if x.is_empty() {
        0.0
    } else {
        (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64).sqrt()
    }
}

/// Pool-adjacent-violators with equal weights: the closest non-increasing sequence.
pub fn pav_non_increasing(y: &[f64]) -> Vec<f64> {
    // Blocks of (sum, count); merge while a block's mean exceeds the previous one's.
    let mut blocks: Vec<(f64, usize)> = Vec::new();
    for &v in y {
        blocks.push((v, 1));
        while blocks.len() > 1 {
            let (s2, c2) = blocks[blocks.len() - 1];
            let (s1, c1) = blocks[blocks.len() - 2];
            if s2 / c2 as f64 > s1 / c1 as f64 {
                blocks.pop();
                blocks.pop();
                blocks.push((s1 + s2, c1 + c2));
            } else {
                break;
            }
        }
    }
    blocks
        .into_iter()
        .flat_map(|(s, c)| std::iter::repeat_n(s / c as f64, c))
        .collect()
}

/// A small deterministic generator for bootstrap resampling (SplitMix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_is_the_root_of_the_mean_square() {
        assert_eq!(rms(&[]), 0.0);
        assert!((rms(&[3.0, -4.0]) - 12.5f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn medians_and_intervals() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        // Three runs: their range, which covers 1 - 2/8 = 75%.
        assert_eq!(median_interval(&[5.0, 1.0, 3.0]), (1.0, 5.0, 0.75));
        // n = 10: [x(2), x(9)] covers 1 - 2 * 11/1024 = 0.978; [x(3), x(8)] only
        // 1 - 2 * 56/1024 = 0.891.
        let x: Vec<f64> = (1..=10).map(f64::from).collect();
        let (lo, hi, cov) = median_interval(&x);
        assert_eq!((lo, hi), (2.0, 9.0));
        assert!((cov - (1.0 - 22.0 / 1024.0)).abs() < 1e-12);
        assert_eq!(median_interval(&[7.0]), (7.0, 7.0, 0.0));
    }

    #[test]
    fn cv_by_hand() {
        // mean 2, sample sd 1 -> 0.5
        assert!((cv(&[1.0, 2.0, 3.0]) - 0.5).abs() < 1e-12);
        assert_eq!(cv(&[7.0]), 0.0);
    }

    #[test]
    fn pav_pools_violators() {
        assert_eq!(
            pav_non_increasing(&[30.0, 20.0, 25.0, 5.0, 0.0]),
            vec![30.0, 22.5, 22.5, 5.0, 0.0]
        );
        assert_eq!(pav_non_increasing(&[1.0, 2.0, 3.0]), vec![2.0, 2.0, 2.0]);
        assert_eq!(pav_non_increasing(&[3.0, 2.0, 1.0]), vec![3.0, 2.0, 1.0]);
    }
}
