//! The builder (rules 2.1): a validated request in, a hashed and internally validated
//! execution plan out. It composes the builder's layers: candidate derivation and the joint
//! selection ([`crate::candidates`]), the per-node rules ([`crate::node`]), the memory plan
//! ([`crate::memory`]) and completion retention ([`retention`]).
//!
//! [`ExecutionPlan::build`] runs request validation, then steps 1-18 of rules 2.1 in
//! order. [`ExecutionPlan::build_with_report`] does the same and also returns the solver's
//! per-component report (method, check), which is evidence for people and deliberately not
//! part of the hashed payload.

pub mod error;
pub mod internal;
pub mod plan_file;
pub mod retention;
pub mod time_costs;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use crate::candidates::{derive_candidates, select_jointly, CandidateError};
use crate::canonical::Sha256Hex;
use crate::memory::{derive_memory_plan, MemoryInput};
use crate::node::alias::check_global_aliasing;
use crate::node::semantic::check_coverage;
use crate::node::{build_nodes, NodeBuildState, NodeChoice, NodePlanContext};
use crate::request::fingerprints::{
    catalog_fingerprint, family_fingerprint, identity_execution_weights, policy_fingerprint,
    program_fingerprint,
};
use crate::request::validate::validate_request;
use crate::request::{
    ExecutionWeightPlan, IdMap, IdSet, NodeId, NodeResolution, PlanRequest, ProgramNode,
    ProviderId, ResourceId, StorageProfile,
};
use crate::selection::{ComponentReport, SolveOptions};

use crate::plan::hash::{plan_hash, plan_id, UNSET_PLAN_ID};
use crate::plan::{
    ExecutionPlan, ExecutionPlanPayload, PlanNode, RecordedWeights, RetainedCompletionValue,
    SelectionSettings, DEFAULT_OBJECTIVE, PLAN_SCHEMA,
};

use error::PlanError;
use plan_file::{write_plan_file, write_sealing_plan_file, PlanFileWrite};
use retention::{resolve_retained_values, terminal_output_resources};

/// A stage of the build pipeline, reported to a [`BuildObserver`] when it begins.
///
/// Stages begin in declaration order: `Validate`, `Selection`, `Nodes`, `Memory`, `Hash`,
/// `Checks`. A build that fails stops at the stage that found the error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BuildStage {
    /// Request validation (rules 1), policy ceilings and capacity (steps 1-3).
    Validate,
    /// Execution weights, resolution indexing, candidate derivation and the joint
    /// provider/storage selection (steps 4-8).
    Selection,
    /// Every node's checks in execution order, semantic coverage, global aliasing and
    /// retention (steps 9-16).
    Nodes,
    /// The memory plan (step 17).
    Memory,
    /// The payload, its canonical hash and the plan id (step 18).
    Hash,
    /// The internal validation and the independent checker of the finished plan, beside
    /// the serialization of its plan file (they run concurrently; the internal validation
    /// and every rule of the checker but the identity begin during the hash, and this
    /// stage when the hash is done and the plan file begins).
    Checks,
}

impl BuildStage {
    /// Every stage, in the order a successful build begins them.
    pub const ALL: [BuildStage; 6] = [
        BuildStage::Validate,
        BuildStage::Selection,
        BuildStage::Nodes,
        BuildStage::Memory,
        BuildStage::Hash,
        BuildStage::Checks,
    ];

    /// The stage's name: `validate`, `selection`, `nodes`, `memory`, `hash`, `checks`.
    pub fn name(self) -> &'static str {
        match self {
            BuildStage::Validate => "validate",
            BuildStage::Selection => "selection",
            BuildStage::Nodes => "nodes",
            BuildStage::Memory => "memory",
            BuildStage::Hash => "hash",
            BuildStage::Checks => "checks",
        }
    }
}

impl std::fmt::Display for BuildStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Watches a build's progress (for progress bars on long runs). It sees each
/// [`BuildStage`] as it begins; it cannot change the build, and a build without an
/// observer is the same build.
pub trait BuildObserver: Send + Sync {
    /// Called when `stage` begins.
    fn stage_started(&self, stage: BuildStage);
}

