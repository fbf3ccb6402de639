//! The documents the tool writes, from the templates of `crates/xtask/templates/`: the words
//! live there, and the code that fills them works out only what goes in the slots.

use anyhow::Result;

/// Every template, by name.
const TEMPLATES: [(&str, &str); 4] = [
    ("body", include_str!("../templates/body.md")),
    ("bench", include_str!("../templates/bench.md")),
    ("real_model", include_str!("../templates/real_model.md")),
    ("report", include_str!("../templates/report.md")),
];

/// Renders the template `name` with `context`, its paragraphs one blank line apart: a template
/// leaves blank lines where an optional paragraph is left out.
pub(crate) fn render(name: &str, context: minijinja::Value) -> Result<String> {
    let mut env = minijinja::Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    for (name, source) in TEMPLATES {
        env.add_template(name, source)?;
    }
    let text = env.get_template(name)?.render(context)?;
    let mut out = String::new();
    for paragraph in text.split("\n\n").map(|p| p.trim_matches('\n')) {
        if !paragraph.is_empty() {
            out += &(paragraph.to_string() + "\n\n");
        }
    }
    Ok(out.trim_end().to_string())
}
