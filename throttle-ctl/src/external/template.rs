//! What a user writes for an external command: the command template with its
//! placeholders (a likely typo refused), and the regex that captures its completion time
//! or rate.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use throttle_proto::Pct;

/// The placeholders a command template may use.
pub const PLACEHOLDERS: &[&str] = &["nodes", "procs", "ranks_per_node", "hostfile", "bw"];

/// The placeholder of a sweep's problem size (`[problem]` in the spec): replaced by
/// [`with_problem`] before the template is checked, so a command run without a problem
/// axis that names it is refused.
pub const PROBLEM: &str = "n";

/// `text` with every `{n}` replaced by `n`; `None` when it has none (a problem axis
/// its command does not take would measure one program many times).
pub fn with_problem(text: &str, n: u64) -> Option<String> {
    let found = placeholders(text);
    if !found.iter().any(|(_, name)| *name == PROBLEM) {
        return None;
    }
    let mut out = String::new();
    let mut last = 0;
    for (range, name) in found {
        if name == PROBLEM {
            out.push_str(&text[last..range.start]);
            out.push_str(&n.to_string());
            last = range.end;
        }
    }
    out.push_str(&text[last..]);
    Some(out)
}

/// A checked command template. A placeholder is `{name}` with `name` one of
/// [`PLACEHOLDERS`]; any other `{word}` of lowercase letters and `_` is refused as a likely
/// typo; everything else with braces (awk programs, `${VAR}`, `{a,b}`) is the shell's.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandTemplate(String);

