//! Model search over one quantity measured at a few (size, problem) pairs: the
//! two-parameter counterpart of [`normal_form`], in the spirit of Extra-P's
//! multi-parameter models ("Fast multi-parameter performance modeling", Calotoiu et
//! al., IEEE Cluster 2016: products and sums of single-parameter terms).
//!
//! A candidate combines one term of p, f(p) = p^i log2(p)^j (or of p - 1, the peers), with
//! one term of n, g(n) = n^i log2(n)^j, where n is the problem's size:
//!
//! * a product, c1 f(p) g(n), or c0 + c1 f(p) g(n) (either term may be 1: one parameter);
//! * a sum, c0 + c1 f(p) + c2 g(n);
//! * a power law in both, a p^b n^c, its exponents fitted.
//!
//! Each is fitted by weighted least squares and chosen as one parameter's forms are:
//! AICc with each term's shape cost ([`normal_form::SHAPE_COST`] per unit of |i| + j of
//! both terms), the forms within [`normal_form::WINDOW`] of the best averaged in log
//! space with their Akaike weights, and only forms that stay positive over the whole
//! box from the smallest measured (p, n) to the farthest target, and that do not turn
//! (rise and fall) along either parameter beyond its largest measured value, are
//! candidates.

use serde::Serialize;

use crate::method::normal_form::{self, Form, REL_FLOOR, SHAPE_COST, WINDOW};

/// One measured value at (p, n), with its standard error from the runs' noise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample2 {
    pub p: f64,
    pub n: f64,
    pub value: f64,
    pub se: f64,
}

impl Sample2 {
    /// The standard deviation a fit weighs this value by, as in one parameter.
    fn sigma(&self) -> f64 {
        self.se.hypot(REL_FLOOR * self.value.abs())
    }
}

/// How a candidate's two terms are joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Join {
    /// c1 f(p) g(n), with c0 added when `constant`.
    Product,
    /// c0 + c1 f(p) + c2 g(n).
    Sum,
    /// a p^b n^c, a, b and c fitted.
    Power,
}

/// A candidate with its coefficients, fitted on some (p, n).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Surface {
    /// The term of p and of n (a `Term` without its constant; the constant term is 1).
    pub p_term: Form,
    pub n_term: Form,
    pub join: Join,
    pub constant: bool,
    /// c0, c1 (product), c0, c1, c2 (sum), a, b, c (power).
    pub coef: Vec<f64>,
    /// Its criterion on the fitted values, AICc with the shapes' cost.
    pub aicc: Option<f64>,
    /// Its Akaike weight among the averaged forms.
    pub weight: Option<f64>,
}

/// The value 1 as a term (either parameter left out).
const ONE: Form = normal_form::CONSTANT;

impl Surface {
    fn coefficients(&self) -> usize {
        match self.join {
            Join::Product => 1 + self.constant as usize,
            Join::Sum | Join::Power => 3,
        }
    }

    fn shape(&self) -> f64 {
        self.p_term.shape() + self.n_term.shape()
    }

    fn basis(&self, p: f64, n: f64) -> Vec<f64> {
        let (f, g) = (self.p_term.term(p), self.n_term.term(n));
        match self.join {
            Join::Product if self.constant => vec![1.0, f * g],
            Join::Product => vec![f * g],
            Join::Sum => vec![1.0, f, g],
            Join::Power => vec![1.0, p.ln(), n.ln()],
        }
    }

    /// The model's value at (p, n).
    pub fn at(&self, p: f64, n: f64) -> f64 {
        let c = &self.coef;
        match self.join {
            Join::Product => c[0] + c[1] * self.p_term.term(p) * self.n_term.term(n),
            Join::Sum => c[0] + c[1] * self.p_term.term(p) + c[2] * self.n_term.term(n),
            Join::Power => c[0] * p.powf(c[1]) * n.powf(c[2]),
        }
    }

