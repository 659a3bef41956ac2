//! Running a sweep's points: each point synthesized and keyed ([`prepare_point_in`]),
//! planned on its device or placed across its device set ([`plan_point`]), points with
//! equal plans planned once ([`run_points`] in parallel batches, [`plan_batch`] for a
//! worker). The grid, its points and rows are [`super::sweep`]'s.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use crate::builder::BuildOptions;
use crate::canonical::{canonical_fingerprint, sha256_hex};
use crate::plan::ExecutionPlan;
use crate::selection::Status;
use crate::synth::policy::PolicyPreset;
use crate::synth::policy::ViewKind;
use crate::synth::{ModelSource, SynthError, Synthesized};

use super::report::ServingReport;
use super::sweep::{parse_engine, SweepPoint, SweepRow};
use super::sweep_time::{
    placement_engine_rule, single_device_time, PlacementJob, PlacementOutcome, Placer, ServingTerms,
};
use super::StudyError;
use crate::perf::DEFAULT_ENGINE;

/// The build settings a key covers (the selection objective is the default).
#[derive(Serialize)]
struct KeyedSettings<'a> {
    objective: &'a str,
    allow_uncertified: bool,
}

/// What a plan depends on: equal for two points whose plans are the same plan.
#[derive(Serialize)]
struct PlanKeyed<'a> {
    request: &'a str,
    settings: &'a KeyedSettings<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    serving: Option<ServingTerms>,
    /// The time profile that prices the serving point.
    #[serde(skip_serializing_if = "Option::is_none")]
    time_engine: Option<&'a str>,
}

/// What a row is: its point, and what its plan depends on (or the error it met).
#[derive(Serialize)]
struct RowKeyed<'a> {
    point: &'a SweepPoint,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    settings: &'a KeyedSettings<'a>,
}

/// The model source of a point; relative files (model folder, device, policy preset file)
/// are read from `base` when given (a worker whose current directory is not the sweep's).
fn source_of(point: &SweepPoint, base: Option<&Path>) -> ModelSource {
    let file = |text: &str| match base {
        Some(base) => base.join(text),
        None => PathBuf::from(text),
    };
    let policy = point.policy.as_ref().map(|p| match p.as_str() {
        "interactive" | "server" => p.clone(),
        preset_file => file(preset_file).display().to_string(),
    });
    ModelSource {
        folder: Some(file(&point.model)),
        device: point.device.as_deref().map(file),
        policy,
        layers: point.layers,
        experts: point.experts,
        weight_format: point.weight_format.clone(),
        ..ModelSource::default()
    }
}

fn parse_views(text: &str) -> Vec<ViewKind> {
    text.split('>')
        .map(|v| {
            if v == "paged" {
                ViewKind::Paged
            } else {
                ViewKind::Contiguous
            }
        })
        .collect()
}

fn overflow(what: &str) -> StudyError {
    StudyError::Overflow {
        what: what.to_owned(),
    }
}

/// Fields of the policy preset a sweep point (or `plan --context --sequences
/// --scheduled-tokens`) sets; `None` keeps the preset's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyFields {
    /// `maximum_context_tokens` (the model's trained positions still cap it).
    pub context: Option<u64>,
    /// `maximum_active_sequences`.
    pub sequences: Option<u32>,
    /// `maximum_scheduled_tokens`.
    pub scheduled_tokens: Option<u64>,
    /// `storage_view_order`.
    pub storage_views: Option<Vec<ViewKind>>,
}

impl PolicyFields {
    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        *self == PolicyFields::default()
    }

    /// Synthesizes `source`'s request under its policy preset with these fields set: the
    /// one rule a sweep point and `plan MODEL_FOLDER --context ...` share, so that a sweep
    /// row's plan is replayed by `plan` with the point's values.
    pub fn synthesize(&self, source: &ModelSource) -> Result<Synthesized, SynthError> {
        source.synthesize_with_policy(&self.preset(source)?)
    }

    /// `source`'s policy preset with these fields set.
    pub fn preset(&self, source: &ModelSource) -> Result<PolicyPreset, SynthError> {
        let mut preset = source.policy_preset()?;
        if let Some(context) = self.context {
            preset.maximum_context_tokens = Some(context);
        }
        // A ceiling below a reusable bucket drops the bucket (buckets stay within ceilings).
        if let Some(sequences) = self.sequences {
            preset = preset.with_sequence_ceiling(sequences);
        }
        if let Some(tokens) = self.scheduled_tokens {
            preset = preset.with_token_ceiling(tokens);
        }
        if let Some(views) = &self.storage_views {
            preset.storage_view_order = views.clone();
        }
        Ok(preset)
    }
}

