//! What the tools read from `Cargo.toml` files, in one place: a package's name, its features and
//! dependencies, and a workspace's members. Line by line, for the manifests candle and this
//! workspace write.

/// `name = "..."` of the `[package]` table.
pub fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package {
            if let Some(value) = line.strip_prefix("name").map(str::trim_start) {
                if let Some(value) = value.strip_prefix('=') {
                    return Some(value.trim().trim_matches('"').to_string());
                }
            }
        }
    }
    None
}

/// Whether the manifest depends on `package`, by name or renamed.
pub fn depends_on(manifest: &str, package: &str) -> bool {
    manifest.lines().map(str::trim).any(|line| {
        line.starts_with(&format!("{package} "))
            || line.starts_with(&format!("{package}="))
            || line.starts_with(&format!("{package}."))
            || line.contains(&format!("package = \"{package}\""))
    })
}

/// Whether the manifest's `[features]` table has `feature`.
pub fn has_feature(manifest: &str, feature: &str) -> bool {
    let mut in_features = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_features = line == "[features]";
        } else if in_features
            && (line.starts_with(&format!("{feature} ="))
                || line.starts_with(&format!("{feature}=")))
        {
            return true;
        }
    }
    false
}

/// The folders of the root manifest's `members = [...]` list.
pub fn members(manifest: &str) -> Vec<String> {
    let Some(start) = manifest.find("members = [") else {
        return Vec::new();
    };
    let list = &manifest[start + "members = [".len()..];
    let list = &list[..list.find(']').unwrap_or(list.len())];
    list.split(',')
        .map(|item| item.trim().trim_matches('"').to_string())
        .filter(|item| !item.is_empty() && !item.starts_with('#'))
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
    fn the_metal_feature_is_found_in_the_features_table_only() {
        assert!(has_metal(
            "[features]\ncuda = []\nmetal = [\"candle/metal\"]\n"
        ));
        assert!(!has_metal("[dependencies]\nmetal = \"1\"\n"));
        assert!(!has_metal("[features]\nmetal-debug = []\n"));
    }
}
