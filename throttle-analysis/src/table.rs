//! Text for people. Tables built once and shown three ways: as borderless columns
//! (comfy-table) laid out in the width they are given, in the HTML report as an HTML
//! table, and in a Markdown file (`analyze --export-markdown`) as a GitHub-flavoured
//! Markdown table. Numbers with the digits they need; text read from a file made safe to
//! print; paragraphs wrapped to [`LINE`].
//!
//! No terminal is asked for its width here (comfy-table is built without its terminal
//! feature): the analysis's text is laid out in [`LINE`] columns wherever it goes, and the
//! controller passes its terminal's width to [`Table::render_in`] for its own tables.

use comfy_table::{presets, ContentArrangement};

pub struct Table {
    inner: comfy_table::Table,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        let mut inner = comfy_table::Table::new();
        inner
            .load_preset(presets::NOTHING)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_header(header.iter().copied());
        Table {
            inner,
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.inner.add_row(cells.clone());
        self.rows.push(cells);
    }

    /// The table as HTML, every cell escaped.
    pub fn html(&self) -> String {
        let th: String = self
            .header
            .iter()
            .map(|h| format!("<th>{}</th>", escape_html(h)))
            .collect();
        let body: String = self
            .rows
            .iter()
            .map(|r| {
                let td: String = r
                    .iter()
                    .map(|c| format!("<td>{}</td>", escape_html(c)))
                    .collect();
                format!("<tr>{td}</tr>")
            })
            .collect();
        format!("<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>\n")
    }

