//! The presentation layer: plans, summaries and research answers for people, the way
//! pubgrub separates its derivation tree (the facts) from its `Reporter` (the text).
//!
//! The layers below compute; this one only renders what they computed, so that the command
//! line and the Python package print the same words from the same data:
//! - [`summary`]: the plan summary (`jointplan plan`, text and JSON) and human-readable
//!   sizes; [`summary_text`] its text, [`serving_text`] the memory lines in serving terms;
//! - [`id_pattern`] and [`layer_pattern`]: ids grouped by pattern (`node.layer.[0-31].q_proj
//!   x32`) and the layers of a model as repeated structure;
//! - [`infeasible_text`]: why-infeasible and why-not answers, read like a derivation;
//! - [`diff_text`]: the comparison of two plans;
//! - [`fit_text`]: the largest value that fits, and which devices fit;
//! - [`explain_text`]: why each provider of a node was chosen ([`crate::study::explain`]);
//! - [`engine_text`]: a serving engine's accounting, the lines it would log and its flags;
//! - [`performance_text`]: a performance prediction at a serving point;
//! - [`placement_text`]: a placement across devices, per device.
//!
//! Nothing here decides anything about a plan: every figure comes from `study` (or the
//! plan itself), and every function returns text or serializable data.

pub mod diff_text;
pub mod engine_text;
pub mod explain_text;
pub mod fit_text;
pub mod id_pattern;
pub mod infeasible_text;
pub mod layer_pattern;
pub mod performance_text;
pub mod placement_text;
pub mod serving_text;
pub mod summary;
pub mod summary_text;
