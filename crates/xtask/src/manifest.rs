//! What the tools read from `Cargo.toml` files; a manifest that is not TOML reads as empty.

use toml_edit::{DocumentMut, Item};

fn parse(manifest: &str) -> DocumentMut {
    manifest.parse().unwrap_or_default()
}

pub(crate) fn package_name(manifest: &str) -> Option<String> {
    parse(manifest)
        .get("package")?
        .get("name")?
        .as_str()
        .map(str::to_string)
}

/// Whether the manifest depends on `package`, by name or renamed, in any (target's) dependencies.
pub(crate) fn depends_on(manifest: &str, package: &str) -> bool {
    let document = parse(manifest);
    let tables = ["dependencies", "dev-dependencies", "build-dependencies"];
    let names = |table: &Item| {
        table.as_table_like().is_some_and(|deps| {
            deps.iter().any(|(key, value)| {
                key == package || value.get("package").and_then(Item::as_str) == Some(package)
            })
        })
    };
    let in_scope = |scope: &Item| tables.iter().any(|t| scope.get(t).is_some_and(names));
    in_scope(document.as_item())
        || document
            .get("target")
            .and_then(Item::as_table_like)
            .is_some_and(|targets| targets.iter().any(|(_, target)| in_scope(target)))
}

pub(crate) fn has_feature(manifest: &str, feature: &str) -> bool {
    parse(manifest)
        .get("features")
        .is_some_and(|f| f.get(feature).is_some())
}

/// The folders of the root manifest's `[workspace] members` list.
pub(crate) fn members(manifest: &str) -> Vec<String> {
    parse(manifest)
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(Item::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    fn has_metal(manifest: &str) -> bool {
        super::has_feature(manifest, "metal")
    }

    #[test]
    fn members_are_read_from_the_list_not_from_exclude() {
        let manifest = "[workspace]\nmembers = [\n    \"crates/a\",\n    \"benches\",\n]\nexclude = [\"crates/v\"]\n";
        assert_eq!(super::members(manifest), ["crates/a", "benches"]);
    }

    #[test]
    fn dependencies_are_found_by_name_renamed_and_per_target() {
        let depends = |manifest: &str| super::depends_on(manifest, "candle-nn");
        assert!(depends("[dependencies]\ncandle-nn.workspace = true\n"));
        assert!(depends(
            "[dev-dependencies]\nnn = { package = \"candle-nn\", path = \"x\" }\n"
        ));
        assert!(depends(
            "[target.'cfg(unix)'.dependencies]\ncandle-nn = \"1\"\n"
        ));
        assert!(!depends(
            "[dependencies]\ncandle-nn-extra = \"1\"\n[features]\ncandle-nn = []\n"
        ));
        assert_eq!(
            super::package_name("[package]\nname = \"candle-nn\"\n").as_deref(),
            Some("candle-nn")
        );
    }

    #[test]
    fn the_metal_feature_is_found_in_the_features_table_only() {
        assert!(has_metal(
            "[features]\ncuda = []\nmetal = [\"candle/metal\"]\n"
        ));
        assert!(!has_metal("[dependencies]\nmetal = \"1\"\n"));
        assert!(!has_metal("[features]\nmetal-debug = []\n"));
    }
}
