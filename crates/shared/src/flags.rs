//! Command-line flags: `--name value`, `--name=value` and `--switch`.

use anyhow::{bail, Result};

pub struct Flags {
    args: Vec<String>,
}

impl Flags {
    pub fn new(args: Vec<String>) -> Flags {
        Flags { args }
    }

    /// Whether `--name` was given; removes it.
    pub fn switch(&mut self, name: &str) -> bool {
        let before = self.args.len();
        self.args.retain(|a| a != name);
        self.args.len() != before
    }

    /// The value of `--name value` or `--name=value`; removes it.
    pub fn value(&mut self, name: &str) -> Result<Option<String>> {
        let prefix = format!("{name}=");
        if let Some(at) = self.args.iter().position(|a| a.starts_with(&prefix)) {
            return Ok(Some(self.args.remove(at)[prefix.len()..].to_string()));
        }
        let Some(at) = self.args.iter().position(|a| a == name) else {
            return Ok(None);
        };
        if at + 1 >= self.args.len() || self.args[at + 1].starts_with("--") {
            bail!("{name} needs a value");
        }
        self.args.remove(at);
        Ok(Some(self.args.remove(at)))
    }

    /// Fails on anything not taken.
    pub fn finish(self) -> Result<()> {
        match self.args.first() {
            Some(arg) => bail!("unexpected argument `{arg}` (see --help)"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_values_and_switches_and_rejects_the_rest() -> Result<()> {
        let args = ["--candle", "../candle", "--verify", "--base=dev", "--x"];
        let mut flags = Flags::new(args.map(String::from).to_vec());
        assert_eq!(flags.value("--candle")?.as_deref(), Some("../candle"));
        assert_eq!(flags.value("--base")?.as_deref(), Some("dev"));
        assert!(flags.switch("--verify"));
        assert!(!flags.switch("--verify"));
        assert_eq!(flags.value("--branch")?, None);
        let err = flags.finish().unwrap_err().to_string();
        assert_eq!(err, "unexpected argument `--x` (see --help)");
        let mut flags = Flags::new(vec!["--candle".into()]);
        assert_eq!(
            flags.value("--candle").unwrap_err().to_string(),
            "--candle needs a value"
        );
        Ok(())
    }
}
