//! The quantiles every interval of the analysis is made from: the normal distribution's
//! and Student's t's, for any level and any (fractional) degrees of freedom, so that an
//! interval can be stated at 50, 80, 90 or 95% and the reliability of each level checked
//! (`bench/projection.sh`). One home for the z-values the rest of the analysis used to
//! write out (1.6448536 for a two-sided 90% interval).
//!
//! The distribution functions are computed from their definitions (the error function by
//! its power series and, in the tails, its continued fraction; Student's t through the
//! regularized incomplete beta function by its continued fraction, evaluated by Lentz's
//! method) and inverted by bisection: slow next to a rational approximation, exact to
//! 1e-10, and called a few hundred times per analysis.

/// z of a two-sided 90% interval (the normal quantile at 0.95): the one constant the
/// analysis's 90% intervals, noise floors and checks share ([`z`] computes any other).
pub const Z90: f64 = 1.644_853_626_951_472_2;

/// z of a two-sided interval of `level` (0.90: 1.6449): the normal quantile at
/// (1 + level) / 2.
pub fn z(level: f64) -> f64 {
    if !(level > 0.0 && level < 1.0) {
        return f64::NAN;
    }
    normal_quantile((1.0 + level) / 2.0)
}

/// t of a two-sided interval of `level` with `df` degrees of freedom (0.90 and 2: 2.920);
/// infinite with no degree of freedom, the normal's z from 1e7 on.
pub fn t(level: f64, df: f64) -> f64 {
    if !(level > 0.0 && level < 1.0) {
        return f64::NAN;
    }
    student_quantile((1.0 + level) / 2.0, df)
}

/// The standard normal distribution function.
pub fn normal_cdf(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 0.0 {
        return 1.0 - normal_cdf(-x);
    }
    let u = x / std::f64::consts::SQRT_2;
    if u < 3.0 {
        0.5 + 0.5 * erf_series(u)
    } else {
        1.0 - 0.5 * erfc_fraction(u)
    }
}

/// erf(u) by its power series, 2/sqrt(pi) sum (-1)^n u^(2n+1) / (n! (2n+1)); for u < 3,
/// where its terms stay below e^9 and cancel to 1e-13.
fn erf_series(u: f64) -> f64 {
    let (mut term, mut sum) = (u, u);
    for n in 1..200 {
        term *= -u * u / n as f64;
        let add = term / (2 * n + 1) as f64;
        sum += add;
        if add.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    2.0 / std::f64::consts::PI.sqrt() * sum
}

/// erfc(u) for u >= 3 by its continued fraction,
/// e^(-u^2)/sqrt(pi) x 1/(u + (1/2)/(u + 1/(u + (3/2)/(u + ...)))), evaluated from
/// the tail.
fn erfc_fraction(u: f64) -> f64 {
    let mut f = u;
    for k in (1..60).rev() {
        f = u + (k as f64 / 2.0) / f;
    }
    (-u * u).exp() / std::f64::consts::PI.sqrt() / f
}

/// The standard normal quantile at `p` (0 < p < 1).
pub fn normal_quantile(p: f64) -> f64 {
    invert(p, normal_cdf)
}

/// Student's t distribution function with `df` degrees of freedom (any positive real).
pub fn student_cdf(x: f64, df: f64) -> f64 {
    if df >= 1e7 {
        return normal_cdf(x);
    }
    if x.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + x * x));
    if x >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// Student's t quantile at `p` with `df` degrees of freedom; infinite for df <= 0.
pub fn student_quantile(p: f64, df: f64) -> f64 {
    if df.is_nan() || df <= 0.0 {
        return if p >= 0.5 {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        };
    }
    invert(p, |x| student_cdf(x, df))
}

/// The x with cdf(x) = p, by bisection over [-1e6, 1e6] (a t with one degree of freedom
/// reaches 6.4e5 at 0.9999995).
fn invert(p: f64, cdf: impl Fn(f64) -> f64) -> f64 {
    if p.is_nan() || p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    let (mut lo, mut hi) = (-1e6, 1e6);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 * (1.0 + mid.abs()) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// ln Gamma(x) for x > 0 (Lanczos' series with g = 7, nine terms: 1e-15 relative).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Gamma(x) Gamma(1 - x) = pi / sin(pi x).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b), by its continued fraction (on the
/// side of x where it converges fast, the other by I_x(a, b) = 1 - I_(1-x)(b, a)).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    // The side is decided once: near the threshold the rounded 1 - x can lie above the
    // other side's threshold too, and two calls deciding each for the other would never end.
    if x > (a + 1.0) / (a + b + 2.0) {
        1.0 - beta_by_fraction(b, a, 1.0 - x)
    } else {
        beta_by_fraction(a, b, x)
    }
}