impl<F: Fn(BuildStage) + Send + Sync> BuildObserver for F {
    fn stage_started(&self, stage: BuildStage) {
        self(stage);
    }
}

/// Options of plan building: how the joint selection is solved.
#[derive(Clone, Default)]
pub struct BuildOptions {
    /// Solver options (method, objective, frontier state budget, node and time limits).
    pub selection: SolveOptions,
    /// Accept a selection the solver found but could not prove optimal (a limit stopped the
    /// proof). Off by default: a plan's provider choice must be the certified optimum.
    pub allow_uncertified: bool,
    /// Told when each build stage begins (none by default).
    pub observer: Option<std::sync::Arc<dyn BuildObserver>>,
    /// Worker threads of the build (candidate derivation and the per-component solves).
    /// `None` runs on the caller's rayon pool (by default one thread per core); a number
    /// runs the build on a pool of its own with that many threads, so that a caller that
    /// runs builds side by side (a sweep, a Dask or Ray worker) does not oversubscribe the
    /// machine. The plan is byte-identical whatever the thread count.
    pub threads: Option<std::num::NonZeroUsize>,
    /// Nodes fixed to one provider (`--pin NODE=PROVIDER`); recorded in the plan.
    pub pins: BTreeMap<NodeId, ProviderId>,
    /// Providers a node may not use (`--forbid NODE=PROVIDER`); recorded in the plan.
    pub forbids: BTreeMap<NodeId, BTreeSet<ProviderId>>,
    /// Replays a stored plan's choices instead of solving (what `verify` does for a plan
    /// accepted without a proof of optimality); `None` for every ordinary build.
    pub replay: Option<SelectionReplay>,
    /// The serving point and device figures that price the candidates of a time objective
    /// (`min-tpot`, `min-ttft`, `max-throughput`, or `weighted` with time weights); recorded
    /// in the plan with such an objective, ignored with any other.
    pub serving: Option<crate::plan::RecordedServing>,
}

/// The recorded choices of a plan whose selection was not proved optimal: a rebuild fixes
/// every node to its recorded provider and records the same uncertified components, so the
/// plan can be re-derived although its selection cannot be re-solved to the same answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SelectionReplay {
    /// Node → the provider the plan chose.
    pub choices: BTreeMap<NodeId, ProviderId>,
    /// The plan's recorded uncertified components.
    pub uncertified_components: Vec<NodeId>,
}

impl BuildOptions {
    fn stage(&self, stage: BuildStage) {
        if let Some(observer) = &self.observer {
            observer.stage_started(stage);
        }
    }

    /// The settings these options record in a plan (without its uncertified components,
    /// which only the selection knows): the objective unless it is `seed-lex`, its weights,
    /// the pins and the forbids.
    pub fn selection_settings(&self) -> SelectionSettings {
        let objective = self.selection.objective.as_ref();
        SelectionSettings {
            objective: (objective.name() != DEFAULT_OBJECTIVE).then(|| objective.name().to_owned()),
            weights: objective.weights().map(|w| RecordedWeights {
                preferred: w.preferred,
                ranks: w.ranks.clone(),
                time: w.time.as_ref().map(time_costs::recorded_time_weights),
            }),
            serving: objective.time_weights().and(self.serving.clone()),
            pins: self.pins.clone(),
            forbids: self.forbids.clone(),
            uncertified_components: Vec::new(),
        }
    }

