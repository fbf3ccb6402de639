//! What `format-patch` says it did: each patch with what became of it, rendered in one place.

/// What `format-patch` wrote back, patch by patch, and what to run next: `run` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WroteBack {
    /// Each patch of the new series, or of the old one that leaves it, in order.
    pub patches: Vec<PatchBecame>,
    pub next: &'static str,
}

/// One patch that `format-patch` wrote back or left: its number (for a resolution, its path),
/// its file name and what became of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchBecame {
    pub number: String,
    pub file_name: String,
    pub became: Became,
}

/// What became of one patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Became {
    Unchanged,
    /// Written from these commits (`Source::shown`), this many; `new` where it is a new patch.
    Written {
        from: String,
        commits: usize,
        new: bool,
    },
    /// Not on the branch, but its index lines or context moved with a change before it.
    Followed,
    Dropped,
}

impl std::fmt::Display for WroteBack {
    /// One line per patch that changed, then the unchanged ones on one line, then what to run.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut unchanged = Vec::new();
        for PatchBecame {
            number,
            file_name,
            became,
        } in &self.patches
        {
            let said = match became {
                Became::Unchanged => {
                    unchanged.push(number.as_str());
                    continue;
                }
                Became::Written { from, commits, new } => {
                    let new = if *new { " (new)" } else { "" };
                    let squashed = match commits {
                        1 => String::new(),
                        n => format!(" ({n} commits, squashed)"),
                    };
                    format!("{new} <- {from}{squashed}")
                }
                Became::Followed => ": its context and index lines follow the change before it; \
                                     its own change is the same"
                    .into(),
                Became::Dropped => ": dropped; its number is retired in patches/stack.toml".into(),
            };
            writeln!(f, "[format-patch] {file_name}{said}")?;
        }
        if !unchanged.is_empty() {
            writeln!(f, "[format-patch] unchanged: {}", unchanged.join(", "))?;
        }
        writeln!(f, "now run {}", self.next)
    }
}
