//! Placement across devices: a model split over a device set by tensor parallelism
//! (a degree dividing the heads and every split tensor), pipeline stages (contiguous layer
//! ranges, one tensor-parallel group of one device kind each), expert parallelism for routed
//! experts, and offload of routed expert groups to host memory; chosen exactly for a
//! memory objective, certified, written out device by device and checked.
//!
//! The flow (docs/placement.md):
//! 1. [`model::ModelFacts::gather`]: the model synthesized on a roomy copy of the set's
//!    first device and planned up to its payload (hashed and checked only when a placement
//!    is written out, [`model::ModelFacts::seal`]); its tensors, states and step bytes read
//!    from the request and the plan; once per model, device and policy across the calls
//!    sharing a [`reuse::Gathered`] store ([`place_with`]);
//! 2. [`options::form`]: every parallel option's per-device costs, the placement
//!    [`problem::Problem`];
//! 3. [`solve::solve`]: the exact dynamic program; [`enumerate::enumerate`], sharing no code
//!    with it, certifies the answer where the placements can be counted within a budget;
//!    ([`choose`] ends here);
//! 4. [`record::record`]: the placement plan, hashed; [`check::check`]: the independent
//!    checker.
//! 5. with a serving point, [`prediction::predict`]: the closed-loop serving simulation of
//!    `crate::perf::serving` run on the chosen placement ([`step_price`] prices each step),
//!    beside the objective's linear estimate the solver ranked it by ([`timing`]).

pub mod alternative;
pub mod check;
pub mod device_set;
pub mod enumerate;
pub mod fit;
pub mod levers;
pub mod model;
pub mod mxfp4;
pub mod options;
pub mod prediction;
pub mod problem;
pub mod record;
pub mod reuse;
pub mod serving_engine;
pub mod shares;
pub mod solve;
mod stage_ways;
pub mod step_price;
pub mod sweep;
pub mod timing;

use serde::{Deserialize, Serialize};

use crate::builder::BuildOptions;
use crate::synth::ModelSource;

pub use device_set::DeviceSet;
pub use options::Settings;
pub use problem::Objective;
pub use record::PlacementPlan;
pub use reuse::Gathered;

/// What can go wrong in a placement.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// A device set file breaks a rule.
    #[error("{file}: at {json_path}: {message}")]
    DeviceSet {
        /// The set file.
        file: String,
        /// JSON path of the culprit.
        json_path: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A device set file could not be read or parsed.
    #[error("device set {file}: {message}")]
    DeviceSetLoad {
        /// The set file.
        file: String,
        /// The reader's message (with its JSON path).
        message: String,
    },
    /// A flag or a combination of flags is wrong.
    #[error("{0}")]
    Usage(String),
    /// The model's request or plan is not what placement reads.
    #[error("the model: {0}")]
    Model(String),
    /// Synthesis failed.
    #[error(transparent)]
    Synth(Box<crate::synth::SynthError>),
    /// The single-device plan could not be built.
    #[error("the model's single-device plan: {0}")]
    Plan(Box<crate::builder::error::PlanError>),
    /// The plan's memory report could not be computed.
    #[error("the model's memory report: {0}")]
    Study(Box<crate::study::StudyError>),
    /// No placement fits.
    #[error("no placement fits: {0}")]
    Infeasible(String),
    /// A bug of the placement code (never bad input).
    #[error("internal placement error: {0}")]
    Internal(String),
}

impl PlacementError {
    /// Whether the error is bad input (exit 2) rather than an infeasible request (exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            PlacementError::Infeasible(_) => false,
            PlacementError::Plan(e) => e.kind() == crate::error_kind::ErrorKind::BadInput,
            PlacementError::Internal(_) => false,
            _ => true,
        }
    }
}

/// How the placement was proved optimal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificate {
    /// `exhaustive` (the enumeration evaluated every placement and agrees) or
    /// `dynamic-program` (more placements than the budget: optimal by the proof in
    /// docs/solver.md).
    pub method: String,
    /// Placements the enumeration counts (an upper bound: kind sequences beyond a kind's
    /// groups are counted and skipped).
    pub placements: u64,
    /// The enumeration's budget.
    pub budget: u64,
}

