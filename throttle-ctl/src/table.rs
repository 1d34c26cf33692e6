//! Tables built once and shown two ways: on a terminal as borderless columns (comfy-table)
//! that wrap to its width when there is one and keep their full width when piped, and in
//! the HTML report as an HTML table.

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

    /// The table, one line per row, without trailing blanks.
    pub fn render(&self) -> String {
        let mut out: String = self
            .inner
            .lines()
            .map(|l| l.trim_end().to_string())
            .collect::<Vec<_>>()
            .join("\n");
        out.push('\n');
        out
    }
}

/// Text for HTML: `&`, `<`, `>` and quotes escaped.
pub fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut t = Table::new(&["<x>"]);
        t.row(vec!["a & \"b\"".into()]);
        assert_eq!(
            t.html(),
            "<table><thead><tr><th>&lt;x&gt;</th></tr></thead><tbody><tr><td>a &amp; &quot;b&quot;</td></tr></tbody></table>\n"
        );
    }
}
