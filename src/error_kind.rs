//! What kind of failure an error is: a leaf that every layer's error names (the crate's
//! [`Error`](crate::error::Error) at the top maps itself to it too), so that a lower layer
//! never names the layer above it.

/// What kind of failure an error is, for callers that act on it (the command line maps it
/// to an exit status, bindings to an exception class).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input is malformed or inconsistent: a file, a field, an option. Fix the input.
    BadInput,
    /// The input is well formed but no plan satisfies it: no compatible provider, no
    /// provider/profile choice, not enough memory, a limit the plan exceeds, or no certified
    /// optimum within the solver's limits.
    Infeasible,
    /// A stored plan was rejected: it differs from the plan its request builds, or it
    /// breaks a rule of a valid plan.
    Rejected,
}
