//! Plain-text tables for the terminal.

/// Rows under a header, columns padded to their widest cell.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    let mut out = line(&header) + &line(&rule);
    for row in rows {
        out += &line(row);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec!["a".to_string(), "long cell".to_string()],
            vec!["bbb".to_string(), "x".to_string()],
        ];
        assert_eq!(
            super::render(&["case", "out"], &rows),
            "case  out\n----  ---------\na     long cell\nbbb   x\n"
        );
    }
}
