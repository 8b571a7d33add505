//! Output: aligned text tables for people, JSON for machines.

use std::fmt::Write as _;

/// A text table with a header row and right-aligned numeric columns.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Table {
        Table {
            rows: vec![header.iter().map(|s| s.to_string()).collect()],
        }
    }

    /// Adds one row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, columns padded to their widest cell.
    pub fn render(&self) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut width = vec![0; cols];
        for row in &self.rows {
            for (i, c) in row.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for (r, row) in self.rows.iter().enumerate() {
            for (i, c) in row.iter().enumerate() {
                let pad = width[i] - c.chars().count();
                if i == 0 {
                    let _ = write!(out, "{c}{}", " ".repeat(pad));
                } else {
                    let _ = write!(out, "  {}{c}", " ".repeat(pad));
                }
            }
            out.push('\n');
            if r == 0 {
                let total: usize = width.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
                out.push_str(&"-".repeat(total));
                out.push('\n');
            }
        }
        out
    }
}

/// A number with sensible precision for a table cell.
pub fn num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Prints `value` as pretty JSON on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned() {
        let mut t = Table::new(&["what", "n"]);
        t.row(vec!["accepted".into(), "12".into()]);
        t.row(vec!["sent".into(), "3".into()]);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "what       n");
        assert_eq!(lines[2], "accepted  12");
        assert_eq!(lines[3], "sent       3");
    }

    #[test]
    fn numbers() {
        assert_eq!(num(1234.56), "1235");
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(1.2345), "1.23");
        assert_eq!(num(0.0), "0");
    }
}
