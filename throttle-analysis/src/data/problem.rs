//! The problem axis of a series: what its values are called and how the models take
//! them. A sweep with a `[problem]` stores each run's value as the spec gives it (a BFS
//! scale, a matrix order, a master/worker's bytes, a command's `{n}`); the models fit the
//! problem's size, which is the value itself except where the value is a logarithm of it
//! (a BFS of scale s searches 2^s vertices: its bytes grow with 2^s, not with s).

use serde::Serialize;

/// A series' problem axis.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProblemAxis {
    /// The value's name, as the workload's option (`scale`, `size`, `volume`, `n`).
    pub name: String,
    /// The value is log2 of the problem's size (a BFS scale).
    pub log2: bool,
}

impl ProblemAxis {
    /// An axis called `name`, its values the problem's size.
    pub fn linear(name: &str) -> ProblemAxis {
        ProblemAxis {
            name: name.into(),
            log2: false,
        }
    }

    /// The problem's size of the value `value`.
    pub fn size(&self, value: f64) -> f64 {
        if self.log2 {
            value.exp2()
        } else {
            value
        }
    }

    /// The value of the problem's size `size`.
    pub fn value(&self, size: f64) -> f64 {
        if self.log2 {
            size.log2()
        } else {
            size
        }
    }

    /// What the models take, in words, when it is not the value itself.
    pub fn size_words(&self) -> Option<String> {
        self.log2
            .then(|| format!("the models take 2^{}, the problem's size", self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_is_the_log_of_its_size() {
        let scale = ProblemAxis {
            name: "scale".into(),
            log2: true,
        };
        assert_eq!(scale.size(14.0), 16384.0);
        assert_eq!(scale.value(16384.0), 14.0);
        let volume = ProblemAxis::linear("volume");
        assert_eq!(volume.size(3e6), 3e6);
    }
}