    /// The model in words, `fmt` writing its coefficients (`0.35 + 1.2 p^(1/2) n^1`).
    pub fn text(&self, fmt: impl Fn(f64) -> String) -> String {
        let term = |form: Form, x: &str| match form {
            Form::Term {
                num,
                den,
                log,
                peers,
                ..
            } => normal_form::term_text(String::new(), x, peers, num, den, log)
                .trim()
                .to_string(),
            _ => String::new(),
        };
        let (f, g) = (term(self.p_term, "p"), term(self.n_term, "n"));
        let c = &self.coef;
        let joined = |a: &str, b: &str| {
            [a, b]
                .iter()
                .filter(|t| !t.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" ")
        };
        match self.join {
            Join::Product => {
                let t = format!("{} {}", fmt(c[1]), joined(&f, &g))
                    .trim()
                    .to_string();
                if self.constant {
                    format!("{} + {t}", fmt(c[0]))
                } else {
                    t
                }
            }
            Join::Sum => format!("{} + {} {f} + {} {g}", fmt(c[0]), fmt(c[1]), fmt(c[2])),
            Join::Power => format!("{} p^{:.2} n^{:.2}", fmt(c[0]), c[1], c[2]),
        }
    }

    fn chi2(&self, pts: &[Sample2]) -> f64 {
        pts.iter()
            .map(|s| ((s.value - self.at(s.p, s.n)) / s.sigma()).powi(2))
            .sum()
    }

    /// Positive over the box `lo`..`hi` (checked on a 17 x 17 grid, even in log p and
    /// log n), and not turning along either parameter beyond `data`, its largest
    /// measured value.
    fn admissible(&self, lo: (f64, f64), data: (f64, f64), hi: (f64, f64)) -> bool {
        const K: usize = 16;
        let axis = |a: f64, b: f64| -> Vec<f64> {
            let (a, b) = (a.ln(), b.max(a).ln());
            (0..=K)
                .map(|k| (a + (b - a) * k as f64 / K as f64).exp())
                .collect()
        };
        let (ps, ns) = (axis(lo.0, hi.0), axis(lo.1, hi.1));
        let grid: Vec<Vec<f64>> = ps
            .iter()
            .map(|&p| ns.iter().map(|&n| self.at(p, n)).collect())
            .collect();
        if grid.iter().flatten().any(|v| !(v.is_finite() && *v > 0.0)) {
            return false;
        }
        let turns = |line: &[f64], xs: &[f64], from: f64| {
            let (mut rose, mut fell) = (false, false);
            for k in 1..line.len() {
                if xs[k] > from * (1.0 + 1e-9) {
                    let (l, v) = (line[k - 1], line[k]);
                    rose |= v - l > 1e-6 * l.abs();
                    fell |= l - v > 1e-6 * l.abs();
                }
            }
            rose && fell
        };
        let along_p = (0..=K).any(|j| {
            let line: Vec<f64> = grid.iter().map(|row| row[j]).collect();
            turns(&line, &ps, data.0)
        });
        let along_n = grid.iter().any(|row| turns(row, &ns, data.1));
        !along_p && !along_n
    }
}

/// Weighted least-squares fit of a candidate to `pts`; `None` when they cannot determine
/// it.
fn fit(mut s: Surface, pts: &[Sample2]) -> Option<Surface> {
    if pts.iter().any(|x| x.sigma().is_nan() || x.sigma() <= 0.0) {
        return None;
    }
    let rows: Vec<(Vec<f64>, f64, f64)> = if s.join == Join::Power {
        if pts
            .iter()
            .any(|x| x.p <= 0.0 || x.n <= 0.0 || x.value <= 0.0)
        {
            return None;
        }
        pts.iter()
            .map(|x| {
                (
                    s.basis(x.p, x.n),
                    x.value.ln(),
                    (x.value / x.sigma()).powi(2),
                )
            })
            .collect()
    } else {
        pts.iter()
            .map(|x| (s.basis(x.p, x.n), x.value, x.sigma().powi(-2)))
            .collect()
    };
    if rows.iter().any(|r| r.0.iter().any(|v| !v.is_finite())) {
        return None;
    }
    let c = normal_form::wls(&rows)?;
    s.coef = match s.join {
        Join::Product if !s.constant => vec![0.0, c[0]],
        Join::Power => vec![c[0].exp(), c[1], c[2]],
        _ => c,
    };
    s.coef.iter().all(|c| c.is_finite()).then_some(s)
}