/// A point's synthesis: its request (held to its engine's budget when it names one), the
/// context it has, the device it was synthesized for, what a device-set point is placed
/// from, the engine's budget and the time profile that prices the point.
struct PointInputs {
    request: crate::request::PlanRequest,
    context_used: Option<u64>,
    device: crate::synth::DeviceDescription,
    source: ModelSource,
    preset: PolicyPreset,
    budget: Option<super::budget::Budget>,
    time_engine: &'static str,
    /// The engine the point names (a device-set point's placement follows its rules).
    memory_engine: Option<crate::engine::EngineChoice>,
}

/// The request of a point (its source's policy preset with the point's policy fields set)
/// and the context it has: the preset's, capped by the model's trained context
/// (`Architecture::trained_context`; a sliding window may keep fewer tokens per layer).
/// With a serving point and no `sequences` knob, the preset's sequence ceiling is raised to
/// the concurrency when lower, as `plan --concurrency` raises it. A point that names an
/// engine has its request held to the engine's budget as `plan --engine` holds it
/// ([`super::engine_facts::apply_engine`], the engine's default arguments); a device-set
/// point's placement follows the engine's rules itself (`placement::serving_engine`).
fn synthesize_point(point: &SweepPoint, base: Option<&Path>) -> Result<PointInputs, StudyError> {
    let engine = match &point.engine {
        Some(value) => Some(parse_engine(value).map_err(|message| StudyError::Settings {
            path: "grid.engine".into(),
            message,
        })?),
        None => None,
    };
    let mut fields = PolicyFields {
        context: point.context,
        sequences: point.sequences,
        scheduled_tokens: point.scheduled_tokens,
        storage_views: point.storage_views.as_deref().map(parse_views),
    };
    let source = source_of(point, base);
    let mut preset = fields.preset(&source)?;
    if let (Some(terms), None) = (point.serving(), point.sequences) {
        let wanted = u32::try_from(terms.concurrency).unwrap_or(u32::MAX);
        if preset.maximum_active_sequences < wanted {
            fields.sequences = Some(wanted);
            preset = fields.preset(&source)?;
        }
    }
    let mut synthesized = source.synthesize_with_policy(&preset)?;
    let mut budget = None;
    if let (Some((choice, _)), None) = (&engine, &point.devices) {
        let applied = super::engine_facts::apply_engine(
            &synthesized.request,
            &synthesized.device,
            &synthesized.policy,
            choice,
            &crate::engine::EngineArgs::default(),
        )?;
        synthesized.request = applied.request;
        budget = Some(applied.budget);
    }
    let trained = match &source.folder {
        Some(folder) => {
            let config = crate::synth::ModelFolder::read(folder)?.config;
            let arch = config.architecture()?;
            Some(arch.trained_context)
        }
        None => None,
    };
    Ok(PointInputs {
        request: synthesized.request,
        context_used: trained.map(|m| preset.context_tokens(m)),
        device: synthesized.device,
        source,
        preset,
        budget,
        time_engine: engine
            .as_ref()
            .map_or(DEFAULT_ENGINE, |(_, profile)| *profile),
        memory_engine: engine.map(|(choice, _)| choice),
    })
}

/// What planning a prepared point needs: one device's request, or a device set to place
/// the model across.
enum Work {
    /// A request planned on one device.
    Plan {
        request: Box<crate::request::PlanRequest>,
        device: Box<crate::synth::DeviceDescription>,
        time_engine: &'static str,
    },
    /// A device-set point.
    Place {
        source: Box<ModelSource>,
        set: PathBuf,
        preset: Box<PolicyPreset>,
        time_engine: &'static str,
        memory_engine: Option<crate::engine::EngineChoice>,
    },
}

/// A point synthesized and keyed, not yet planned (a point that cannot be synthesized is
/// prepared too: its row is the error row).
pub struct PreparedPoint {
    work: Option<Work>,
    options: BuildOptions,
    plan_key: String,
    row: SweepRow,
    started: Instant,
}

impl PreparedPoint {
    /// The point's key (its row's).
    pub fn key(&self) -> &str {
        &self.row.key
    }

    /// The key of the plan: equal for points whose requests, settings and serving points
    /// are equal (a capped context), which are planned once.
    pub fn plan_key(&self) -> &str {
        &self.plan_key
    }

