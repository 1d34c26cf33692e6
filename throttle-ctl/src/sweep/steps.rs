//! A sweep's bandwidth steps, as the spec's `bandwidths` (and the demo's `--bandwidths`)
//! give them: settings in [`Pct`]'s one grammar (`100`, `"30%"`, `"off"`, `"unlimited"`)
//! and ranges `"START:STOP:STEP"` (`"40:20:-5"`), expanded exactly (in thousandths of a
//! percent), duplicates dropped, in the order given.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use throttle_proto::pct::STEPS_PER_PCT;
use throttle_proto::Pct;

/// Most steps one range may expand to.
const MAX_RANGE_STEPS: usize = 1000;

/// The bandwidth steps of a sweep: at least one, no two the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Steps(Vec<Pct>);

/// One entry of `bandwidths`, as the file wrote it.
#[derive(Deserialize)]
#[serde(untagged)]
enum Entry {
    Number(f64),
    Text(String),
}

impl Steps {
    /// Steps from entries: a number or a setting's text, or a range.
    fn from_entries(entries: impl IntoIterator<Item = Entry>) -> Result<Steps, String> {
        let mut out: Vec<Pct> = Vec::new();
        for entry in entries {
            let expanded = match entry {
                Entry::Number(n) => vec![Pct::new(n).map_err(|e| e.to_string())?],
                Entry::Text(t) if t.contains(':') => range(&t)?,
                Entry::Text(t) => vec![Pct::parse(&t).map_err(|e| e.to_string())?],
            };
            out.extend(expanded);
        }
        Steps::of(out)
    }

    /// Steps from settings already checked, duplicates dropped.
    fn of(steps: Vec<Pct>) -> Result<Steps, String> {
        let mut out: Vec<Pct> = Vec::with_capacity(steps.len());
        for p in steps {
            if !out.contains(&p) {
                out.push(p);
            }
        }
        if out.is_empty() {
            return Err(
                "the sweep has no bandwidth steps: give `bandwidths = [100, 50, 25]`".into(),
            );
        }
        Ok(Steps(out))
    }

    /// Steps from a comma-separated list (`100,50,40:20:-5,off`), as a flag gives them.
    pub fn parse_list(text: &str) -> Result<Steps, String> {
        Steps::from_entries(text.split(',').map(|t| Entry::Text(t.trim().to_string())))
    }

    pub fn as_slice(&self) -> &[Pct] {
        &self.0
    }

    /// Whether the 100% baseline is among them.
    pub fn has_full(&self) -> bool {
        self.0.contains(&Pct::FULL)
    }
}

/// `START:STOP:STEP`, both ends settings, the step non-zero and leading from one to the
/// other; exact in thousandths of a percent.
fn range(text: &str) -> Result<Vec<Pct>, String> {
    let usage = || format!("bandwidth range `{text}` must be START:STOP:STEP, e.g. 40:20:-5");
    let parts: Vec<&str> = text.split(':').map(str::trim).collect();
    let [a, b, step] = parts[..] else {
        return Err(usage());
    };
    let end = |t: &str, what: &str| {
        Pct::parse(t)
            .ok()
            .and_then(Pct::thousandths)
            .ok_or_else(|| format!("bandwidth range `{text}`: its {what} `{t}` is not a percentage from 0.01 to 100"))
    };
    let (a, b) = (end(a, "start")?, end(b, "stop")?);
    let step: f64 = step.parse().map_err(|_| usage())?;
    let step_t = (step * f64::from(STEPS_PER_PCT)).round();
    if !step_t.is_finite() || step_t == 0.0 || (f64::from(b) - f64::from(a)) * step_t < 0.0 {
        return Err(format!(
            "bandwidth range `{text}`: the step {step} does not lead from its start to its stop"
        ));
    }
    let n = ((f64::from(b) - f64::from(a)) / step_t).floor();
    if n >= MAX_RANGE_STEPS as f64 {
        return Err(format!(
            "bandwidth range `{text}` has more than {MAX_RANGE_STEPS} steps"
        ));
    }
    (0..=n as i64)
        .map(|k| {
            let t = i64::from(a) + k * step_t as i64;
            Pct::from_thousandths(t as u32).map_err(|e| e.to_string())
        })
        .collect()
}

