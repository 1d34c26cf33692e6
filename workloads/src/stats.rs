//! The one summary statistic the workloads report: the median of their timed repeats
//! (the controller's analysis has its own, richer statistics; workloads do not depend on
//! it).

/// Median of `v` (NaN when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(super::median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(super::median(vec![]).is_nan());
    }
}
