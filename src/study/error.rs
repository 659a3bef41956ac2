//! The error of the study layer: reports, fits and sweeps.

/// What can go wrong in a study.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// The device cannot hold the sequences the policy requires (1 unless it states
    /// `minimum_sequences`) at its maximum context: a serving engine would refuse to start.
    /// Boxed: the figures are most of the error's bytes, and every study's `Result` carries
    /// it.
    #[error(transparent)]
    NoSequenceFits(Box<SequenceShortfall>),
    /// A figure of the report overflows u64.
    #[error("memory report: {what} overflows u64")]
    Overflow {
        /// The figure.
        what: String,
    },
    /// A plan's demand could not be evaluated at its ceiling.
    #[error("memory report: resource {resource}: {reason}")]
    Demand {
        /// The resource.
        resource: String,
        /// Why.
        reason: String,
    },
    /// A request could not be synthesized at a study's value.
    #[error(transparent)]
    Synth(#[from] crate::synth::SynthError),
    /// An engine's accounting could not be made (an unknown engine argument, a bad value).
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    /// A plan failed for a reason other than capacity (bad input, a rejected check).
    #[error(transparent)]
    Plan(Box<crate::builder::error::PlanError>),
    /// A study's settings are invalid (a knob, a grid, a value).
    #[error("{path}: {message}")]
    Settings {
        /// Where in the settings (a JSON path or an option).
        path: String,
        /// What is wrong and what to do.
        message: String,
    },
}

impl StudyError {
    /// Whether the device is too small (a serving engine would refuse to start) or a figure
    /// overflows: the input is infeasible rather than malformed.
    pub fn is_infeasible(&self) -> bool {
        matches!(
            self,
            StudyError::NoSequenceFits(_) | StudyError::Overflow { .. }
        )
    }
}

/// The figures of a [`StudyError::NoSequenceFits`] refusal: what the policy requires at the
/// maximum context against what the device leaves, and the levers that would make it fit.
#[derive(Debug, thiserror::Error)]
#[error(
    "{headline} at the maximum context ({context_tokens} tokens): the policy requires \
     {required_sequences}, each needs {kv_bytes_per_sequence} bytes of KV cache and \
     sequence state, the device leaves {headroom_bytes} bytes (usable \
     {usable_capacity_bytes} - weights {weights_bytes} - activations {activation_bytes} - \
     workspaces {workspace_bytes}); levers: {levers}"
)]
pub struct SequenceShortfall {
    /// `not even one sequence fits`, or how many fit of the required.
    pub headline: String,
    /// Sequences the policy requires at the maximum context.
    pub required_sequences: u64,
    /// The policy's maximum context (tokens a sequence may reach).
    pub context_tokens: u64,
    /// Bytes one sequence needs at that context.
    pub kv_bytes_per_sequence: u64,
    /// Bytes left for sequences.
    pub headroom_bytes: i128,
    /// Usable capacity.
    pub usable_capacity_bytes: u64,
    /// Weights.
    pub weights_bytes: u64,
    /// Activations at the token ceiling.
    pub activation_bytes: u64,
    /// Workspaces at the ceilings.
    pub workspace_bytes: u64,
    /// The levers that would make it fit, each with its amount.
    pub levers: String,
}