impl fmt::Display for Steps {
    /// `100%, 50%, unlimited`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let texts: Vec<String> = self.0.iter().map(Pct::to_string).collect();
        f.write_str(&texts.join(", "))
    }
}

impl<'de> Deserialize<'de> for Steps {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Steps, D::Error> {
        let entries = Vec::<Entry>::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "`bandwidths` is a list of percentages (`100`, `\"30%\"`), `\"unlimited\"` (`\"off\"`) and ranges `\"START:STOP:STEP\"`",
            )
        })?;
        Steps::from_entries(entries).map_err(serde::de::Error::custom)
    }
}

/// Written back as settings (numbers, `"unlimited"`): what was read, ranges expanded.
impl Serialize for Steps {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(toml_list: &str) -> Result<Steps, String> {
        #[derive(Deserialize)]
        struct Spec {
            #[allow(dead_code)]
            bandwidths: Steps,
        }
        toml::from_str::<Spec>(&format!("bandwidths = {toml_list}"))
            .map(|s| s.bandwidths)
            .map_err(|e| e.to_string())
    }

    fn texts(s: &Steps) -> Vec<String> {
        s.as_slice().iter().map(Pct::to_string).collect()
    }

    #[test]
    fn one_grammar_for_every_setting() {
        let a = read(r#"["30%", "off", 100, "Unlimited", 30.0, "40:20:-10"]"#).unwrap();
        assert_eq!(texts(&a), ["30%", "unlimited", "100%", "40%", "20%"]);
        // As the demo's flag gives them: the same meaning.
        let b = Steps::parse_list("30,unlimited,100%,40:20:-10").unwrap();
        assert_eq!(a, b);
        assert!(a.has_full());
        // Ranges are exact: no 0.30000000000000004 steps, no step lost at the stop.
        let r = read(r#"["1:0.1:-0.3"]"#).unwrap();
        assert_eq!(texts(&r), ["1%", "0.7%", "0.4%", "0.1%"]);
        // Written back, it reads as the same steps.
        let back = toml::to_string(&toml::Table::from_iter([(
            "bandwidths".to_string(),
            toml::Value::try_from(&a).unwrap(),
        )]))
        .unwrap();
        assert_eq!(
            read(back.trim().trim_start_matches("bandwidths = ")).unwrap(),
            a
        );
    }

    #[test]
    fn ranges_expand_inclusively_and_duplicates_go() {
        let s = Steps::parse_list("100,40:20:-5,30").unwrap();
        assert_eq!(texts(&s), ["100%", "40%", "35%", "30%", "25%", "20%"]);
        assert_eq!(Steps::parse_list("40:20:-2").unwrap().as_slice().len(), 11);
        assert_eq!(
            Steps::parse_list("unlimited").unwrap().as_slice(),
            [Pct::UNLIMITED]
        );
        for bad in ["40:20:2", "0:10:1", "40:20", "x", "101", "40:20:0"] {
            assert!(Steps::parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_steps_are_refused_with_what_to_write() {
        for (bad, says) in [
            (r#"[]"#, "no bandwidth steps"),
            (r#"[0]"#, "0.01 to 100"),
            (r#"["half"]"#, "0.01 to 100"),
            (r#"["40:20"]"#, "START:STOP:STEP"),
            (r#"["40:20:5"]"#, "does not lead"),
            (r#"["40:20:0"]"#, "does not lead"),
            (r#"["40:20:-0.0001"]"#, "does not lead"),
            (r#"["100:0.01:-0.001"]"#, "more than 1000"),
            (r#"["40:0:-5"]"#, "0.01 to 100"),
            (r#"[true]"#, "a list of percentages"),
            (r#""100""#, "a list of percentages"),
        ] {
            let e = read(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