/// A placement, certified and checked.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Placed {
    /// The placement plan.
    pub plan: PlacementPlan,
    /// How it was proved optimal.
    pub certificate: Certificate,
    /// Options the model cannot take, and why.
    pub rejected: Vec<options::Rejected>,
    /// What the problem restricted.
    pub notes: Vec<String>,
    /// The checker's violations (empty: valid).
    pub violations: Vec<check::Violation>,
    /// Weight bytes of the single-device plan (for comparison).
    pub single_device_weight_bytes: u64,
    /// What the alternative asked about (`--why-not`) costs against this placement.
    #[serde(skip_serializing_if = "Option::is_none", skip_deserializing)]
    pub why_not: Option<alternative::Comparison>,
    /// The predicted times at the serving point, by part (with a serving point).
    #[serde(skip_serializing_if = "Option::is_none", skip_deserializing)]
    pub performance: Option<prediction::Prediction>,
    /// What a serving engine would allocate and log on each rank of the placement
    /// (`--engine`: its accounting at the placement's tensor-parallel degree), set by the
    /// caller that named the engine.
    #[serde(skip_serializing_if = "Option::is_none", skip_deserializing)]
    pub engine: Option<crate::engine::EngineReport>,
}

/// Default enumeration budget of the certificate.
pub const DEFAULT_ENUMERATION_BUDGET: u64 = 2_000_000;

fn compatible(set: &DeviceSet) -> Result<(), PlacementError> {
    let first = &set.kinds[0];
    for kind in &set.kinds[1..] {
        if kind.description.storage_profiles != first.description.storage_profiles {
            return Err(PlacementError::Usage(format!(
                "{} and {} offer different storage profiles: placement plans the model once for the set and needs one profile list",
                kind.file.display(),
                first.file.display()
            )));
        }
        let missing: Vec<&str> = first
            .description
            .capabilities
            .iter()
            .filter(|c| c.as_str().starts_with("capability.dtype."))
            .filter(|c| !kind.description.capabilities.contains(*c))
            .map(|c| c.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(PlacementError::Usage(format!(
                "{} lacks {} that {} offers: every device of a set must run the model's dtypes",
                kind.file.display(),
                missing.join(", "),
                first.file.display()
            )));
        }
    }
    Ok(())
}

/// A placement chosen and certified, not yet written out: the model's facts (their
/// single-device plan built, not sealed), the problem and the optimal solution.
pub struct Chosen {
    /// The model's facts.
    pub facts: model::ModelFacts,
    /// The placement problem.
    pub formed: options::Formed,
    /// The optimal solution.
    pub solution: problem::Solution,
    /// How it was proved optimal.
    pub certificate: Certificate,
}

impl Chosen {
    /// The tensor-parallel degree of the solution.
    pub fn tensor_parallel(&self) -> u32 {
        self.formed.problem.options[self.solution.option as usize].degree
    }

    /// The pipeline stages of the solution.
    pub fn pipeline_parallel(&self) -> usize {
        self.solution.stages.len()
    }

    /// The serving simulation at the serving point (with a serving point) run with
    /// `engine` in place of the point's engine profile ([`prediction::simulate_with`]).
    pub fn simulate_with(
        &self,
        engine: &crate::perf::EngineProfile,
    ) -> Result<Option<crate::perf::ServingPrediction>, PlacementError> {
        self.formed
            .timing
            .as_ref()
            .map(|t| prediction::simulate_with(t, &self.solution, engine))
            .transpose()
    }

    /// The predicted times at the serving point (with a serving point).
    pub fn performance(&self) -> Result<Option<prediction::Prediction>, PlacementError> {
        self.formed
            .timing
            .as_ref()
            .map(|t| prediction::predict(t, &self.solution))
            .transpose()
    }
}