    /// Options that rebuild a plan recorded with `settings`: these options (threads,
    /// limits, observer) with the recorded objective, weights, pins and forbids, and a
    /// replay of `choices` when the plan records uncertified components.
    pub fn with_recorded_settings(
        &self,
        settings: &SelectionSettings,
        choices: impl FnOnce() -> BTreeMap<NodeId, ProviderId>,
    ) -> Result<BuildOptions, crate::selection::SelectionError> {
        let weights = settings
            .weights
            .as_ref()
            .map(|w| -> Result<_, crate::selection::SelectionError> {
                Ok(crate::selection::Weights {
                    preferred: w.preferred,
                    ranks: w.ranks.clone(),
                    time: w
                        .time
                        .as_ref()
                        .map(time_costs::time_weights_of)
                        .transpose()?,
                })
            })
            .transpose()?;
        let objective = crate::selection::objective_by_name(settings.objective_name(), weights)?;
        let mut options = self.clone();
        options.selection.objective = std::sync::Arc::from(objective);
        options.pins = settings.pins.clone();
        options.forbids = settings.forbids.clone();
        options.serving = settings.serving.clone();
        options.replay = (!settings.uncertified_components.is_empty()).then(|| SelectionReplay {
            choices: choices(),
            uncertified_components: settings.uncertified_components.clone(),
        });
        if options.replay.is_some() {
            options.allow_uncertified = true;
        }
        Ok(options)
    }
}

impl std::fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions")
            .field("selection", &self.selection)
            .field("allow_uncertified", &self.allow_uncertified)
            .field("observer", &self.observer.as_ref().map(|_| "set"))
            .field("threads", &self.threads)
            .field("pins", &self.pins)
            .field("forbids", &self.forbids)
            .field("replay", &self.replay)
            .finish()
    }
}

/// A built plan with the solver's per-component report (not hashed).
#[derive(Clone, Debug)]
pub struct BuildOutcome {
    /// The plan.
    pub plan: ExecutionPlan,
    /// One report per selection component: size, method, check.
    pub selection: Vec<ComponentReport>,
}

/// Everything steps 1-16 of rules 2.1 derive: the inputs of the memory plan and the
/// payload.
#[derive(Clone, Debug)]
pub struct PlanCore {
    /// The execution weight plan (identity by default).
    pub execution_weights: ExecutionWeightPlan,
    /// Built nodes in execution order.
    pub nodes: Vec<PlanNode>,
    /// Resource → selected storage profile.
    pub profiles: BTreeMap<ResourceId, StorageProfile>,
    /// Retained completion values, by value id.
    pub retained_completion_values: Vec<RetainedCompletionValue>,
    /// Resources of program outputs, sorted, unique, non-empty.
    pub terminal_output_resources: Vec<ResourceId>,
    /// Retained values' resources ∪ terminal output resources.
    pub retained_resources: BTreeSet<ResourceId>,
    /// The solver's per-component report.
    pub selection: Vec<ComponentReport>,
    /// The selection settings to record in the payload.
    pub settings: SelectionSettings,
    /// The prepared family's fingerprint (step 5), which binds every estimate and is a
    /// payload field: computed once per build.
    pub family_fingerprint: Sha256Hex,
}

/// Each program node with its resolution, in execution order.
type NodePairs<'a> = Vec<(&'a ProgramNode, &'a NodeResolution)>;

/// Steps 6-7: resolutions by node id (a duplicate is an error), and each program node with
/// its resolution (a missing one is an error).
fn index_resolutions(request: &PlanRequest) -> Result<NodePairs<'_>, PlanError> {
    let mut by_node: IdMap<&NodeId, &NodeResolution> = IdMap::default();
    for (index, resolution) in request.node_resolutions.iter().enumerate() {
        if by_node.insert(&resolution.node_id, resolution).is_some() {
            return Err(PlanError::DuplicateResolution {
                node: resolution.node_id.clone(),
                path: format!("node_resolutions[{index}].node_id"),
            });
        }
    }
    let mut pairs = Vec::new();
    let mut used = IdSet::default();
    for (b, block) in request.family.program.blocks.iter().enumerate() {
        for (n, node) in block.nodes.iter().enumerate() {
            let Some(resolution) = by_node.get(&node.id) else {
                return Err(PlanError::MissingResolution {
                    node: node.id.clone(),
                    path: format!("family.program.blocks[{b}].nodes[{n}].id"),
                });
            };
            used.insert(&node.id);
            pairs.push((node, *resolution));
        }
    }
    let mut unknown: Vec<NodeId> = by_node
        .keys()
        .filter(|id| !used.contains(*id))
        .map(|id| (*id).clone())
        .collect();
    unknown.sort_unstable();
    if !unknown.is_empty() {
        return Err(PlanError::UnknownResolutions { nodes: unknown });
    }
    Ok(pairs)
}

