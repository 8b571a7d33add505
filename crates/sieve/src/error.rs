//! The errors of compiling and of running a script.

use crate::Location;

/// Why a script did not compile: where, and what is wrong.
///
/// Positions are 1-based; columns count characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct CompileError {
    /// The line of the offending token.
    pub line: u32,
    /// The column of the offending token.
    pub column: u32,
    /// What is wrong, for the script's author.
    pub message: String,
}

/// Why running a script stopped without a result. The caller falls back to
/// the implicit keep (RFC 5228 §2.10.6) and logs the Display text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The script evaluated more tests and commands than `Limits::max_steps`.
    #[error("the script ran more than {0} steps")]
    TooManySteps(u64),
    /// More distinct redirects than `Limits::max_redirects`.
    #[error("more than {0} redirects")]
    TooManyRedirects(usize),
    /// More actions than `Limits::max_actions`.
    #[error("more than {0} actions")]
    TooManyActions(usize),
    /// Two actions that cannot both be done (e.g. reject and fileinto).
    #[error("conflicting actions: {0}")]
    Conflict(String),
    /// A non-optional `include` named a script the host does not have.
    #[error("included {location:?} script {name:?} does not exist")]
    IncludeMissing {
        /// Where it was looked for.
        location: Location,
        /// The script's name.
        name: String,
    },
    /// A script includes itself, directly or through others (RFC 6609 §3.2).
    #[error("include of {location:?} script {name:?} is recursive")]
    IncludeRecursive {
        /// Where the script lives.
        location: Location,
        /// The script's name.
        name: String,
    },
    /// Includes nested deeper than `Limits::max_include_depth`.
    #[error("includes nested deeper than {0}")]
    IncludeTooDeep(usize),
    /// An included script does not compile.
    #[error("included {location:?} script {name:?} does not compile: {error}")]
    IncludeInvalid {
        /// Where the script lives.
        location: Location,
        /// The script's name.
        name: String,
        /// Its compile error.
        error: CompileError,
    },
    /// A value computed at run time is unusable (e.g. a redirect address
    /// built from variables that is not an address).
    #[error("{0}")]
    Invalid(String),
}
