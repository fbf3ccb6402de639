//! The chat template stored in the GGUF, rendered as Hugging Face's `apply_chat_template`
//! renders it (Jinja with `trim_blocks` and `lstrip_blocks`).

use anyhow::Result;
use minijinja::{context, Environment};

/// The text for one user turn followed by the assistant's prompt.
pub fn render(template: &str, user: &str) -> Result<String> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.add_template("chat", template)?;
    let text = env.get_template("chat")?.render(context! {
        messages => vec![context! { role => "user", content => user }],
        add_generation_prompt => true,
    })?;
    Ok(text)
}