    /// The table as GitHub-flavoured Markdown: a header row, a delimiter row (a column
    /// of numbers right-aligned, one of words left-aligned), one row per row, every cell
    /// escaped ([`escape_markdown`]).
    pub fn markdown(&self) -> String {
        let line = |cells: &[String]| {
            let cells: Vec<String> = cells.iter().map(|c| escape_markdown(c)).collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = line(&self.header);
        // A number may carry a bound's mark (`<10.0`) or be missing (`-`).
        let numeric = |c: &String| {
            c.trim_start_matches(['<', '>', '=', '+', '-', ' '])
                .starts_with(|x: char| x.is_ascii_digit())
        };
        let align: Vec<&str> = (0..self.header.len())
            .map(|i| {
                let col = self.rows.iter().filter_map(|r| r.get(i));
                let mut shown = col.filter(|c| c.as_str() != "-").peekable();
                if shown.peek().is_some() && shown.all(numeric) {
                    "---:"
                } else {
                    "---"
                }
            })
            .collect();
        out.push_str(&format!("|{}|\n", align.join("|")));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }

    /// The table in at most [`LINE`] columns (cells wrapped to fit), one line per row,
    /// without trailing blanks: how the analysis's text shows it, on a terminal or not.
    pub fn render(&self) -> String {
        self.render_in(Some(LINE as u16))
    }

    /// The table in at most `width` columns (cells wrapped to fit), or at its full width
    /// (`None`: a pipe or a file), one line per row, without trailing blanks.
    pub fn render_in(&self, width: Option<u16>) -> String {
        let mut inner = self.inner.clone();
        if let Some(w) = width {
            inner.set_width(w);
        }
        let mut out: String = inner
            .lines()
            .map(|l| l.trim_end().to_string())
            .collect::<Vec<_>>()
            .join("\n");
        out.push('\n');
        out
    }
}

/// Whether `c` must not reach a terminal, a page or a file as it is: a control character
/// (it can move the cursor, clear the screen, retitle the terminal) or a bidirectional
/// control (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C: it can show a label's
/// text in another order than it is, "Trojan Source").
pub fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// `text` with its control characters and bidirectional controls written out
/// (`\u{1b}`, `\u{202e}`), so that a label read from a file cannot move the cursor,
/// clear the screen, retitle the terminal or reorder what is shown ([`unsafe_char`]).
pub fn printable(text: &str) -> String {
    if !text.chars().any(unsafe_char) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if unsafe_char(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A number with the digits it needs: four decimals, or four significant digits in
/// scientific notation when very small or large (1/TEPS near 1e-7, TEPS near 1e6). The
/// strong-scaling fit's coefficients, which stay in the analysed unit, are written so.
pub fn number(v: f64) -> String {
    if v != 0.0 && (v.abs() < 1e-3 || v.abs() >= 1e5) {
        format!("{v:.4e}")
    } else {
        format!("{v:.4}")
    }
}

/// Text for HTML: `&`, `<`, `>` and quotes escaped.
pub fn escape_html(s: &str) -> String {
    let s = s
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    // Bidirectional controls written out, not obeyed (line breaks stay: `<pre>` text).
    if !s.chars().any(|c| unsafe_char(c) && !c.is_ascii()) {
        return s;
    }
    s.chars()
        .map(|c| {
            if unsafe_char(c) && !c.is_ascii() {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Text for one line of Markdown, a table's cell or a paragraph: line breaks and other
/// control characters become spaces; a backslash, `|`, `` ` ``, `*`, `_`, `[`, `]` and a `<` that
/// could open an HTML tag (`<x`, `</`, `<!`, `<?`) are backslash-escaped, so that a label
/// read from a store can neither end a cell nor become markup. `<20.0` stays as it is.
pub fn escape_markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' | '|' | '`' | '*' | '_' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '<' if chars
                .peek()
                .is_some_and(|n| n.is_ascii_alphabetic() || "/!?".contains(*n)) =>
            {
                out.push_str("\\<");
            }
            c if unsafe_char(c) => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_written_out() {
        assert_eq!(printable("mw n=3"), "mw n=3");
        assert_eq!(
            printable("a\u{1b}]0;pwned\u{7}b\nc"),
            "a\\u{1b}]0;pwned\\u{7}b\\u{a}c"
        );
    }

    /// Issue 43, finding 7: a bidirectional control in a label is written out wherever the
    /// label goes (terminal, Markdown, HTML, CSV), never obeyed.
    #[test]
    fn bidirectional_controls_are_written_out_everywhere() {
        let label = "mw\u{202e}gnp.exe\u{2066}x";
        for shown in [
            crate::table::printable(label),
            escape_markdown(label),
            escape_html(label),
        ] {
            assert!(
                !shown.contains('\u{202e}') && !shown.contains('\u{2066}'),
                "{shown:?}"
            );
        }
        assert_eq!(escape_html(label), "mw\\u{202e}gnp.exe\\u{2066}x");
        assert_eq!(escape_html("a\nb"), "a\nb");
    }

    #[test]
    fn columns_line_up() {
        let mut t = Table::new(&["a", "bbb"]);
        t.row(vec!["xxxx".into(), "y".into()]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0].find("bbb"), lines[1].find('y'), "{text}");
        assert_eq!(
            t.html(),
            "<table><thead><tr><th>a</th><th>bbb</th></tr></thead><tbody><tr><td>xxxx</td><td>y</td></tr></tbody></table>\n"
        );
        assert_eq!(t.markdown(), "| a | bbb |\n|---|---|\n| xxxx | y |\n");
        let mut t = Table::new(&["procs", "demand"]);
        t.row(vec!["2".into(), "<10.0".into()]);
        t.row(vec!["4 (held out)".into(), "-".into()]);
        assert!(t.markdown().contains("|---:|---:|"), "{}", t.markdown());
        let mut t = Table::new(&["<x>"]);
        t.row(vec!["a & \"b\"".into()]);
        assert_eq!(
            t.html(),
            "<table><thead><tr><th>&lt;x&gt;</th></tr></thead><tbody><tr><td>a &amp; &quot;b&quot;</td></tr></tbody></table>\n"
        );
    }

    #[test]
    fn a_markdown_cell_cannot_end_its_cell_or_become_markup() {
        assert_eq!(escape_markdown("<20.0 (noise)"), "<20.0 (noise)");
        assert_eq!(
            escape_markdown("a|b\nc <script> [x](y) *e* `c`"),
            "a\\|b c \\<script> \\[x\\](y) \\*e\\* \\`c\\`"
        );
        let mut t = Table::new(&["series"]);
        t.row(vec!["mw | n=3".into()]);
        assert_eq!(t.markdown().lines().nth(2), Some("| mw \\| n=3 |"));
    }
}

/// The widest line the default text output prints: a long sentence is wrapped to it.
pub const LINE: usize = 156;

/// `text` wrapped at word boundaries to lines of at most [`LINE`] characters (a word
/// longer than that stands alone), every line after the first indented by `indent`.
pub fn wrap(text: &str, indent: &str) -> String {
    let body = text.trim_start_matches(' ');
    let mut out = String::new();
    let mut line = text[..text.len() - body.len()].to_string();
    let mut fresh = true;
    for word in body.split(' ') {
        let width = line.chars().count();
        if !fresh && width + 1 + word.chars().count() > LINE {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.to_string();
        } else if !fresh {
            line.push(' ');
        }
        line.push_str(word);
        fresh = false;
    }
    out.push_str(line.trim_end());
    out
}

#[cfg(test)]
mod wrap_tests {
    use super::*;

    #[test]
    fn a_long_sentence_wraps_at_words_and_keeps_every_word() {
        let text = (0..80)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let wrapped = wrap(&format!("  {text}"), "    ");
        assert!(wrapped.lines().count() > 1, "{wrapped}");
        assert!(
            wrapped.lines().all(|l| l.chars().count() <= LINE),
            "{wrapped}"
        );
        assert!(wrapped.lines().skip(1).all(|l| l.starts_with("    w")));
        let words: Vec<&str> = wrapped.split_whitespace().collect();
        assert_eq!(words.join(" "), text);
        assert_eq!(wrap("short", "  "), "short");
        assert!(wrapped.starts_with("  w0 w1"), "{wrapped}");
    }
}
