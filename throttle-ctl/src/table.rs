//! Terminal tables: borderless columns (comfy-table) that wrap to the terminal's width when
//! there is one, and keep their full width when piped.

use comfy_table::{presets, ContentArrangement};

pub struct Table {
    inner: comfy_table::Table,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        let mut inner = comfy_table::Table::new();
        inner
            .load_preset(presets::NOTHING)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_header(header.iter().copied());
        Table { inner }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.inner.add_row(cells);
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
    }
}
