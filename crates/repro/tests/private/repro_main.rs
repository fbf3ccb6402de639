#[test]
fn columns_line_up() {
    let rows = vec![
        vec!["a".to_string(), "long cell".to_string()],
        vec!["bbb".to_string(), "x".to_string()],
    ];
    assert_eq!(
        super::render_table(&["case", "out"], &rows),
        "case  out\n----  ---------\na     long cell\nbbb   x\n"
    );
}
