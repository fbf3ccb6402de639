//! Plain-text tables for the terminal.

/// Rows under a header, columns padded to their widest cell.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let mut widths = vec![0; header.len()];
    for row in std::iter::once(&header).chain(rows) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    [&header, &rule]
        .into_iter()
        .chain(rows)
        .map(|cells| {
            let padded: Vec<String> = (cells.iter().zip(&widths))
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            padded.join("  ").trim_end().to_string() + "\n"
        })
        .collect()
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
