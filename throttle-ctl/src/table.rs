//! Plain-text tables for terminal output: columns padded to their widest cell.

pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let n = self.header.len();
        let mut width = vec![0; n];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(n) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(&self.rows) {
            let line: Vec<String> = r
                .iter()
                .enumerate()
                .take(n)
                .map(|(i, c)| format!("{c:<w$}", w = width[i]))
                .collect();
            out.push_str(line.join("  ").trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pads_columns() {
        let mut t = super::Table::new(&["a", "bbb"]);
        t.row(vec!["xxxx".into(), "y".into()]);
        assert_eq!(t.render(), "a     bbb\nxxxx  y\n");
    }
}
