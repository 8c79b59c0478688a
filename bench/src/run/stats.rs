//! The statistics every figure goes through: A and B run interleaved (A B, B A, ...), the ratio
//! is taken pair by pair, and a set of values is told as its median with the quartiles. A ratio
//! whose quartiles straddle 1.0 is "within noise".

use serde::Serialize;

/// A set of values, told as median and quartiles.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize, PartialEq)]
pub struct Summary {
    /// The median.
    pub median: f64,
    /// The first quartile.
    pub q1: f64,
    /// The third quartile.
    pub q3: f64,
    /// How many values.
    pub n: usize,
}

/// The `p` quantile (0 to 1) of sorted values, interpolated between neighbours.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    let pos = p * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

impl Summary {
    /// Median and quartiles of `values` (None when there are none).
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Summary {
            median: quantile(&v, 0.5),
            q1: quantile(&v, 0.25),
            q3: quantile(&v, 0.75),
            n: v.len(),
        })
    }

    /// Whether the quartiles hold `x` (for a ratio: 1.0, "within noise").
    pub fn straddles(&self, x: f64) -> bool {
        self.q1 <= x && x <= self.q3
    }
}

/// The order of the sides in pair `i`: forward in even pairs, backward in odd ones, so that a
/// drift of the machine during a pair hits every side alike over two pairs.
pub fn order(i: usize, sides: usize) -> Vec<usize> {
    let mut o: Vec<usize> = (0..sides).collect();
    if i % 2 == 1 {
        o.reverse();
    }
    o
}

/// Values of side B over side A, pair by pair (pairs where A is 0 are left out).
pub fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .filter(|(a, _)| **a != 0.0)
        .map(|(a, b)| b / a)
        .collect()
}

/// B minus A, pair by pair.
pub fn differences(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(a, b)| b - a).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_quartiles() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.median, s.q1, s.q3, s.n), (3.0, 2.0, 4.0, 5));
        let s = Summary::of(&[1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.q1, s.q3), (1.5, 1.25, 1.75));
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[f64::NAN]), None);
    }

    #[test]
    fn noise_and_pairs() {
        let r = Summary::of(&ratios(&[10.0, 10.0, 10.0, 10.0], &[9.0, 10.5, 11.0, 9.5])).unwrap();
        assert!(r.straddles(1.0));
        let r = Summary::of(&ratios(&[10.0, 10.0, 10.0], &[12.0, 13.0, 12.5])).unwrap();
        assert!(!r.straddles(1.0));
        assert_eq!(order(0, 3), vec![0, 1, 2]);
        assert_eq!(order(1, 3), vec![2, 1, 0]);
        assert_eq!(differences(&[1.0, 2.0], &[1.5, 1.0]), vec![0.5, -1.0]);
        assert_eq!(ratios(&[0.0, 2.0], &[1.0, 3.0]), vec![1.5]);
    }
}