/// Steps 4-5: the execution weights (the request's, or the identity materializer's; request
/// validation checked them against family and catalog) and the family fingerprint, which
/// binds every estimate and is a payload field.
fn prepare_family(request: &PlanRequest) -> Result<(ExecutionWeightPlan, Sha256Hex), PlanError> {
    let execution_weights = match &request.execution_weights {
        Some(plan) => plan.clone(),
        None => identity_execution_weights(&request.family.weight_schema)?,
    };
    Ok((execution_weights, family_fingerprint(&request.family)?))
}

/// Runs request validation and steps 1-16 of rules 2.1.
pub fn build_core(request: &PlanRequest, options: &BuildOptions) -> Result<PlanCore, PlanError> {
    options.stage(BuildStage::Validate);
    // Steps 1-3 (policy ceilings and capacity) are load-time invariants of the request.
    validate_request(request)?;
    if request.node_resolutions.is_empty() {
        return Err(PlanError::NoNodeResolutions);
    }
    options.stage(BuildStage::Selection);
    // Steps 6-7, and the candidates of step 8.
    let selection_input = index_resolutions(request).and_then(|pairs| {
        let candidates = derive_candidates(&request.catalog, &request.policy, &pairs)?;
        Ok((pairs, candidates))
    });
    // Steps 4-5 come first in the order of errors: a failure there is reported before one
    // of steps 6-8.
    let (pairs, candidates) = match selection_input {
        Ok(input) => input,
        Err(error) => {
            prepare_family(request)?;
            return Err(error);
        }
    };
    // Steps 4-5 beside step 8's joint provider/storage selection (neither reads the other).
    // The selection stays on this thread (an in-place scope), so that its large transient
    // structures are freed where the later steps allocate, not into another thread's heap.
    let mut settings = options.selection_settings();
    let times = time_costs::candidate_times(request, options, &candidates)?;
    let mut family = None;
    let joint = rayon::in_place_scope(|scope| {
        let family = &mut family;
        scope.spawn(move |_| *family = Some(prepare_family(request)));
        select_jointly(
            &request.policy,
            &candidates,
            &options.selection,
            options.allow_uncertified,
            &settings,
            options.replay.as_ref().map(|r| &r.choices),
            times.as_ref(),
        )
    });
    // The scope waited for its task, so `family` is set; computing it here otherwise keeps
    // this free of a panic path.
    let (execution_weights, family_fp) = match family {
        Some(family) => family?,
        None => prepare_family(request)?,
    };
    let joint = joint?;
    settings.uncertified_components = match &options.replay {
        Some(replay) => replay.uncertified_components.clone(),
        None => joint.uncertified_components.clone(),
    };
    options.stage(BuildStage::Nodes);
    // Step 9: producers, last consumers, program outputs.
    let program = &request.family.program;
    let ctx = NodePlanContext::new(
        &request.catalog,
        program,
        &request.policy,
        &execution_weights.schema,
        &family_fp,
    )?;
    // Step 10: every node (each one's own checks in parallel, then the checks across nodes
    // in program order).
    let choices: Vec<NodeChoice<'_>> = pairs
        .iter()
        .zip(&joint.chosen)
        .map(|((node, _), chosen)| NodeChoice {
            resources: chosen.plan,
            storage_rejection: joint.storage_rejections.get(&node.id),
        })
        .collect();
    let used_rejections = choices
        .iter()
        .filter(|choice| choice.storage_rejection.is_some())
        .count();
    let mut state = NodeBuildState::default();
    let nodes = build_nodes(&ctx, &mut state, &pairs, &choices)?;
    // Step 11: leftovers (unknown resolutions were rejected when indexing).
    if joint.chosen.len() != nodes.len() || used_rejections != joint.storage_rejections.len() {
        let node = joint
            .storage_rejections
            .keys()
            .find(|id| !nodes.iter().any(|n| &&n.id == id))
            .map_or_else(String::new, ToString::to_string);
        return Err(CandidateError::SolverBadAssignment {
            node,
            detail: "the joint selection has results for nodes the program does not have"
                .to_owned(),
        }
        .into());
    }
    // Step 12: semantic coverage.
    check_coverage(program, &state.bound)?;
    // Step 13: global storage aliasing.
    check_global_aliasing(&nodes)?;
    // Steps 14-16: retained values, terminal output resources, the retained set.
    let retained_completion_values =
        resolve_retained_values(&request.completion_retention, &nodes)?;
    let terminal = terminal_output_resources(program, &nodes)?;
    let mut retained_resources: BTreeSet<ResourceId> = retained_completion_values
        .iter()
        .map(|v| v.resource_id.clone())
        .collect();
    retained_resources.extend(terminal.iter().cloned());
    Ok(PlanCore {
        execution_weights,
        nodes,
        profiles: joint.profiles,
        retained_completion_values,
        terminal_output_resources: terminal,
        retained_resources,
        selection: joint.components,
        settings,
        family_fingerprint: family_fp,
    })
}

