//! Why no placement fits, as levers with exact amounts: the fewest devices to add to one
//! kind of the set, the fewest expert groups to offload (and the host memory they take),
//! the longest context that fits. Each amount is found by solving the placement problem
//! with the lever moved (the solver as the oracle), so it is exact under the same rules.

use serde::{Deserialize, Serialize};

use super::device_set::DeviceSet;
use super::model::ModelFacts;
use super::options::{layer_state, Formed};
use super::problem::{Objective, Problem};
use super::solve::solve;

/// The most devices the more-devices lever adds to one kind.
pub const MAX_ADDED_DEVICES: u32 = 64;

/// One way to make the model fit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "lever")]
pub enum Lever {
    /// Add devices of one kind (to its first domain).
    MoreDevices {
        /// The device file.
        device_file: String,
        /// Devices to add.
        added: u32,
        /// Devices the placement then uses.
        devices_used: u64,
    },
    /// Offload routed expert groups to host memory.
    Offload {
        /// Expert-group shards moved to the host, over every device.
        units: u64,
        /// Host bytes they take.
        host_bytes: u64,
    },
    /// A shorter context.
    ShorterContext {
        /// The longest context (tokens) that fits.
        context_tokens: u64,
    },
}

impl Lever {
    /// The lever in words.
    pub fn text(&self) -> String {
        match self {
            Lever::MoreDevices {
                device_file,
                added,
                devices_used,
            } => format!(
                "add {added} device(s) of {device_file} (the placement then uses {devices_used})"
            ),
            Lever::Offload { units, host_bytes } => format!(
                "--host-offload with at least {host_bytes} bytes of host memory ({units} expert-group shards)"
            ),
            Lever::ShorterContext { context_tokens } => {
                format!("a context of at most {context_tokens} tokens")
            }
        }
    }
}

fn groups_with(set: &DeviceSet, kind: usize, added: u32, degree: u32) -> u32 {
    set.kinds[kind]
        .per_domain
        .iter()
        .enumerate()
        .map(|(i, (_, n))| {
            let n = if i == 0 { n.saturating_add(added) } else { *n };
            n / degree.max(1)
        })
        .sum()
}

/// The problem with the policy's context capped at `context` tokens (`None`: an option's
/// state cannot be recomputed).
fn at_context(formed: &Formed, facts: &ModelFacts, context: u64) -> Option<Problem> {
    let mut problem = formed.problem.clone();
    for option in &mut problem.options {
        for (layer, cost) in option.layers.iter_mut().enumerate() {
            let (sequence, token) =
                layer_state(facts, layer as u32, option.degree, Some(context)).ok()?;
            cost.kv_sequence_bytes = sequence;
            cost.kv_token_bytes = token;
        }
    }
    Some(problem)
}

/// The levers that make an infeasible problem fit.
pub fn levers(formed: &Formed, facts: &ModelFacts, set: &DeviceSet) -> Vec<Lever> {
    let mut found = Vec::new();
    for (kind, description) in set.kinds.iter().enumerate() {
        for added in 1..=MAX_ADDED_DEVICES {
            let mut problem = formed.problem.clone();
            problem.objective = Objective::FewestDevices;
            for (degree, groups) in &mut problem.kinds[kind].groups {
                *groups = groups_with(set, kind, added, *degree);
            }
            if let Some(solution) = solve(&problem) {
                found.push(Lever::MoreDevices {
                    device_file: description.file.display().to_string(),
                    added,
                    devices_used: solution.devices,
                });
                break;
            }
        }
    }
    let mut problem = formed.problem.clone();
    problem.objective = Objective::LeastOffloaded;
    problem.host_bytes = Some(u64::MAX);
    if let Some(solution) = solve(&problem) {
        let option = &problem.options[solution.option as usize];
        let units = solution
            .stages
            .iter()
            .map(|s| s.offloaded_units * u64::from(option.degree))
            .sum();
        found.push(Lever::Offload {
            units,
            host_bytes: solution.offloaded_bytes,
        });
    }
    // The longest context: feasibility only grows as the context shrinks (every state's
    // bytes are non-decreasing in its tokens), so bisect.
    let fits =
        |context: u64| at_context(formed, facts, context).is_some_and(|p| solve(&p).is_some());
    if facts.context_tokens > 1 && fits(1) {
        let (mut low, mut high) = (1u64, facts.context_tokens);
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if fits(middle) {
                low = middle;
            } else {
                high = middle;
            }
        }
        found.push(Lever::ShorterContext {
            context_tokens: low,
        });
    }
    found
}
