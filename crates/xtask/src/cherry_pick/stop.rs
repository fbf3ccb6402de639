//! Why a patch gets no branch on a base: the candidates tried, each with why it was passed over.

use crate::apply::Conflict;
use crate::series::Patch;

/// A patch that gets no branch on this base, and why.
#[derive(Clone, Debug)]
pub struct Stopped {
    pub patch: Patch,
    pub why: Stop,
    /// A carried patch: it is proposed nowhere, so this stops nothing, but the patches after it
    /// go on without it.
    pub carried: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// No candidate gets a branch: each tried, in order, with why it was passed over (a
    /// conflict, or a branch that does not build).
    PassedOver(Vec<(Tried, Why)>),
    /// It builds on this patch (`[builds-on]`), which has no branch.
    BuildsOn(String),
}

/// Which candidate for a patch was tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tried {
    AsWritten,
    /// Its resolution for a rewrite the base has.
    Resolution,
}

impl std::fmt::Display for Tried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Tried::AsWritten => "the patch as written",
            Tried::Resolution => "its resolution for a pull request in the base",
        })
    }
}

/// Why a candidate for a patch gets no branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// It does not go onto the linear series.
    Conflict(Conflict),
    /// It goes onto the linear series, but its change does not merge onto `onto`, where its
    /// branch starts.
    Onto {
        patch: String,
        onto: String,
        conflict: Conflict,
    },
    /// It applies to the base, but its branch does not build there.
    DoesNotBuild,
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Conflict(conflict) => write!(f, "{conflict}"),
            Why::Onto {
                patch,
                onto,
                conflict,
            } => write!(
                f,
                "{patch} does not merge onto {onto} without a conflict, {conflict}\nname the \
                 patch it builds on in patches/stack.toml ([builds-on])"
            ),
            Why::DoesNotBuild => {
                write!(
                    f,
                    "it applies to the base, but its branch does not build there"
                )
            }
        }
    }
}

impl Stop {
    /// Why each candidate was passed over, in words: the first's reason, then each other one.
    pub fn said(&self) -> Option<String> {
        let Stop::PassedOver(tried) = self else {
            return None;
        };
        let mut said = tried.first().map(|(_, why)| why.to_string())?;
        for (what, why) in &tried[1..] {
            said += &format!("\nalso tried {what}: {why}");
        }
        Some(said)
    }
}
