//! The unit tests of `shared/pin`.

use anyhow::Result;
use shared::pin::*;

fn pin(name: &str) -> Pin {
    Pin {
        name: name.into(),
        version: "0.11.1".into(),
        sha256: "2b1e1abeac23d7df4f94e8a3852b3dbb661d332e37c3bef479507bac867187b2".into(),
        commit: "59f8e903ca80a32ea7f8514b39748fc979e69e82".into(),
        path_in_vcs: name.into(),
    }
}

#[test]
fn render_then_parse_round_trips() -> Result<()> {
    let pins = [pin("candle-transformers"), pin("candle-nn")];
    let lines = parse(&render(&pins))?;
    assert_eq!(lines, pins.clone().map(Line::Pinned));
    assert_eq!(
        label(&pins),
        "candle-transformers 0.11.1 and candle-nn 0.11.1"
    );
    Ok(())
}

#[test]
fn a_new_crate_is_one_line_with_its_version() -> Result<()> {
    let text = render(&[pin("candle-transformers")]) + "candle-core = { version = \"0.11.1\" }\n";
    let lines = parse(&text)?;
    assert_eq!(
        lines[1],
        Line::New {
            name: "candle-core".into(),
            version: "0.11.1".into()
        }
    );
    Ok(())
}

#[test]
fn parse_names_the_bad_line() {
    let text = render(&[pin("candle-transformers")]);
    let err = |text: &str| format!("{:#}", parse(text).unwrap_err());
    assert_eq!(
        err(&text.replace("version = ", "versoin = ")),
        "`candle-transformers`: unknown field `versoin`, expected one of `version`, `sha256`, \
         `commit`, `path_in_vcs`"
    );
    assert_eq!(
        err(&text.replace("sha256 = \"2b1e", "sha256 = \"zz1e")),
        "`candle-transformers`: `sha256` must be 64 hex digits, got \
         `zz1e1abeac23d7df4f94e8a3852b3dbb661d332e37c3bef479507bac867187b2`"
    );
    let twice = text.clone() + text.lines().last().unwrap();
    let line = text.lines().last().unwrap();
    assert_eq!(
        err(&twice),
        format!(
            "TOML parse error at line 6, column 1\n  |\n6 | {line}\n  | {}\nduplicate key\n",
            "^".repeat("candle-transformers".len())
        )
    );
}
