//! The upstream pin: which published crate `patches/` applies to (`patches/upstream.toml`).

use std::path::Path;

use anyhow::{bail, Context, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// The crate's name on crates.io.
    pub name: String,
    pub version: String,
    /// The sha256 of the `.crate` file.
    pub sha256: String,
    /// The upstream commit it was published from, from its `.cargo_vcs_info.json`.
    pub commit: String,
    /// The crate's folder in the upstream repository, likewise.
    pub path_in_vcs: String,
}

const KEYS: [&str; 5] = ["crate", "version", "sha256", "commit", "path_in_vcs"];

impl Pin {
    pub fn read(path: &Path) -> Result<Pin> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the upstream pin {}", path.display()))?;
        Pin::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    /// Reads the `key = "value"` lines that `render` writes.
    pub fn parse(text: &str) -> Result<Pin> {
        let mut values: [Option<String>; 5] = Default::default();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                bail!(
                    "line {}: expected `key = \"value\"`, got `{line}`",
                    number + 1
                );
            };
            let (key, value) = (key.trim(), value.trim());
            let Some(index) = KEYS.iter().position(|k| *k == key) else {
                bail!("line {}: unknown key `{key}`", number + 1);
            };
            let Some(value) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
                bail!(
                    "line {}: the value of `{key}` must be a quoted string",
                    number + 1
                );
            };
            if value.contains(['"', '\\']) {
                bail!(
                    "line {}: the value of `{key}` has a quote or backslash",
                    number + 1
                );
            }
            if values[index].replace(value.to_string()).is_some() {
                bail!("line {}: `{key}` given twice", number + 1);
            }
        }
        let [name, version, sha256, commit, path_in_vcs] = values;
        let missing = |key: &str| anyhow::anyhow!("`{key}` is missing");
        let pin = Pin {
            name: name.ok_or_else(|| missing("crate"))?,
            version: version.ok_or_else(|| missing("version"))?,
            sha256: sha256.ok_or_else(|| missing("sha256"))?,
            commit: commit.ok_or_else(|| missing("commit"))?,
            path_in_vcs: path_in_vcs.ok_or_else(|| missing("path_in_vcs"))?,
        };
        if pin.sha256.len() != 64 || !pin.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("`sha256` must be 64 hex digits, got `{}`", pin.sha256);
        }
        Ok(pin)
    }

    pub fn render(&self) -> String {
        format!(
            "# The published crate that the patches in this folder apply to. Written by\n\
             # `cargo xtask vendor`; commit and path_in_vcs come from the crate's\n\
             # .cargo_vcs_info.json.\n\
             crate = \"{}\"\nversion = \"{}\"\nsha256 = \"{}\"\ncommit = \"{}\"\npath_in_vcs = \"{}\"\n",
            self.name, self.version, self.sha256, self.commit, self.path_in_vcs
        )
    }

    /// "candle-transformers 0.11.1", for messages.
    pub fn label(&self) -> String {
        format!("{} {}", self.name, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin() -> Pin {
        Pin {
            name: "candle-transformers".into(),
            version: "0.11.1".into(),
            sha256: "2b1e1abeac23d7df4f94e8a3852b3dbb661d332e37c3bef479507bac867187b2".into(),
            commit: "59f8e903ca80a32ea7f8514b39748fc979e69e82".into(),
            path_in_vcs: "candle-transformers".into(),
        }
    }

    #[test]
    fn render_then_parse_round_trips() -> Result<()> {
        assert_eq!(Pin::parse(&pin().render())?, pin());
        Ok(())
    }

    #[test]
    fn parse_names_the_bad_line() {
        let text = pin().render().replace("version = ", "versoin = ");
        let err = Pin::parse(&text).unwrap_err().to_string();
        assert_eq!(err, "line 5: unknown key `versoin`");
        let text = pin().render().replace("sha256 = \"2b1e", "sha256 = \"zz1e");
        let err = Pin::parse(&text).unwrap_err().to_string();
        assert!(err.starts_with("`sha256` must be 64 hex digits"), "{err}");
        let text = pin().render().replace("commit = ", "# commit = ");
        assert_eq!(
            Pin::parse(&text).unwrap_err().to_string(),
            "`commit` is missing"
        );
    }
}