/// The finished plan's two checks and its plan file's serialization, run concurrently
/// (each is a read-only pass over the plan): the internal validation, the independent
/// checker, and the pretty serialization that measures the file against the
/// `maximum_plan_json_bytes` wire limit while it streams it into `file`. Every pass runs to
/// its end; the result is the one the passes gave when they ran one after another, in the
/// order internal validation, checker, wire limit: the first failure in that order is the
/// error, whichever finished first.
///
/// `plan` is a plan its caller has just sealed (its `plan_hash` computed from its payload,
/// as [`ExecutionPlan::build_writing`] does): the checker takes that hash as the payload's
/// ([`crate::check::check_sealed_plan`]) rather than hashing the payload a second time.
pub fn check_beside_writing<W: Write + Send>(
    plan: &ExecutionPlan,
    request: &PlanRequest,
    file: W,
) -> Result<PlanFileWrite, PlanError> {
    let limit = plan_file_limit(request);
    // The checker is the longest pass: it runs on this thread while another takes the
    // internal validation and then the serialization (rayon lets an idle thread steal the
    // second half; with one thread they run in this order, one after another).
    let (report, (internal, written)) = rayon::join(
        || crate::check::check_sealed_plan(plan),
        || {
            rayon::join(
                || {
                    internal::canonical_sha256("payload.plan_hash", &plan.plan_hash)?;
                    internal::validate_request_facts(
                        &internal::payload_content!(plan.payload),
                        request,
                    )
                },
                || write_plan_file(plan, file, limit),
            )
        },
    );
    first_failure(internal, report, written, limit)
}

/// The plan file's size limit (`maximum_plan_json_bytes` of the effective wire limits).
fn plan_file_limit(request: &PlanRequest) -> u64 {
    request
        .policy
        .effective_wire_limits()
        .maximum_plan_json_bytes
}

/// The outcome of the passes over a finished plan as if they had run one after another:
/// the internal validation's error, else the checker's rejection, else the wire limit, else
/// the written file.
fn first_failure(
    internal: Result<(), internal::InternalError>,
    report: crate::check::CheckReport,
    written: serde_json::Result<PlanFileWrite>,
    limit: u64,
) -> Result<PlanFileWrite, PlanError> {
    internal?;
    if !report.is_valid() {
        return Err(PlanError::Check {
            violations: report.violations,
        });
    }
    let written =
        written.map_err(|source| crate::canonical::CanonicalError::new("plan file", source))?;
    if written.bytes > limit {
        return Err(PlanError::PlanJsonTooLarge {
            measured: written.bytes,
            limit,
        });
    }
    Ok(written)
}