    /// This point's row with the outcome of `planned`, the row of a point with the same
    /// plan key (the plan is not built again).
    pub fn with_plan_of(self, planned: &SweepRow) -> SweepRow {
        SweepRow {
            point: self.row.point,
            key: self.row.key,
            context_used: self.row.context_used,
            // Two engines (or versions) may give equal budgets under their own rules.
            engine_budget: self.row.engine_budget,
            plan_seconds: self.started.elapsed().as_secs_f64(),
            ..planned.clone()
        }
    }
}

/// Synthesizes and keys one point (no plan yet: a resumed sweep skips known keys first).
pub fn prepare_point(
    point: &SweepPoint,
    options: &BuildOptions,
) -> Result<PreparedPoint, StudyError> {
    prepare_point_in(point, None, options)
}

/// [`prepare_point`] with the point's relative files read from `base` (the directory the
/// grid's paths are relative to); the row keeps the point as given. A point whose request
/// cannot be synthesized gives an error row; only an overflow of the keys' hashing fails.
pub fn prepare_point_in(
    point: &SweepPoint,
    base: Option<&Path>,
    options: &BuildOptions,
) -> Result<PreparedPoint, StudyError> {
    let started = Instant::now();
    let mut options = options.clone();
    if let Some(name) = &point.objective {
        let objective =
            crate::selection::objective_by_name(name, None).map_err(|e| StudyError::Settings {
                path: "grid.objective".into(),
                message: e.to_string(),
            })?;
        options.selection.objective = std::sync::Arc::from(objective);
    }
    let settings = KeyedSettings {
        objective: options.selection.objective.name(),
        allow_uncertified: options.allow_uncertified,
    };
    let synthesized = synthesize_point(point, base);
    let request_hash = match &synthesized {
        Ok(inputs) => Some(
            canonical_fingerprint("request", &inputs.request)
                .map_err(|_| overflow("request hash"))?
                .to_string(),
        ),
        Err(_) => None,
    };
    let error = synthesized.as_ref().err().map(|e| e.to_string());
    let keyed = RowKeyed {
        point,
        request: request_hash.as_deref(),
        error: error.as_deref(),
        settings: &settings,
    };
    let key = canonical_fingerprint("sweep key", &keyed)
        .map_err(|_| overflow("sweep key"))?
        .to_string();
    let time_engine = synthesized.as_ref().ok().map(|inputs| inputs.time_engine);
    let plan_key = match (&request_hash, &point.devices) {
        // A device-set point is placed on its own (its key covers the set and degrees).
        (Some(request), None) => canonical_fingerprint(
            "sweep plan key",
            &PlanKeyed {
                request,
                settings: &settings,
                serving: point.serving(),
                time_engine: point.serving().and(time_engine),
            },
        )
        .map_err(|_| overflow("sweep plan key"))?
        .to_string(),
        _ => key.clone(),
    };
    let (work, context_used, engine_budget) = match synthesized {
        Ok(inputs) => {
            let work = match &point.devices {
                Some(set) => Work::Place {
                    source: Box::new(inputs.source),
                    set: match base {
                        Some(base) => base.join(set),
                        None => PathBuf::from(set),
                    },
                    preset: Box::new(inputs.preset),
                    time_engine: inputs.time_engine,
                    memory_engine: inputs.memory_engine,
                },
                None => Work::Plan {
                    request: Box::new(inputs.request),
                    device: Box::new(inputs.device),
                    time_engine: inputs.time_engine,
                },
            };
            (Some(work), inputs.context_used, inputs.budget)
        }
        Err(_) => (None, None, None),
    };
    let row = SweepRow {
        point: point.clone(),
        key,
        request_hash: request_hash
            .map(|h| format!("sha256:{h}"))
            .unwrap_or_default(),
        context_used,
        status: if error.is_some() { "error" } else { "" }.to_owned(),
        plan_id: None,
        choice_id: None,
        providers: Vec::new(),
        reason: error,
        certified: None,
        report: None,
        engine_budget,
        plan_seconds: 0.0,
        placement: None,
        time: None,
        time_error: None,
    };
    Ok(PreparedPoint {
        work,
        options,
        plan_key,
        row,
        started,
    })
}