/// I_x(a, b) by its continued fraction, on whichever side it is asked.
fn beta_by_fraction(a: f64, b: f64, x: f64) -> f64 {
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp() / a;
    front * beta_fraction(a, b, x)
}

/// The continued fraction 1/(1 + d1/(1 + d2/(1 + ...))) of I_x(a, b), with
/// d(2m+1) = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1)) and d(2m) = m(b-m) x / ((a+2m-1)(a+2m)),
/// evaluated forward by Lentz's method.
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0));
    let mut f = d;
    for m in 1..10_000 {
        let m = m as f64;
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 / guard(1.0 + even * d);
        c = guard(1.0 + even / c);
        f *= c * d;
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 / guard(1.0 + odd * d);
        c = guard(1.0 + odd / c);
        let step = c * d;
        f *= step;
        if (step - 1.0).abs() < 1e-15 {
            break;
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn near(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn normal_quantiles_are_the_tables() {
        assert!(near(z(0.90), Z90, 1e-9), "{}", z(0.90));
        assert!(near(z(0.95), 1.959_964_0, 1e-7));
        assert!(near(z(0.50), 0.674_489_8, 1e-7));
        assert!(near(z(0.80), 1.281_551_6, 1e-7));
        assert!(near(normal_quantile(0.999), 3.090_232_3, 1e-6));
        assert!(near(normal_cdf(0.0), 0.5, 1e-15));
        assert!(near(normal_cdf(-1.959_964), 0.025, 1e-8));
        // The continued fraction's side of 3 sqrt(2).
        assert!(near(normal_cdf(5.0), 1.0 - 2.866_515_7e-7, 1e-13));
    }

    /// At the continued fraction's threshold (one ulp above it) the two sides used to call
    /// each other for ever (a review found df 11.1327..., x 0.81404...); and a level
    /// outside (0, 1) is no interval.
    #[test]
    fn the_incomplete_beta_ends_at_its_threshold_and_levels_are_checked() {
        let (a, b): (f64, f64) = (11.132708998321794 / 2.0, 0.5);
        let thr: f64 = (a + 1.0) / (a + b + 2.0);
        for x in [
            thr,
            f64::from_bits(thr.to_bits() + 1),
            f64::from_bits(thr.to_bits() + 2),
            0.8140423905053965,
        ] {
            let v = incomplete_beta(a, b, x);
            assert!(v.is_finite() && (0.0..=1.0).contains(&v), "{x}: {v}");
        }
        for level in [0.0, 1.0, -0.5, f64::NAN] {
            assert!(z(level).is_nan() && t(level, 5.0).is_nan(), "{level}");
        }
    }

    #[test]
    fn t_quantiles_are_the_tables() {
        // Two-sided 90% (one-sided 0.95) and 95%, from the printed tables.
        for (df, t90, t95) in [
            (1.0, 6.313_752, 12.706_205),
            (2.0, 2.919_986, 4.302_653),
            (3.0, 2.353_363, 3.182_446),
            (5.0, 2.015_048, 2.570_582),
            (10.0, 1.812_461, 2.228_139),
            (30.0, 1.697_261, 2.042_272),
        ] {
            assert!(near(t(0.90, df), t90, 1e-5), "df {df}: {}", t(0.90, df));
            assert!(near(t(0.95, df), t95, 1e-5), "df {df}: {}", t(0.95, df));
        }
        // df 1 is Cauchy's: tan(pi (p - 1/2)).
        assert!(near(
            student_quantile(0.75, 1.0),
            (std::f64::consts::PI / 4.0).tan(),
            1e-9
        ));
        // Fractional degrees of freedom lie between their neighbours.
        let (a, b, c) = (t(0.9, 2.0), t(0.9, 2.5), t(0.9, 3.0));
        assert!(a > b && b > c, "{a} {b} {c}");
        // Very many degrees of freedom: the normal's.
        assert!(near(t(0.9, 1e8), z(0.9), 1e-9));
        assert!(near(t(0.9, 1e5), z(0.9), 1e-4));
        assert_eq!(t(0.9, 0.0), f64::INFINITY);
    }
}