/// Step 18 and the passes over its result: hashes `payload` into its plan hash and plan
/// id, and checks and writes the finished plan ([`check_beside_writing`]'s three passes and
/// their order of failures).
///
/// Only the plan id and the plan hash are not known before the hash, and only the
/// checker's identity rule reads them; so every pass starts at once: the checker's other
/// rules ([`crate::check::check_beside_sealing`]) and the internal validation read the
/// payload while the hash runs, and the plan file is written as soon as the hash is done,
/// from the same payload with the plan id put in by the writer
/// ([`plan_file::write_sealing_plan_file`]); the identity is checked on the sealed plan at
/// the end. On two threads one takes the hash and then the plan file, the other the rules;
/// on one thread they run one after another. A hash that fails is the error before all of
/// them, as it was when the hash ran first. The [`BuildStage::Checks`] stage begins when
/// the hash is done.
pub fn hash_check_and_write<W: Write + Send>(
    mut payload: ExecutionPlanPayload,
    request: &PlanRequest,
    options: &BuildOptions,
    file: W,
) -> Result<(ExecutionPlan, PlanFileWrite), PlanError> {
    let limit = plan_file_limit(request);
    let observer = options.observer.as_deref();
    let mut internal = Ok(());
    // An in-place scope: the internal validation on the pool, the rules and the hash with
    // the plan file beside each other.
    let (rules, sealed) = rayon::in_place_scope(|scope| {
        let content = internal::payload_content!(payload);
        let internal = &mut internal;
        scope.spawn(move |_| *internal = internal::validate_request_facts(&content, request));
        let payload = &payload;
        crate::check::check_beside_sealing(payload, move || {
            let hash = plan_hash(payload)?;
            if let Some(observer) = observer {
                observer.stage_started(BuildStage::Checks);
            }
            let id = plan_id(&hash);
            let written = write_sealing_plan_file(payload, &id, &hash, file, limit);
            Ok::<_, crate::canonical::CanonicalError>((hash, id, written))
        })
    });
    let (hash, id, written) = sealed?;
    payload.plan_id = id;
    let plan = ExecutionPlan {
        payload,
        plan_hash: hash,
    };
    let report = rules.sealed(&plan);
    let written = first_failure(internal, report, written, limit)?;
    Ok((plan, written))
}

impl ExecutionPlan {
    /// Builds the execution plan of a request (rules 2.1): request validation, steps
    /// 1-16 ([`build_core`]), the memory plan, the payload, its hash and plan id, and the
    /// internal validation of the result.
    pub fn build(
        request: &PlanRequest,
        options: &BuildOptions,
    ) -> Result<ExecutionPlan, PlanError> {
        Ok(Self::build_with_report(request, options)?.plan)
    }

    /// [`ExecutionPlan::build`], also returning the solver's per-component report.
    pub fn build_with_report(
        request: &PlanRequest,
        options: &BuildOptions,
    ) -> Result<BuildOutcome, PlanError> {
        Ok(Self::build_writing(request, options, std::io::sink())?.0)
    }

    /// [`ExecutionPlan::build_with_report`], streaming the plan file form
    /// ([`ExecutionPlan::write_json`]) into `file` while the plan is checked, so that the
    /// one serialization that measures the plan against its wire limit also writes it.
    ///
    /// On `Ok` the plan passed every check and `file` holds the whole plan file unless the
    /// returned [`PlanFileWrite`] records a write error (reported by the caller after its
    /// own refusals, as a write that came last would be). On `Err`, `file` holds a part of
    /// the plan or nothing: write it somewhere temporary and remove it then.
    pub fn build_writing<W: Write + Send>(
        request: &PlanRequest,
        options: &BuildOptions,
        file: W,
    ) -> Result<(BuildOutcome, PlanFileWrite), PlanError> {
        Self::on_pool(options, || {
            Self::build_on_current_pool(request, options, file)
        })
    }

    fn build_on_current_pool<W: Write + Send>(
        request: &PlanRequest,
        options: &BuildOptions,
        file: W,
    ) -> Result<(BuildOutcome, PlanFileWrite), PlanError> {
        let (payload, selection) = Self::payload_on_current_pool(request, options)?;
        let (plan, written) = hash_check_and_write(payload, request, options, file)?;
        Ok((BuildOutcome { plan, selection }, written))
    }