/// The placeholders of `text`: (byte range of `{name}`, name).
fn placeholders(text: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'{' && (i == 0 || b[i - 1] != b'$') {
            let word_end = b[i + 1..]
                .iter()
                .position(|c| !(c.is_ascii_lowercase() || *c == b'_'))
                .map(|k| i + 1 + k);
            if let Some(e) = word_end {
                if e > i + 1 && b[e] == b'}' {
                    out.push((i..e + 1, &text[i + 1..e]));
                    i = e + 1;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

impl CommandTemplate {
    pub fn parse(text: &str) -> Result<CommandTemplate> {
        if text.trim().is_empty() {
            bail!("the command is empty");
        }
        for (_, name) in placeholders(text) {
            if name == PROBLEM {
                bail!("`{{n}}` is a sweep's problem size: it needs a [problem] section in the spec, whose values it takes run by run (`throttle-ctl sweep --help`)");
            }
            if !PLACEHOLDERS.contains(&name) {
                bail!(
                    "unknown placeholder `{{{name}}}` in the command: use {}",
                    PLACEHOLDERS
                        .iter()
                        .map(|p| format!("{{{p}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        Ok(CommandTemplate(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The command line for one run.
    pub fn render(&self, nodes: usize, ranks_per_node: usize, hostfile: &Path, bw: Pct) -> String {
        let value = |name: &str| match name {
            "nodes" => nodes.to_string(),
            "procs" => (nodes * ranks_per_node).to_string(),
            "ranks_per_node" => ranks_per_node.to_string(),
            "hostfile" => hostfile.display().to_string(),
            _ => match bw.percent() {
                Some(p) => format!("{p}"),
                None => "unlimited".to_string(),
            },
        };
        let mut out = String::new();
        let mut last = 0;
        for (range, name) in placeholders(&self.0) {
            out.push_str(&self.0[last..range.start]);
            out.push_str(&value(name));
            last = range.end;
        }
        out.push_str(&self.0[last..]);
        out
    }
}

/// A regex with one capture group: the completion time in seconds (`--time-regex`), or a
/// rate the program reports, such as Graph500's `harmonic_mean_TEPS` (`--rate-regex`),
/// whose inverse is stored as the time: CTI = T(bw)/T(100%) - 1 = R(100%)/R(bw) - 1.
#[derive(Clone, Debug)]
pub struct TimeRegex {
    re: regex::Regex,
    rate: bool,
}

impl PartialEq for TimeRegex {
    fn eq(&self, other: &TimeRegex) -> bool {
        self.as_str() == other.as_str() && self.rate == other.rate
    }
}

impl TimeRegex {
    /// A regex whose group captures seconds.
    pub fn parse(text: &str) -> Result<TimeRegex> {
        Self::new(text, false)
    }

    /// A regex whose group captures a rate (work per second, larger is faster).
    pub fn parse_rate(text: &str) -> Result<TimeRegex> {
        Self::new(text, true)
    }

    fn new(text: &str, rate: bool) -> Result<TimeRegex> {
        let flag = if rate { "--rate-regex" } else { "--time-regex" };
        let re = regex::Regex::new(text)
            .map_err(|e| anyhow!("{flag} `{text}` is not a regular expression: {e}"))?;
        if re.captures_len() != 2 {
            bail!("{flag} `{text}` must have exactly one capture group, around the number: e.g. 'time: ([0-9.]+) s'");
        }
        Ok(TimeRegex { re, rate })
    }

    pub(super) fn flag(&self) -> &'static str {
        if self.rate {
            "--rate-regex"
        } else {
            "--time-regex"
        }
    }

    pub fn as_str(&self) -> &str {
        self.re.as_str()
    }

    pub fn is_rate(&self) -> bool {
        self.rate
    }

    /// The number captured from `line`, when it matches: seconds, or a rate.
    pub(super) fn seconds(&self, line: &str) -> Option<Result<f64, String>> {
        let c = self.re.captures(line)?;
        let text = c.get(1).map(|m| m.as_str()).unwrap_or("");
        let flag = self.flag();
        Some(match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 && !self.rate => Ok(v),
            Ok(v) if v.is_finite() && v > 0.0 && self.rate => Ok(v),
            _ if self.rate => Err(format!(
                "{flag} captured `{text}`, which is not a positive rate"
            )),
            _ => Err(format!(
                "{flag} captured `{text}`, which is not a number of seconds"
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_problem_size_is_put_in_before_the_check() {
        let run = "mpirun -np {procs} ./halo --cells {n} ${n} {nn}";
        assert_eq!(
            with_problem(run, 4096).unwrap(),
            "mpirun -np {procs} ./halo --cells 4096 ${n} {nn}"
        );
        assert_eq!(with_problem("./a {procs}", 1), None);
        let e = CommandTemplate::parse("./a {n}").unwrap_err().to_string();
        assert!(e.contains("[problem]"), "{e}");
    }

    #[test]
    fn templates_know_their_placeholders() {
        let t =
            CommandTemplate::parse("mpirun -np {procs} --hostfile {hostfile} ./a {bw}").unwrap();
        let line = t.render(4, 2, Path::new("/tmp/h"), Pct::parse("30").unwrap());
        assert_eq!(line, "mpirun -np 8 --hostfile /tmp/h ./a 30");
        let line = t.render(1, 1, Path::new("/tmp/h"), Pct::parse("unlimited").unwrap());
        assert!(line.ends_with("./a unlimited"));
        let e = CommandTemplate::parse("run {nodez}")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown placeholder `{nodez}`") && e.contains("{hostfile}"),
            "{e}"
        );
        assert!(CommandTemplate::parse("  ").is_err());
        // The shell's braces stay the shell's.
        let t = CommandTemplate::parse("awk '{ print $1 }' ${HOME} {a,b} {procs}").unwrap();
        let line = t.render(2, 1, Path::new("/h"), Pct::parse("10").unwrap());
        assert_eq!(line, "awk '{ print $1 }' ${HOME} {a,b} 2");
    }

    #[test]
    fn the_time_regex_needs_one_group_and_a_number() {
        assert!(TimeRegex::parse("took [0-9.]+ s").is_err());
        assert!(TimeRegex::parse("(a)(b)").is_err());
        assert!(TimeRegex::parse("(").is_err());
        let re = TimeRegex::parse(r"time: ([0-9.e+-]+) s").unwrap();
        assert_eq!(re.seconds("time: 1.5 s"), Some(Ok(1.5)));
        assert_eq!(re.seconds("nothing"), None);
        assert!(matches!(re.seconds("time: - s"), Some(Err(_))));
        let rate = TimeRegex::parse_rate(r"harmonic_mean_TEPS: +([0-9.e+]+)").unwrap();
        assert_eq!(rate.seconds("harmonic_mean_TEPS:   2.5e8"), Some(Ok(2.5e8)));
        assert!(matches!(
            rate.seconds("harmonic_mean_TEPS: 0"),
            Some(Err(_))
        ));
        assert!(TimeRegex::parse_rate("(")
            .unwrap_err()
            .to_string()
            .contains("--rate-regex"));
    }
}