/// The optimal placement of `source` on `set` under `settings`, certified (by the
/// enumeration within `budget` placements, else by the dynamic program's proof): what
/// [`place`] writes out. A model that places nowhere is [`PlacementError::Infeasible`]
/// with the levers that would make it fit.
pub fn choose(
    source: &ModelSource,
    set: &DeviceSet,
    settings: &Settings,
    options: &BuildOptions,
    budget: u64,
) -> Result<Chosen, PlacementError> {
    choose_with(
        source,
        set,
        settings,
        options,
        budget,
        &mut Gathered::once(),
        Reasons::WithLevers,
    )
}

/// What an infeasible placement's error says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reasons {
    /// Why no placement fits, then the levers that would make it fit (each found by
    /// solving the problem again, the smaller weight formats by gathering the model in
    /// each): what `plan` prints.
    WithLevers,
    /// Why no placement fits alone (the first line of [`Reasons::WithLevers`]'s): for a
    /// search over sets that keeps only that line (`fit --max-count N` trying each count).
    Brief,
}

/// [`choose`] with the model's facts (and the smaller formats' of its levers) taken from
/// `gathered` where it holds them, gathered into it otherwise (the same answer, each
/// (model, device, policy) gathered once across calls that share the store), and the
/// infeasible error's `reasons`.
pub fn choose_with(
    source: &ModelSource,
    set: &DeviceSet,
    settings: &Settings,
    options: &BuildOptions,
    budget: u64,
    gathered: &mut Gathered,
    reasons: Reasons,
) -> Result<Chosen, PlacementError> {
    compatible(set)?;
    let first = &set.kinds[0];
    let preset = match &settings.policy {
        Some(preset) => preset.clone(),
        None => source
            .policy_preset()
            .map_err(|e| PlacementError::Synth(Box::new(e)))?,
    };
    let facts = gathered.facts(source, &first.description, &first.file, options, &preset)?;
    let formed = options::form(&facts, set, &preset, settings)?;
    let Some(solution) = solve::solve(&formed.problem) else {
        if reasons == Reasons::Brief {
            return Err(PlacementError::Infeasible(why_not(&formed)));
        }
        let mut found = levers::levers(&formed, &facts, set);
        found.extend(smaller_format(
            source, set, settings, options, &preset, &facts, gathered,
        )?);
        let levers: Vec<String> = found.iter().map(levers::Lever::text).collect();
        let levers = if levers.is_empty() {
            "no lever within reach (up to 64 more devices of a kind, unlimited host offload, any shorter context)".to_owned()
        } else {
            levers.join("; or ")
        };
        return Err(PlacementError::Infeasible(format!(
            "{}\nit would fit with: {levers}",
            why_not(&formed)
        )));
    };
    let certificate = match enumerate::enumerate(&formed.problem, budget) {
        enumerate::Enumerated::Complete { best, placements } => {
            if best.as_ref() != Some(&solution) {
                return Err(PlacementError::Internal(format!(
                    "the enumeration of {placements} placements found {best:?}, the solver {solution:?}"
                )));
            }
            Certificate {
                method: "exhaustive".to_owned(),
                placements,
                budget,
            }
        }
        enumerate::Enumerated::OverBudget { placements } => Certificate {
            method: "dynamic-program".to_owned(),
            placements,
            budget,
        },
    };
    Ok(Chosen {
        facts,
        formed,
        solution,
        certificate,
    })
}

/// Places `source` on `set`: the optimal placement under `settings` ([`choose`]), its
/// single-device plan sealed, written out and checked.
pub fn place(
    source: &ModelSource,
    set: &DeviceSet,
    settings: &Settings,
    options: &BuildOptions,
    budget: u64,
) -> Result<Placed, PlacementError> {
    place_with(
        source,
        set,
        settings,
        options,
        budget,
        &mut Gathered::once(),
        Reasons::WithLevers,
    )
}