    /// Steps 1-17 of a build and the payload of step 18 without its hash: the payload with
    /// the plan id unset ([`UNSET_PLAN_ID`]), and the solver's per-component report. What
    /// reads a plan's contents without writing or quoting it (a placement's per-model facts,
    /// `crate::placement::model`) needs no more; [`ExecutionPlan::seal`] finishes it into
    /// the plan [`ExecutionPlan::build`] returns, with the same checks.
    pub fn build_payload(
        request: &PlanRequest,
        options: &BuildOptions,
    ) -> Result<(ExecutionPlanPayload, Vec<ComponentReport>), PlanError> {
        Self::on_pool(options, || Self::payload_on_current_pool(request, options))
    }

    /// The rest of a build after [`ExecutionPlan::build_payload`]: the payload hashed into
    /// its plan id, the internal validation, the independent checker and the plan file's
    /// wire limit ([`hash_check_and_write`], the file written into a sink). The plan and
    /// the errors are those [`ExecutionPlan::build`] gives for the same request.
    pub fn seal(
        payload: ExecutionPlanPayload,
        request: &PlanRequest,
        options: &BuildOptions,
    ) -> Result<ExecutionPlan, PlanError> {
        Self::on_pool(options, || {
            Ok(hash_check_and_write(payload, request, options, std::io::sink())?.0)
        })
    }

    /// `work` on the current rayon pool, or on a pool of `options.threads` threads.
    fn on_pool<T: Send>(
        options: &BuildOptions,
        work: impl FnOnce() -> Result<T, PlanError> + Send,
    ) -> Result<T, PlanError> {
        match options.threads {
            None => work(),
            Some(threads) => rayon::ThreadPoolBuilder::new()
                .num_threads(threads.get())
                .build()
                .map_err(|e| PlanError::ThreadPool {
                    threads: threads.get(),
                    message: e.to_string(),
                })?
                .install(work),
        }
    }

    fn payload_on_current_pool(
        request: &PlanRequest,
        options: &BuildOptions,
    ) -> Result<(ExecutionPlanPayload, Vec<ComponentReport>), PlanError> {
        let core = build_core(request, options)?;
        // Step 17: the memory plan.
        options.stage(BuildStage::Memory);
        // The memory plan runs on one core: the request's fingerprints the payload quotes
        // (the program's alone is a pass over the whole program) are taken beside it.
        let (memory, fingerprints) = rayon::join(
            || {
                derive_memory_plan(&MemoryInput {
                    device_capacity_bytes: request.catalog.device.total_memory_bytes,
                    policy: &request.policy,
                    program: &request.family.program,
                    nodes: &core.nodes,
                    selected_profiles: &core.profiles,
                    retained_resources: &core.retained_resources,
                })
            },
            || -> Result<_, crate::canonical::CanonicalError> {
                Ok((
                    program_fingerprint(&request.family.program)?,
                    catalog_fingerprint(&request.catalog)?,
                    policy_fingerprint(&request.policy)?,
                ))
            },
        );
        let memory = memory?;
        let (program_fingerprint, capability_catalog_fingerprint, policy_fingerprint) =
            fingerprints?;
        // Only the memory plan reads these: freed before the payload is hashed and checked.
        drop(core.profiles);
        drop(core.retained_resources);
        // Step 18: payload, hash, plan id.
        options.stage(BuildStage::Hash);
        let schema = &core.execution_weights.schema;
        let payload = ExecutionPlanPayload {
            schema: PLAN_SCHEMA,
            plan_id: UNSET_PLAN_ID.to_owned(),
            family_id: request.family.family_id.clone(),
            device_id: request.catalog.device.id.clone(),
            device_runtime_implementation_fingerprint: request
                .catalog
                .device
                .runtime_implementation_fingerprint
                .clone(),
            prepared_family_fingerprint: core.family_fingerprint,
            program_fingerprint,
            capability_catalog_fingerprint,
            policy_version: request.policy.version,
            policy_fingerprint,
            maximum_scheduled_tokens: request.policy.maximum_scheduled_tokens,
            weight_format: schema.format_id.clone(),
            quantization_formats: schema.quantization_formats(),
            execution_weights: core.execution_weights,
            retained_completion_values: core.retained_completion_values,
            terminal_output_resources: core.terminal_output_resources,
            nodes: core.nodes,
            memory,
            selection_settings: core.settings,
        };
        Ok((payload, core.selection))
    }
}