/// The single-parameter terms the candidates combine: every term of the normal form
/// (without its constant), the peers' only for p.
fn terms(peers: bool) -> Vec<Form> {
    Form::all()
        .into_iter()
        .filter(|f| match f {
            Form::Term {
                constant, peers: q, ..
            } => !constant && (peers || !q),
            _ => false,
        })
        .collect()
}

/// Every candidate, its coefficients not yet fitted.
fn candidates() -> Vec<Surface> {
    let blank = |p_term, n_term, join, constant| Surface {
        p_term,
        n_term,
        join,
        constant,
        coef: Vec::new(),
        aicc: None,
        weight: None,
    };
    let mut out = vec![blank(ONE, ONE, Join::Power, true)];
    for f in terms(true) {
        for g in terms(false) {
            out.push(blank(f, g, Join::Product, false));
            if f != ONE || g != ONE {
                out.push(blank(f, g, Join::Product, true));
            }
            if f != ONE && g != ONE {
                out.push(blank(f, g, Join::Sum, true));
            }
        }
    }
    out
}

/// What the search found for one quantity.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FoundSurface {
    /// The form with the most weight.
    pub best: Surface,
    /// The forms averaged, best first, each with its Akaike weight.
    pub close: Vec<Surface>,
    /// How many forms could be judged.
    pub judged: usize,
}

impl FoundSurface {
    /// The averaged models' value at (p, n), their weighted mean in log space; `None`
    /// where the best one has no positive finite value there.
    pub fn at(&self, p: f64, n: f64) -> Option<f64> {
        let best = self.best.at(p, n);
        if !(best.is_finite() && best > 0.0) {
            return None;
        }
        let (mut num, mut den) = (0.0, 0.0);
        for m in &self.close {
            let (v, w) = (m.at(p, n), m.weight.unwrap_or(0.0));
            if v.is_finite() && v > 0.0 && w > 0.0 {
                num += w * v.ln();
                den += w;
            }
        }
        (den > 0.0).then(|| (num / den).exp())
    }

    /// How far the averaged models disagree at (p, n): the weighted standard deviation of
    /// their ln values about the average.
    pub fn log_spread(&self, p: f64, n: f64) -> Option<f64> {
        let centre = self.at(p, n)?.ln();
        let (mut ss, mut den) = (0.0, 0.0);
        for m in &self.close {
            let (v, w) = (m.at(p, n), m.weight.unwrap_or(0.0));
            if v.is_finite() && v > 0.0 && w > 0.0 {
                ss += w * (v.ln() - centre).powi(2);
                den += w;
            }
        }
        (den > 0.0).then(|| (ss / den).sqrt())
    }
}

/// `pts` with each value's standard error widened by the scatter the simplest smooth
/// description of them leaves: the power law in both, a p^b n^c, fitted on five or more
/// values; its root mean square relative residual, where it exceeds [`REL_FLOOR`], is
/// added (in quadrature) as a relative floor to every value. Values that scatter from
/// cell to cell beyond their own runs' noise (a master's k moves by 20% between
/// neighbouring cells as its sends interleave or not) are not believed more closely than
/// that scatter: otherwise the search rewards whichever steep form threads them, and its
/// extrapolation is the noise's (fitted on 2-4 nodes and 0.5-2 MB, the master/worker's k
/// came out as 0.69 - c p^(-1/2) log2(p)^2 n log2(n)^2 and its demand 18 points low at
/// (5, 4 MB)). Data a power law describes, exactly or to its noise, are left as they are.
fn scatter_floored(pts: &[Sample2]) -> Vec<Sample2> {
    let power = Surface {
        p_term: ONE,
        n_term: ONE,
        join: Join::Power,
        constant: true,
        coef: Vec::new(),
        aicc: None,
        weight: None,
    };
    let floor = (pts.len() >= 5)
        .then(|| fit(power, pts))
        .flatten()
        .map(|m| {
            let rel: Vec<f64> = pts
                .iter()
                .map(|s| (s.value - m.at(s.p, s.n)) / s.value)
                .collect();
            crate::method::stats::rms(&rel)
        })
        .filter(|r| r.is_finite() && *r > REL_FLOOR);
    pts.iter()
        .map(|s| Sample2 {
            se: floor.map_or(s.se, |r| s.se.hypot(r * s.value.abs())),
            ..*s
        })
        .collect()
}