/// Plans one prepared point (with the build options of its point; a device-set point by
/// `placer`); an error row is returned as it is.
pub fn plan_point(prepared: PreparedPoint, placer: &dyn Placer) -> Result<SweepRow, StudyError> {
    let PreparedPoint {
        work,
        options,
        mut row,
        started,
        ..
    } = prepared;
    match work {
        None => {}
        Some(Work::Plan {
            request,
            device,
            time_engine,
        }) => plan_on_device(&mut row, &request, &device, time_engine, &options)?,
        Some(Work::Place {
            source,
            set,
            preset,
            time_engine,
            memory_engine,
        }) => {
            let job = PlacementJob {
                source: &source,
                set,
                preset: *preset,
                tensor_parallel: row.point.tensor_parallel,
                pipeline_parallel: row.point.pipeline_parallel,
                serving: row.point.serving(),
                engine: time_engine,
                memory_engine,
                options: &options,
            };
            match placer.place(&job) {
                PlacementOutcome::Placed {
                    placement,
                    time,
                    engine_budget,
                } => {
                    row.engine_budget = engine_budget;
                    row.status = "fits".to_owned();
                    row.certified = Some(true);
                    row.placement = Some(placement);
                    match time {
                        Some(Ok(mut time)) => {
                            if let Some(engine) = &row.point.engine {
                                time.rules.push(placement_engine_rule(engine));
                            }
                            row.time = Some(*time)
                        }
                        Some(Err(e)) => row.time_error = Some(e),
                        None => {}
                    }
                }
                PlacementOutcome::Failed { status, reason } => {
                    row.status = status.to_owned();
                    row.reason = Some(reason);
                }
            }
        }
    }
    row.plan_seconds = started.elapsed().as_secs_f64();
    Ok(row)
}

/// Plans `request` on one device into `row`, priced at the point's serving point with the
/// time profile `time_engine`.
fn plan_on_device(
    row: &mut SweepRow,
    request: &crate::request::PlanRequest,
    device: &crate::synth::DeviceDescription,
    time_engine: &str,
    options: &BuildOptions,
) -> Result<(), StudyError> {
    match ExecutionPlan::build_with_report(request, options) {
        Ok(outcome) => {
            let plan = &outcome.plan;
            let report = ServingReport::of(request, plan)?;
            row.status = if report.worst_case_fits {
                "fits"
            } else {
                "worst-case-exceeds"
            }
            .to_owned();
            row.plan_id = Some(plan.payload.plan_id.clone());
            row.choice_id = Some(choice_id(plan)?);
            let providers: BTreeSet<String> = plan
                .payload
                .nodes
                .iter()
                .map(|n| n.provider_resources.provider_id.to_string())
                .collect();
            row.providers = providers.into_iter().collect();
            row.certified = Some(
                outcome
                    .selection
                    .iter()
                    .all(|c| c.status == Status::Optimal),
            );
            row.report = Some(report);
            if let Some(terms) = row.point.serving() {
                match single_device_time(request, plan, device, terms, time_engine) {
                    Ok(time) => row.time = Some(time),
                    Err(e) => row.time_error = Some(e),
                }
            }
        }
        Err(error) => {
            row.status = if error.kind() == crate::error_kind::ErrorKind::Infeasible {
                "infeasible"
            } else {
                "bad-input"
            }
            .to_owned();
            row.reason = Some(error.to_string());
        }
    }
    Ok(())
}

/// sha256 of the provider per node and the profile per named resource. Resources named by
/// a content hash (scratch, bindings) change id with their sizes: they count by usage and
/// profile; named resources by id and profile.
fn choice_id(plan: &ExecutionPlan) -> Result<String, StudyError> {
    let mut choice: BTreeMap<String, String> = plan
        .payload
        .nodes
        .iter()
        .map(|n| {
            (
                n.id.to_string(),
                n.provider_resources.provider_id.to_string(),
            )
        })
        .collect();
    let mut hashed: BTreeMap<String, usize> = BTreeMap::new();
    for d in &plan.payload.memory.dynamic_descriptors {
        let id = d.base_resource_id.to_string();
        if id.contains("/sha256/") {
            *hashed
                .entry(format!("{:?} {}", d.usage, d.storage.profile))
                .or_default() += 1;
        } else {
            choice.insert(id, d.storage.profile.to_string());
        }
    }
    for (class, count) in hashed {
        choice.insert(class, count.to_string());
    }
    let choice_text = serde_json::to_string(&choice).map_err(|_| overflow("choice id"))?;
    Ok(format!("sha256:{}", sha256_hex(choice_text.as_bytes())))
}

