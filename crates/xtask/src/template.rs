//! The documents the tool writes, from the templates of `crates/xtask/templates/`: the words
//! live there, and the code that fills them works out only what goes in the slots.

use std::sync::LazyLock;

use anyhow::Result;
use minijinja::{Environment, Value};

/// A template's text after the macros of `measure.md`, which the report and each pull request's
/// evidence share: this build of minijinja has no `import`.
macro_rules! with_measure {
    ($path:literal) => {
        concat!(include_str!("../templates/measure.md"), include_str!($path))
    };
}

/// Every template, by name.
const TEMPLATES: [(&str, &str); 6] = [
    ("body", include_str!("../templates/body.md")),
    ("bench", with_measure!("../templates/bench.md")),
    ("marker", include_str!("../templates/marker.md")),
    ("real_model", include_str!("../templates/real_model.md")),
    ("report", with_measure!("../templates/report.md")),
    ("summary", include_str!("../templates/summary.txt")),
];

/// The templates, parsed once for the whole run. They are built in and the tests render every
/// one, so a template that does not parse is a bug in it, not something a run can meet.
static ENVIRONMENT: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    for (name, source) in TEMPLATES {
        if let Err(err) = env.add_template(name, source) {
            panic!("templates/{name} does not parse: {err:#}");
        }
    }
    env
});

/// Renders the template `name` with `context`, its paragraphs one blank line apart: a template
/// leaves blank lines where an optional paragraph is left out.
pub(crate) fn render(name: &str, context: Value) -> Result<String> {
    let text = ENVIRONMENT.get_template(name)?.render(context)?;
    let paragraphs = text.split("\n\n").map(|p| p.trim_matches('\n'));
    let paragraphs: Vec<&str> = paragraphs.filter(|p| !p.is_empty()).collect();
    Ok(paragraphs.join("\n\n").trim_end().to_string())
}

/// The text of the macro `name` of the template `template` called with `args`, line for line
/// as the macro writes it. As with a template that does not parse, an error here is a bug in a
/// template, since the tests call every macro.
pub(crate) fn call(template: &str, name: &str, args: &[Value]) -> String {
    let called = || -> Result<String> {
        let captured = ENVIRONMENT.get_template(template)?.render_captured(())?;
        Ok(captured.state().call_macro(name, args)?)
    };
    called().unwrap_or_else(|err| panic!("the macro {name} of templates/{template}: {err:#}"))
}

/// The sentence that the macro `name` of the template `template` writes with `args`, without
/// its line's end.
pub(crate) fn sentence(template: &str, name: &str, args: &[Value]) -> String {
    call(template, name, args).trim_end().to_string()
}