/// Search the candidates for the model of `pts` (one value per (p, n)), keeping those
/// positive from the smallest measured (p, n) to `reach` (the farthest target). `None`
/// with fewer than three values, values that are no positive finite numbers, or no
/// admissible candidate.
pub fn search(pts: &[Sample2], reach: (f64, f64)) -> Option<FoundSurface> {
    search_with(pts, reach, false)
}

/// [`search`], with `scatter` the values' errors first widened by the scatter the power
/// law in both leaves ([`scatter_floored`]): for a quantity expected to be smooth whose
/// measured values scatter beyond their noise.
pub fn search_with(pts: &[Sample2], reach: (f64, f64), scatter: bool) -> Option<FoundSurface> {
    let m = pts.len();
    if m < 3
        || pts
            .iter()
            .any(|s| !(s.p >= 1.0 && s.n > 0.0 && s.value.is_finite()))
    {
        return None;
    }
    let floored = if scatter {
        scatter_floored(pts)
    } else {
        pts.to_vec()
    };
    let pts = &floored[..];
    let min = |f: fn(&Sample2) -> f64| pts.iter().map(f).fold(f64::INFINITY, f64::min);
    let max = |f: fn(&Sample2) -> f64| pts.iter().map(f).fold(0.0, f64::max);
    let lo = (min(|s| s.p), min(|s| s.n));
    let data = (max(|s| s.p), max(|s| s.n));
    let hi = (reach.0.max(data.0), reach.1.max(data.1));
    let mut judged: Vec<(f64, Surface)> = candidates()
        .into_iter()
        .filter(|c| m >= c.coefficients() + 2)
        .filter_map(|c| {
            let s = fit(c, pts)?;
            let score =
                normal_form::aicc(s.chi2(pts), s.coefficients(), m) + SHAPE_COST * s.shape();
            score.is_finite().then_some((score, s))
        })
        .collect();
    judged.sort_by(|a, b| {
        a.0.total_cmp(&b.0).then(
            (a.1.coefficients(), a.1.shape().to_bits())
                .cmp(&(b.1.coefficients(), b.1.shape().to_bits())),
        )
    });
    let count = judged.len();
    let mut close: Vec<Surface> = Vec::new();
    for (score, mut s) in judged {
        if let Some(b) = close.first().and_then(|b| b.aicc) {
            if score - b > WINDOW || close.len() == normal_form::MAX_CLOSE {
                break;
            }
        }
        if s.admissible(lo, data, hi) {
            s.aicc = Some(score);
            close.push(s);
        }
    }
    let best = close.first()?.aicc?;
    let weight = |s: &Surface| (-(s.aicc.unwrap_or(best) - best) / 2.0).exp();
    let total: f64 = close.iter().map(weight).sum();
    for s in &mut close {
        s.weight = Some(weight(s) / total);
    }
    Some(FoundSurface {
        best: close[0].clone(),
        close,
        judged: count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(ps: &[f64], ns: &[f64], f: impl Fn(f64, f64) -> f64) -> Vec<Sample2> {
        let mut out = Vec::new();
        for &p in ps {
            for &n in ns {
                out.push(Sample2 {
                    p,
                    n,
                    value: f(p, n),
                    se: 0.0,
                });
            }
        }
        out
    }

    #[test]
    fn a_product_of_two_terms_is_found_and_extrapolated_in_both() {
        // Bytes per node of an exchange whose volume grows with the problem and falls
        // with the square root of the processes: 3 n / sqrt(p).
        let f = |p: f64, n: f64| 3.0 * n / p.sqrt();
        let data = grid(&[2.0, 4.0, 8.0], &[1e3, 2e3, 4e3], f);
        let found = search(&data, (32.0, 16e3)).unwrap();
        let at = found.at(32.0, 16e3).unwrap();
        assert!((at / f(32.0, 16e3) - 1.0).abs() < 1e-6, "{at} {found:?}");
        assert_eq!(found.best.join, Join::Product);
        assert_eq!(found.best.text(|c| format!("{c:.1}")), "3.0 p^(-1/2) n^1");
    }

    #[test]
    fn a_sum_and_a_single_parameter_are_found() {
        // A time of compute that grows with n per process plus a latency term in p.
        let f = |p: f64, n: f64| 0.5 + 2e-3 * n + 0.1 * p;
        let data = grid(&[2.0, 4.0, 8.0], &[1e3, 2e3, 4e3], f);
        let found = search(&data, (16.0, 8e3)).unwrap();
        let at = found.at(16.0, 8e3).unwrap();
        assert!((at / f(16.0, 8e3) - 1.0).abs() < 1e-3, "{at} {found:?}");
        // A weight that does not depend on the problem at all.
        let g = |p: f64, _n: f64| 0.6 + 0.2 * p.log2();
        let data = grid(&[2.0, 4.0, 8.0], &[1e3, 2e3], g);
        let found = search(&data, (32.0, 8e3)).unwrap();
        assert!((found.at(32.0, 8e3).unwrap() / g(32.0, 0.0) - 1.0).abs() < 1e-6);
        assert_eq!(found.best.n_term, ONE, "{found:?}");
    }

    /// The master/worker's k as measured on 2-4 nodes and 0.5-2 MB (experiments/
    /// 2026-11-28-problem-axis.md): 0.67 in most cells, 0.49-0.54 in three, each with a
    /// standard error of 0.1-1%. Weighed by those errors alone the search threads the
    /// three with a steep form that collapses one step beyond them (k was 0.44 measured
    /// at 5 nodes and 4 MB); weighed by their scatter, it does not.
    #[test]
    fn values_that_scatter_beyond_their_noise_are_not_threaded() {
        let k = [
            (2.0, 0.5e6, 0.667, 0.0007),
            (3.0, 0.5e6, 0.662, 0.0064),
            (4.0, 0.5e6, 0.666, 0.0015),
            (2.0, 1e6, 0.667, 0.0009),
            (3.0, 1e6, 0.544, 0.0021),
            (4.0, 1e6, 0.664, 0.0018),
            (2.0, 2e6, 0.669, 0.0020),
            (3.0, 2e6, 0.543, 0.0020),
            (4.0, 2e6, 0.493, 0.0023),
        ];
        let pts: Vec<Sample2> = k
            .iter()
            .map(|&(p, n, value, se)| Sample2 { p, n, value, se })
            .collect();
        let threaded = search_with(&pts, (8.0, 4e6), false).unwrap();
        let floored = search_with(&pts, (8.0, 4e6), true).unwrap();
        let (t, f) = (
            threaded.at(5.0, 4e6).unwrap(),
            floored.at(5.0, 4e6).unwrap(),
        );
        assert!(t < 0.3, "{t} {threaded:?}");
        assert!((0.35..0.8).contains(&f), "{f} {floored:?}");
        // Exact data a power law describes keep their weights.
        let exact = grid(&[2.0, 4.0, 8.0], &[1e3, 2e3, 4e3], |p, n| {
            3.0 * n / p.sqrt()
        });
        assert_eq!(scatter_floored(&exact), exact);
    }

    #[test]
    fn nothing_is_claimed_from_too_little_or_from_nonsense() {
        let data = grid(&[2.0], &[1.0, 2.0], |_, n| n);
        assert!(search(&data, (4.0, 4.0)).is_none());
        let mut bad = grid(&[2.0, 4.0], &[1.0, 2.0], |p, n| p * n);
        bad[0].value = f64::NAN;
        assert!(search(&bad, (4.0, 4.0)).is_none());
        // A form that turns negative before the target is no candidate: 10 - p n falls
        // to zero at p n = 10, so what is kept stays positive.
        let data = grid(&[1.0, 2.0], &[1.0, 1.5, 2.0], |p, n| 10.0 - p * n);
        if let Some(found) = search(&data, (8.0, 4.0)) {
            assert!(found.best.at(8.0, 4.0) > 0.0, "{found:?}");
        }
    }
}