/// Runs `points` not in `done` (by key; a point whose key is computed again is skipped too),
/// `jobs` at a time, calling `on_batch` with each finished batch's rows in grid order and
/// how many of `points` are handled so far, skipped ones included (the caller appends the
/// rows to its files, so an interrupted sweep resumes after its last batch, and reports
/// progress). Points with equal requests are planned once, each with its own row.
pub fn run_points(
    points: &[SweepPoint],
    done: &mut BTreeSet<String>,
    jobs: NonZeroUsize,
    options: &BuildOptions,
    placer: &dyn Placer,
    mut on_batch: impl FnMut(&[SweepRow], usize) -> Result<(), StudyError>,
) -> Result<usize, StudyError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.get())
        .build()
        .map_err(|e| StudyError::Settings {
            path: "--jobs".into(),
            message: e.to_string(),
        })?;
    let mut build = options.clone();
    build.threads = NonZeroUsize::new(1);
    let mut ran = 0;
    let mut plans = BTreeMap::new();
    let mut handled = 0;
    for batch in points.chunks(jobs.get()) {
        handled += batch.len();
        let prepared: Vec<Result<PreparedPoint, StudyError>> =
            pool.install(|| batch.par_iter().map(|p| prepare_point(p, &build)).collect());
        let mut todo = Vec::new();
        for point in prepared {
            let point = point?;
            if done.insert(point.key().to_owned()) {
                todo.push(point);
            }
        }
        let rows = plan_once(todo, &mut plans, |leaders| {
            pool.install(|| {
                leaders
                    .into_par_iter()
                    .map(|p| plan_point(p, placer))
                    .collect()
            })
        })?;
        ran += rows.len();
        on_batch(&rows, handled)?;
    }
    Ok(ran)
}

/// A row the batch's planning did not return (a broken invariant, not an input's fault).
fn lost_row() -> StudyError {
    StudyError::Settings {
        path: "sweep".into(),
        message: "internal: a batch returned fewer rows than it planned points; please \
                  report this"
            .into(),
    }
}

/// The rows of `todo`, in its order: the first point of each plan key not in `plans` is
/// planned (all of them by one call of `plan`), every other point takes the row of its
/// plan key's first point; `plans` keeps the planned rows by plan key.
fn plan_once(
    todo: Vec<PreparedPoint>,
    plans: &mut BTreeMap<String, SweepRow>,
    plan: impl FnOnce(Vec<PreparedPoint>) -> Vec<Result<SweepRow, StudyError>>,
) -> Result<Vec<SweepRow>, StudyError> {
    enum Slot {
        Planned(String),
        Shared(Box<PreparedPoint>),
    }
    let mut leaders = Vec::new();
    let mut slots = Vec::new();
    let mut leading = BTreeSet::new();
    for point in todo {
        let plan_key = point.plan_key().to_owned();
        if plans.contains_key(&plan_key) || leading.contains(&plan_key) {
            slots.push(Slot::Shared(Box::new(point)));
        } else {
            leading.insert(plan_key.clone());
            slots.push(Slot::Planned(plan_key));
            leaders.push(point);
        }
    }
    let mut planned = plan(leaders).into_iter();
    let mut rows = Vec::with_capacity(slots.len());
    for slot in slots {
        let row = match slot {
            Slot::Planned(plan_key) => {
                let row = planned.next().ok_or_else(lost_row)??;
                plans.insert(plan_key, row.clone());
                row
            }
            Slot::Shared(point) => {
                let row = plans.get(point.plan_key()).ok_or_else(lost_row)?;
                point.with_plan_of(row)
            }
        };
        rows.push(row);
    }
    Ok(rows)
}

/// Plans a batch of points one after the other, each plan with `options.threads` (the
/// unit of work a distributed sweep sends to a worker): the points whose key is in `done`,
/// or equal to an earlier point's of the batch, are skipped; points of the batch with equal
/// requests are planned once. Returns the rows in the batch's order.
pub fn plan_batch(
    points: &[SweepPoint],
    base: Option<&Path>,
    done: &BTreeSet<String>,
    options: &BuildOptions,
    placer: &dyn Placer,
) -> Result<Vec<SweepRow>, StudyError> {
    let mut seen = BTreeSet::new();
    let mut todo = Vec::new();
    for point in points {
        let prepared = prepare_point_in(point, base, options)?;
        if done.contains(prepared.key()) || !seen.insert(prepared.key().to_owned()) {
            continue;
        }
        todo.push(prepared);
    }
    plan_once(todo, &mut BTreeMap::new(), |leaders| {
        leaders.into_iter().map(|p| plan_point(p, placer)).collect()
    })
}
