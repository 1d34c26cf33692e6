//! The terms the analysis prints, and where each is defined: docs/method.md's glossary,
//! one anchor per term. The text output ends with the terms it used and where they are
//! defined, so that a reader meets "PAV" or "order-statistic interval" with a pointer to
//! its meaning; a test checks every anchor exists.

/// The glossary's file, relative to the repository.
pub const FILE: &str = "docs/method.md";

/// (term as printed, its anchor in [`FILE`]).
pub const TERMS: [(&str, &str); 29] = [
    ("CTI", "cti"),
    ("demand", "demand"),
    ("CTI level", "cti-level"),
    ("noise floor", "noise-floor"),
    ("PAV", "pav"),
    ("crossover", "crossover"),
    ("order-statistic interval", "order-statistic-interval"),
    ("covers", "covers"),
    ("CV", "cv"),
    ("DC", "dc"),
    ("p*", "p-star"),
    ("V", "v"),
    ("k", "k"),
    ("traffic model", "traffic-model"),
    ("T(100%)", "t100"),
    ("backtest", "backtest"),
    ("leave-one-size-out", "leave-one-size-out"),
    ("held out", "held-out"),
    ("censored", "censored"),
    ("flagged", "flagged"),
    ("saturation", "saturation"),
    ("projection", "projection"),
    ("TRUSTED", "trusted"),
    ("NOT TRUSTED", "not-trusted"),
    ("model error", "model-error"),
    ("lack of fit", "lack-of-fit"),
    ("reading", "reading"),
    ("CPU-bound", "cpu-bound"),
    ("fidelity", "fidelity"),
];

/// Whether `term` appears in `text` as a word of its own (not inside a longer word:
/// `V` in `CV`, `k` in `link`).
fn uses(text: &str, term: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut from = 0;
    while let Some(i) = text[from..].find(term) {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + term.len()..].chars().next();
        if !word(before) && !word(after) {
            return true;
        }
        from = at + term.len();
    }
    false
}

/// The line that ends the text output: the glossary's terms `text` uses, and where they
/// are defined; `None` when it uses none.
pub fn footer(text: &str) -> Option<String> {
    let used: Vec<String> = TERMS
        .iter()
        // One-letter terms (V, k) are too easily something else in free text: named
        // where they appear as the traffic model's parts (`V =`, `k =`).
        .filter(|(t, _)| {
            if t.len() == 1 {
                text.contains(&format!("{t} =")) || text.contains(&format!("{t}="))
            } else {
                uses(text, t)
            }
        })
        .map(|(t, a)| format!("{t} (#{a})"))
        .collect();
    (!used.is_empty()).then(|| format!("terms used above, defined in {FILE}: {}", used.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_term_counts_only_as_a_word_of_its_own() {
        assert!(uses("the CV of the runs", "CV"));
        assert!(!uses("CVS", "CV"));
        assert!(uses("a PAV fit", "PAV"));
        assert!(!uses("DCX", "DC"));
        let f = footer("demand at CTI 10%: PAV; V = 3 MB").unwrap();
        assert!(
            f.contains("demand (#demand)") && f.contains("PAV (#pav)") && f.contains("V (#v)"),
            "{f}"
        );
        assert!(!f.contains("k (#k)"), "{f}");
        assert_eq!(footer("nothing here"), None);
    }

    #[test]
    fn every_term_has_its_anchor_in_the_glossary() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/method.md"))
                .unwrap();
        for (term, anchor) in TERMS {
            let tag = format!("id=\"{anchor}\"");
            assert_eq!(
                doc.matches(&tag).count(),
                1,
                "{term}: `{tag}` once in docs/method.md"
            );
        }
    }
}
