//! A change that does not go on a tree, as data with both sides, said in one place (`Display`).

/// Why a change does not go on a tree, with what both sides have there. `Display` says it, and
/// for a patch how to redo it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Conflict {
    /// Hunk `number` of `patch` (`header`) expected the lines `expected` of `file` from line
    /// `from`, where the file has `found`; they differ first at `expected[differs]`.
    Hunk {
        patch: String,
        file: String,
        number: usize,
        header: String,
        from: usize,
        differs: usize,
        expected: Vec<String>,
        found: Vec<String>,
    },
    /// `patch` does not apply, as libgit2 says `why`.
    Apply { patch: String, why: String },
    /// The change, `patch`'s if it is one, merged three ways: each file with its conflict.
    Merge {
        patch: Option<String>,
        files: Vec<(String, FileConflict)>,
    },
}

/// What a file merged three ways conflicts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileConflict {
    /// The first conflicting lines of each side: the tree's, then the change's.
    Lines {
        ours: Vec<String>,
        theirs: Vec<String>,
    },
    /// The change adds, edits or deletes the whole file, which the tree has otherwise.
    Whole(&'static str),
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conflict::Hunk {
                patch,
                file,
                number,
                header,
                from,
                differs,
                expected,
                found,
            } => {
                // The first line that differs, marked `>` on both sides.
                let show = |lines: &[String]| -> String {
                    let mark = |i| if i == *differs { '>' } else { '|' };
                    let lines = lines.iter().enumerate();
                    lines
                        .map(|(i, l)| format!("\n    {} {l}", mark(i)))
                        .collect()
                };
                let (first, expected, found) = (from + differs, show(expected), show(found));
                write!(
                    f,
                    "{patch} does not apply: {file}: hunk {number} ({header}) differs first at \
                     line {first} (>); it expected, from line {from}:{expected}\nbut the file \
                     has:{found}"
                )?;
            }
            Conflict::Apply { patch, why } => write!(f, "{patch} does not apply: {why}")?,
            Conflict::Merge { patch, files } => {
                if let Some(patch) = patch {
                    write!(f, "{patch} conflicts with the tree it goes on, ")?;
                }
                let paths: Vec<&str> = files.iter().map(|(path, _)| path.as_str()).collect();
                write!(f, "in {}:", paths.join(", "))?;
                for (path, conflict) in files {
                    write!(f, "\n{path}:\n{conflict}")?;
                }
                if patch.is_none() {
                    return Ok(());
                }
            }
        }
        write!(f, "\n{REDO}")
    }
}

impl std::fmt::Display for FileConflict {
    /// Git's markers, and up to `SHOWN` lines of each side with the number of lines left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN: usize = 8;
        let (ours, theirs) = match self {
            FileConflict::Whole(why) => return write!(f, "{why}"),
            FileConflict::Lines { ours, theirs } => (ours, theirs),
        };
        let side = |lines: &[String]| -> Vec<String> {
            let mut shown: Vec<String> = lines
                .iter()
                .take(SHOWN)
                .map(|l| format!("    | {l}"))
                .collect();
            if lines.len() > SHOWN {
                shown.push(format!("    | ... ({} more lines)", lines.len() - SHOWN));
            }
            shown
        };
        let lines = [
            vec![format!("    | <<<<<<< {OURS}")],
            side(ours),
            vec!["    | =======".to_string()],
            side(theirs),
            vec![format!("    | >>>>>>> {THEIRS}")],
        ];
        write!(f, "{}", lines.concat().join("\n"))
    }
}

/// How a three-way merge labels each side.
pub(super) const OURS: &str = "what it goes on";
pub(super) const THEIRS: &str = "the change";

/// How to redo a patch that no longer applies, said with the failure.
pub const REDO: &str = "to redo it: in a clone of candle, `git checkout -b redo <base>` and \
    `git am -3 <workspace>/patches/*.patch` (resolve, `git am --continue`), then `cargo xtask \
    format-patch --candle <clone> --branch redo --base <base>`";

/// The first conflict of a merged file: the lines of each side between git's markers.
pub(super) fn conflicting_lines(content: &[u8]) -> FileConflict {
    let text = String::from_utf8_lossy(content);
    let mut lines = text
        .lines()
        .skip_while(|line| !line.starts_with("<<<<<<<"))
        .skip(1);
    let mut side = |end: &str| -> Vec<String> {
        let lines = lines.by_ref().take_while(|line| !line.starts_with(end));
        lines.map(String::from).collect()
    };
    let ours = side("=======");
    let theirs = side(">>>>>>>");
    FileConflict::Lines { ours, theirs }
}