/// [`place`] with the model's facts taken from `gathered` where it holds them and the
/// infeasible error's `reasons` ([`choose_with`]): the same placement, each (model,
/// device, policy) gathered once across calls that share the store (`fit --devices DIR
/// --max-count N` places every count of a device file from one gathering).
pub fn place_with(
    source: &ModelSource,
    set: &DeviceSet,
    settings: &Settings,
    options: &BuildOptions,
    budget: u64,
    gathered: &mut Gathered,
    reasons: Reasons,
) -> Result<Placed, PlacementError> {
    let Chosen {
        facts,
        formed,
        solution,
        certificate,
    } = choose_with(source, set, settings, options, budget, gathered, reasons)?;
    let facts = facts.seal(options)?;
    let plan = record::record(&facts, set, &formed, &solution)?;
    let violations = check::check(&plan);
    let performance = match &formed.timing {
        Some(t) => Some(prediction::predict(t, &solution)?),
        None => None,
    };
    let why_not = settings
        .why_not
        .map(|a| alternative::compare(&formed.problem, &solution, a));
    Ok(Placed {
        why_not,
        performance,
        plan,
        certificate,
        rejected: formed.rejected,
        notes: formed.notes,
        violations,
        single_device_weight_bytes: facts.plan_weight_bytes,
        engine: None,
    })
}

/// The smaller-format lever: the first of [`levers::SMALLER_FORMATS`] with fewer weight
/// bytes than the model's format under which the model places on the set (fewest devices);
/// formats the model or the device cannot take are skipped. Each format's facts come from
/// `gathered`.
fn smaller_format(
    source: &ModelSource,
    set: &DeviceSet,
    settings: &Settings,
    options: &BuildOptions,
    preset: &crate::synth::PolicyPreset,
    facts: &model::ModelFacts,
    gathered: &mut Gathered,
) -> Result<Option<levers::Lever>, PlacementError> {
    let first = &set.kinds[0];
    for name in levers::SMALLER_FORMATS {
        if name == facts.format.name() {
            continue;
        }
        let mut other = source.clone();
        other.weight_format = Some(name.to_owned());
        let Ok(smaller) = gathered.facts(&other, &first.description, &first.file, options, preset)
        else {
            continue;
        };
        if smaller.plan_weight_bytes >= facts.plan_weight_bytes {
            continue;
        }
        let fewest = Settings {
            objective: Objective::FewestDevices,
            serving: None,
            why_not: None,
            ..settings.clone()
        };
        let Ok(formed) = options::form(&smaller, set, preset, &fewest) else {
            continue;
        };
        if let Some(solution) = solve::solve(&formed.problem) {
            return Ok(Some(levers::Lever::SmallerFormat {
                weight_format: name.to_owned(),
                weight_bytes: smaller.plan_weight_bytes,
                devices_used: solution.devices,
            }));
        }
    }
    Ok(None)
}

/// Why no placement fits: the options the model cannot take, and for each option it can,
/// what one device of a single stage would need against the largest usable memory.
fn why_not(formed: &options::Formed) -> String {
    let mut lines = Vec::new();
    let largest = formed.usable.iter().copied().max().unwrap_or(0);
    for option in &formed.problem.options {
        let weights: u128 = option
            .layers
            .iter()
            .map(|l| u128::from(l.weight_bytes))
            .sum();
        let kv: u128 = option
            .layers
            .iter()
            .map(|l| u128::from(l.kv_sequence_bytes))
            .sum::<u128>()
            * u128::from(formed.problem.sequences);
        let groups: u32 = formed
            .problem
            .kinds
            .iter()
            .map(|k| k.groups_of(option.degree))
            .sum();
        lines.push(format!(
            "tensor parallel {} ({}-split experts): the layers hold {weights} bytes of weights and {kv} bytes of KV cache per device over {groups} stage(s) of at most {largest} usable bytes",
            option.degree,
            option.split.name()
        ));
    }
    for rejected in &formed.rejected {
        lines.push(format!(
            "tensor parallel {} ({}-split experts) is impossible: {}",
            rejected.degree,
            rejected.split.name(),
            rejected.reason
        ));
    }
    lines.join("; ")
}
