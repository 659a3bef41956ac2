//! Cartesian sweeps over the knobs a placement researcher varies: model folder, device
//! file, policy preset and its fields, storage-view order, weight format, layers, experts,
//! and, for time, device sets with their parallel degrees and the serving point
//! (concurrency, input and output tokens; [`super::sweep_time`]).
//!
//! A grid ([`Grid`], JSON) lists values per knob; every combination is a [`SweepPoint`].
//! Each point is synthesized, planned and reported as one [`SweepRow`] keyed by
//! `sha256(canonical {point, request, settings})`: the point's knob values, the canonical
//! hash of its request and the build settings. Every grid point has its own row: two points
//! whose requests are equal (a context the model caps to its maximum) are planned once and
//! each keeps its requested value, with the value used in [`SweepRow::context_used`]; a
//! point that cannot be synthesized is an error row (status `error`, the error in
//! `reason`) and the sweep goes on. Equal points share a key, a sweep that finds a key
//! already in its results skips it (resume), and two result files merge by concatenation
//! (rows are de-duplicated by key when read).
//!
//! A grid also splits into [`Shard`]s, contiguous runs of its points by index, so that a
//! batch scheduler's array of jobs plans one shard each; their result files, concatenated
//! in shard order, are the unsharded sweep's.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::builder::BuildOptions;
use crate::canonical::{canonical_fingerprint, sha256_hex};
use crate::plan::ExecutionPlan;
use crate::selection::Status;
use crate::synth::policy::PolicyPreset;
use crate::synth::policy::ViewKind;
use crate::synth::{ModelSource, SynthError, Synthesized};

use super::report::ServingReport;
use super::sweep_time::{
    single_device_time, PlacementJob, PlacementOutcome, Placer, ServingTerms, SweepPlacement,
    SweepTime,
};
use super::StudyError;

/// A grid: values per knob (an absent or empty knob keeps the model folder's default).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    /// Model folders.
    pub model: Vec<PathBuf>,
    /// Device files.
    #[serde(default)]
    pub device: Vec<PathBuf>,
    /// Policy presets (`interactive`, `server` or a preset file).
    #[serde(default)]
    pub policy: Vec<String>,
    /// The preset's maximum context.
    #[serde(default)]
    pub context: Vec<u64>,
    /// The preset's maximum active sequences.
    #[serde(default)]
    pub sequences: Vec<u32>,
    /// The preset's scheduled-token ceiling.
    #[serde(default)]
    pub scheduled_tokens: Vec<u64>,
    /// Storage-view orders (`["paged", "contiguous"]`).
    #[serde(default)]
    pub storage_views: Vec<Vec<ViewKind>>,
    /// Weight formats.
    #[serde(default)]
    pub weight_format: Vec<String>,
    /// Layers kept.
    #[serde(default)]
    pub layers: Vec<u64>,
    /// Routed experts per MoE layer.
    #[serde(default)]
    pub experts: Vec<u64>,
    /// Selection objectives (`seed-lex`, `max-preferred`, `min-penalty`).
    #[serde(default)]
    pub objective: Vec<String>,
    /// Device set files (`models/devices/sets/*.json`): each point is placed across the
    /// set (`plan --devices`); exclusive with `device`.
    #[serde(default)]
    pub devices: Vec<PathBuf>,
    /// Pinned tensor-parallel degrees of a device-set point (`plan --tensor-parallel`).
    #[serde(default)]
    pub tensor_parallel: Vec<u32>,
    /// Pinned pipeline depths of a device-set point (`plan --pipeline-parallel`).
    #[serde(default)]
    pub pipeline_parallel: Vec<u32>,
    /// Requests in flight at the serving point (`plan --concurrency`); with
    /// `input_tokens` and `output_tokens`, every row gains the time columns.
    #[serde(default)]
    pub concurrency: Vec<u64>,
    /// Prompt tokens of each request at the serving point.
    #[serde(default)]
    pub input_tokens: Vec<u64>,
    /// Output tokens of each request at the serving point.
    #[serde(default)]
    pub output_tokens: Vec<u64>,
    /// The axes of the plan-region map, x then y (default: the first two varying knobs);
    /// one map is drawn per combination of the other varying knobs.
    #[serde(default)]
    pub region_axes: Vec<String>,
}

/// One point of a grid: a value per knob (`None`: the folder's default).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Model folder.
    pub model: String,
    /// Device file.
    pub device: Option<String>,
    /// Policy preset.
    pub policy: Option<String>,
    /// Maximum context.
    pub context: Option<u64>,
    /// Maximum active sequences.
    pub sequences: Option<u32>,
    /// Scheduled-token ceiling.
    pub scheduled_tokens: Option<u64>,
    /// Storage-view order, as `paged>contiguous`.
    pub storage_views: Option<String>,
    /// Weight format.
    pub weight_format: Option<String>,
    /// Layers kept.
    pub layers: Option<u64>,
    /// Routed experts.
    pub experts: Option<u64>,
    /// Selection objective.
    #[serde(default)]
    pub objective: Option<String>,
    /// Device set file (the point is placed across it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<String>,
    /// Pinned tensor-parallel degree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_parallel: Option<u32>,
    /// Pinned pipeline depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_parallel: Option<u32>,
    /// Requests in flight at the serving point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u64>,
    /// Prompt tokens at the serving point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens at the serving point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
}

/// The knobs of a point, by name, in column order (the device-set and serving-point knobs
/// last, so that a grid without them keeps its columns' order).
pub const KNOBS: [&str; 17] = [
    "model",
    "device",
    "policy",
    "context",
    "sequences",
    "scheduled_tokens",
    "storage_views",
    "weight_format",
    "layers",
    "experts",
    "objective",
    "devices",
    "tensor_parallel",
    "pipeline_parallel",
    "concurrency",
    "input_tokens",
    "output_tokens",
];

impl SweepPoint {
    /// The value of knob `name` as text (empty for the default).
    pub fn value(&self, name: &str) -> String {
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        let number = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
        match name {
            "model" => self.model.clone(),
            "device" => text(&self.device),
            "policy" => text(&self.policy),
            "context" => number(self.context),
            "sequences" => number(self.sequences.map(u64::from)),
            "scheduled_tokens" => number(self.scheduled_tokens),
            "storage_views" => text(&self.storage_views),
            "weight_format" => text(&self.weight_format),
            "layers" => number(self.layers),
            "experts" => number(self.experts),
            "objective" => text(&self.objective),
            "devices" => text(&self.devices),
            "tensor_parallel" => number(self.tensor_parallel.map(u64::from)),
            "pipeline_parallel" => number(self.pipeline_parallel.map(u64::from)),
            "concurrency" => number(self.concurrency),
            "input_tokens" => number(self.input_tokens),
            "output_tokens" => number(self.output_tokens),
            _ => String::new(),
        }
    }

    /// The point's serving point, when the grid gives one.
    pub fn serving(&self) -> Option<ServingTerms> {
        Some(ServingTerms {
            concurrency: self.concurrency?,
            input_tokens: self.input_tokens?,
            output_tokens: self.output_tokens?,
        })
    }
}

/// The short form of a knob's value for labels: a model folder, device file or preset
/// file by its last path component without `.json` (`models/devices/a100-80gb.json` ->
/// `a100-80gb`), other values as they are.
pub fn short_value(knob: &str, value: &str) -> String {
    match knob {
        "model" | "device" | "policy" | "devices" => {
            let last = value
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or(value);
            last.strip_suffix(".json").unwrap_or(last).to_owned()
        }
        _ => value.to_owned(),
    }
}

/// One progress line of a finished row (`finished` of `total` points): the varying knobs'
/// short values, the status, the context used where the model capped it, and the time.
pub fn progress_line(row: &SweepRow, finished: usize, total: usize, varying: &[&str]) -> String {
    let percent = if total == 0 {
        100
    } else {
        finished * 100 / total
    };
    let knobs: Vec<String> = varying
        .iter()
        .map(|k| format!("{k}={}", short_value(k, &row.point.value(k))))
        .collect();
    let capped = match row.context_used {
        Some(used) if row.capped() => format!(" (context capped to {used})"),
        _ => String::new(),
    };
    let reason = match (&row.reason, row.status.as_str()) {
        (Some(reason), "error") => format!(": {reason}"),
        _ => String::new(),
    };
    let time = match &row.time {
        Some(t) => format!(
            ", TPOT {:.2} ms, {:.1} tokens/s per device",
            t.tpot_seconds * 1e3,
            t.output_tokens_per_second_per_device
        ),
        None => String::new(),
    };
    format!(
        "sweep: {finished}/{total} ({percent}%) {}: {}{capped}{time}{reason}, {:.2} s",
        knobs.join(" "),
        row.status,
        row.plan_seconds
    )
}

fn views_text(views: &[ViewKind]) -> String {
    views
        .iter()
        .map(|v| match v {
            ViewKind::Contiguous => "contiguous",
            ViewKind::Paged => "paged",
        })
        .collect::<Vec<_>>()
        .join(">")
}

fn axis<T: Clone>(values: &[T]) -> Vec<Option<T>> {
    if values.is_empty() {
        vec![None]
    } else {
        values.iter().cloned().map(Some).collect()
    }
}

impl Grid {
    /// Every point of the grid, in knob order (the last knob varies fastest).
    pub fn points(&self) -> Result<Vec<SweepPoint>, StudyError> {
        if self.model.is_empty() {
            return Err(StudyError::Settings {
                path: "grid.model".into(),
                message: "list at least one model folder".into(),
            });
        }
        for (index, name) in self.objective.iter().enumerate() {
            crate::selection::objective_by_name(name, None).map_err(|e| StudyError::Settings {
                path: format!("grid.objective[{index}]"),
                message: e.to_string(),
            })?;
        }
        self.check_placement_and_serving()?;
        let mut points = vec![SweepPoint::default()];
        let mut expand = |set: &dyn Fn(&mut SweepPoint, usize), count: usize| {
            points = points
                .iter()
                .flat_map(|p| {
                    (0..count).map(move |i| {
                        let mut q = p.clone();
                        set(&mut q, i);
                        q
                    })
                })
                .collect();
        };
        let models: Vec<String> = self.model.iter().map(|m| m.display().to_string()).collect();
        expand(&|p, i| p.model = models[i].clone(), models.len());
        let devices = axis(&self.device);
        expand(
            &|p, i| p.device = devices[i].as_ref().map(|d| d.display().to_string()),
            devices.len(),
        );
        let policies = axis(&self.policy);
        expand(&|p, i| p.policy = policies[i].clone(), policies.len());
        let contexts = axis(&self.context);
        expand(&|p, i| p.context = contexts[i], contexts.len());
        let sequences = axis(&self.sequences);
        expand(&|p, i| p.sequences = sequences[i], sequences.len());
        let tokens = axis(&self.scheduled_tokens);
        expand(&|p, i| p.scheduled_tokens = tokens[i], tokens.len());
        let views = axis(&self.storage_views);
        expand(
            &|p, i| p.storage_views = views[i].as_deref().map(views_text),
            views.len(),
        );
        let formats = axis(&self.weight_format);
        expand(&|p, i| p.weight_format = formats[i].clone(), formats.len());
        let layers = axis(&self.layers);
        expand(&|p, i| p.layers = layers[i], layers.len());
        let experts = axis(&self.experts);
        expand(&|p, i| p.experts = experts[i], experts.len());
        let objectives = axis(&self.objective);
        expand(
            &|p, i| p.objective = objectives[i].clone(),
            objectives.len(),
        );
        let sets = axis(&self.devices);
        expand(
            &|p, i| p.devices = sets[i].as_ref().map(|d| d.display().to_string()),
            sets.len(),
        );
        let tp = axis(&self.tensor_parallel);
        expand(&|p, i| p.tensor_parallel = tp[i], tp.len());
        let pp = axis(&self.pipeline_parallel);
        expand(&|p, i| p.pipeline_parallel = pp[i], pp.len());
        let concurrency = axis(&self.concurrency);
        expand(&|p, i| p.concurrency = concurrency[i], concurrency.len());
        let input = axis(&self.input_tokens);
        expand(&|p, i| p.input_tokens = input[i], input.len());
        let output = axis(&self.output_tokens);
        expand(&|p, i| p.output_tokens = output[i], output.len());
        Ok(points)
    }

    /// The device-set and serving-point knobs' rules: `device` and `devices` exclude each
    /// other, parallel degrees need `devices`, a serving point needs all three of
    /// `concurrency`, `input_tokens` and `output_tokens`, every value at least 1.
    fn check_placement_and_serving(&self) -> Result<(), StudyError> {
        let bad = |path: &str, message: String| {
            Err(StudyError::Settings {
                path: format!("grid.{path}"),
                message,
            })
        };
        if !self.devices.is_empty() && !self.device.is_empty() {
            return bad(
                "devices",
                "give `device` (one device per point) or `devices` (device sets), not both".into(),
            );
        }
        for (name, given) in [
            ("tensor_parallel", !self.tensor_parallel.is_empty()),
            ("pipeline_parallel", !self.pipeline_parallel.is_empty()),
        ] {
            if given && self.devices.is_empty() {
                return bad(
                    name,
                    "a parallel degree applies to a device set: list the set files in                      `devices` (models/devices/sets/*.json)"
                        .into(),
                );
            }
        }
        let serving = [
            ("concurrency", self.concurrency.is_empty()),
            ("input_tokens", self.input_tokens.is_empty()),
            ("output_tokens", self.output_tokens.is_empty()),
        ];
        if serving.iter().any(|(_, empty)| !empty) {
            if let Some((name, _)) = serving.iter().find(|(_, empty)| *empty) {
                return bad(
                    name,
                    "a serving point needs concurrency, input_tokens and output_tokens:                      list at least one value of each"
                        .into(),
                );
            }
        }
        let zero = |values: &[u64]| values.iter().position(|v| *v == 0);
        let zero32 = |values: &[u32]| values.iter().position(|v| *v == 0);
        for (name, at) in [
            ("concurrency", zero(&self.concurrency)),
            ("input_tokens", zero(&self.input_tokens)),
            ("output_tokens", zero(&self.output_tokens)),
            ("tensor_parallel", zero32(&self.tensor_parallel)),
            ("pipeline_parallel", zero32(&self.pipeline_parallel)),
        ] {
            if let Some(index) = at {
                return bad(&format!("{name}[{index}]"), "must be at least 1".into());
            }
        }
        Ok(())
    }

    /// The varying knobs with the region-map axes first (the order the plots take).
    pub fn plot_axes(&self) -> Result<Vec<&'static str>, StudyError> {
        let varying = self.varying();
        let mut axes = Vec::new();
        for (index, name) in self.region_axes.iter().enumerate() {
            match varying.iter().find(|k| **k == name.as_str()) {
                Some(knob) if !axes.contains(knob) => axes.push(*knob),
                _ => {
                    return Err(StudyError::Settings {
                        path: format!("grid.region_axes[{index}]"),
                        message: format!(
                            "{name:?} is not a knob with more than one value in the grid \
                             (varying: {})",
                            varying.join(", ")
                        ),
                    })
                }
            }
        }
        let rest: Vec<&'static str> = varying
            .iter()
            .copied()
            .filter(|k| !axes.contains(k))
            .collect();
        axes.extend(rest);
        Ok(axes)
    }

    /// The knobs with more than one value, in column order (the axes of the plots).
    pub fn varying(&self) -> Vec<&'static str> {
        let counts = [
            self.model.len(),
            self.device.len(),
            self.policy.len(),
            self.context.len(),
            self.sequences.len(),
            self.scheduled_tokens.len(),
            self.storage_views.len(),
            self.weight_format.len(),
            self.layers.len(),
            self.experts.len(),
            self.objective.len(),
            self.devices.len(),
            self.tensor_parallel.len(),
            self.pipeline_parallel.len(),
            self.concurrency.len(),
            self.input_tokens.len(),
            self.output_tokens.len(),
        ];
        KNOBS
            .iter()
            .zip(counts)
            .filter(|(_, n)| *n > 1)
            .map(|(k, _)| *k)
            .collect()
    }
}

/// One row of the results: the point, its key, and its plan's figures or why it has none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// The point's knob values, as the grid gives them (a capped context keeps the value
    /// asked for; [`SweepRow::context_used`] has the one used).
    pub point: SweepPoint,
    /// `sha256(canonical {point, request, settings})` (an error row: `{point, error,
    /// settings}`).
    pub key: String,
    /// Canonical sha256 of the synthesized request (empty for an error row).
    pub request_hash: String,
    /// The maximum context the request has: the preset's, capped by the model's trained
    /// positions (`max_position_embeddings`), so below `point.context` when the model
    /// caps it. `None` for an error row.
    #[serde(default)]
    pub context_used: Option<u64>,
    /// `fits` (the worst case fits), `worst-case-exceeds` (the plan builds, fewer sequences
    /// fit than the policy admits), `infeasible` (no plan), `bad-input` (the request is
    /// refused) or `error` (the point cannot be synthesized; `reason` says why).
    pub status: String,
    /// The plan id, where the plan builds.
    pub plan_id: Option<String>,
    /// sha256 of the provider per node and the profile per named resource (resources named
    /// by a content hash count by usage and profile): equal for plans that make the same
    /// choice whatever their sizes (the plan-region map colours by it).
    pub choice_id: Option<String>,
    /// The providers the plan uses (sorted, distinct).
    pub providers: Vec<String>,
    /// Why there is no plan.
    pub reason: Option<String>,
    /// Whether every selection component was proved optimal.
    pub certified: Option<bool>,
    /// The memory report.
    pub report: Option<ServingReport>,
    /// Wall seconds of synthesis and planning.
    pub plan_seconds: f64,
    /// What a device-set point's placement chose (knob `devices`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<SweepPlacement>,
    /// The predicted times at the grid's serving point, with the rule that priced them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<SweepTime>,
    /// Why a planned row with a serving point has no times (a device without performance
    /// figures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_error: Option<String>,
}

impl SweepRow {
    /// Whether the model capped the point's context (the row's plan is for
    /// [`SweepRow::context_used`] tokens, not `point.context`).
    pub fn capped(&self) -> bool {
        matches!((self.point.context, self.context_used), (Some(asked), Some(used)) if used < asked)
    }
}

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

/// A point's synthesis: its request, the context it has, the device it was synthesized
/// for, and what a device-set point is placed from.
struct PointInputs {
    request: crate::request::PlanRequest,
    context_used: Option<u64>,
    device: crate::synth::DeviceDescription,
    source: ModelSource,
    preset: PolicyPreset,
}

/// The request of a point (its source's policy preset with the point's policy fields set)
/// and the context it has: the preset's, capped by the model's trained context
/// (`Architecture::trained_context`; a sliding window may keep fewer tokens per layer).
/// With a serving point and no `sequences` knob, the preset's sequence ceiling is raised to
/// the concurrency when lower, as `plan --concurrency` raises it.
fn synthesize_point(point: &SweepPoint, base: Option<&Path>) -> Result<PointInputs, StudyError> {
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
    let synthesized = source.synthesize_with_policy(&preset)?;
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
    })
}

/// What planning a prepared point needs: one device's request, or a device set to place
/// the model across.
enum Work {
    /// A request planned on one device.
    Plan {
        request: Box<crate::request::PlanRequest>,
        device: Box<crate::synth::DeviceDescription>,
    },
    /// A device-set point.
    Place {
        source: Box<ModelSource>,
        set: PathBuf,
        preset: Box<PolicyPreset>,
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
    let plan_key = match (&request_hash, &point.devices) {
        // A device-set point is placed on its own (its key covers the set and degrees).
        (Some(request), None) => canonical_fingerprint(
            "sweep plan key",
            &PlanKeyed {
                request,
                settings: &settings,
                serving: point.serving(),
            },
        )
        .map_err(|_| overflow("sweep plan key"))?
        .to_string(),
        _ => key.clone(),
    };
    let (work, context_used) = match synthesized {
        Ok(inputs) => {
            let work = match &point.devices {
                Some(set) => Work::Place {
                    source: Box::new(inputs.source),
                    set: match base {
                        Some(base) => base.join(set),
                        None => PathBuf::from(set),
                    },
                    preset: Box::new(inputs.preset),
                },
                None => Work::Plan {
                    request: Box::new(inputs.request),
                    device: Box::new(inputs.device),
                },
            };
            (Some(work), inputs.context_used)
        }
        Err(_) => (None, None),
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
        Some(Work::Plan { request, device }) => {
            plan_on_device(&mut row, &request, &device, &options)?
        }
        Some(Work::Place {
            source,
            set,
            preset,
        }) => {
            let job = PlacementJob {
                source: &source,
                set,
                preset: *preset,
                tensor_parallel: row.point.tensor_parallel,
                pipeline_parallel: row.point.pipeline_parallel,
                serving: row.point.serving(),
                options: &options,
            };
            match placer.place(&job) {
                PlacementOutcome::Placed { placement, time } => {
                    row.status = "fits".to_owned();
                    row.certified = Some(true);
                    row.placement = Some(placement);
                    match time {
                        Some(Ok(time)) => row.time = Some(time),
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

/// Plans `request` on one device into `row`, priced at the point's serving point.
fn plan_on_device(
    row: &mut SweepRow,
    request: &crate::request::PlanRequest,
    device: &crate::synth::DeviceDescription,
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
                match single_device_time(request, plan, device, terms) {
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

/// One of `count` parts of a grid (`index` from 0): the points from
/// `index * len / count` up to `(index + 1) * len / count`, a contiguous run by point index,
/// so that the shards in index order are the grid in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This shard, from 0.
    pub index: usize,
    /// How many shards the grid is split into.
    pub count: usize,
}

impl Shard {
    /// The points of this shard (an empty run when there are more shards than points).
    pub fn select<'a>(&self, points: &'a [SweepPoint]) -> &'a [SweepPoint] {
        let bound = |i: usize| {
            // i <= count, so i * len / count <= len; the product is taken in u128 so that
            // it cannot overflow.
            let at = (i as u128 * points.len() as u128) / self.count as u128;
            usize::try_from(at).unwrap_or(points.len())
        };
        &points[bound(self.index)..bound(self.index + 1)]
    }
}

impl FromStr for Shard {
    type Err = String;

    /// Parses `I/N` (`0/4` to `3/4`: four shards).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = |detail: &str| {
            format!("{text:?}: {detail}; expected I/N with 0 <= I < N, e.g. 0/4 .. 3/4")
        };
        let (index, count) = text.split_once('/').ok_or_else(|| usage("no '/'"))?;
        let index: usize = index
            .trim()
            .parse()
            .map_err(|_| usage("I is not a number"))?;
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| usage("N is not a number"))?;
        if count == 0 || index >= count {
            return Err(usage("I must be below N"));
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::{Shard, SweepPoint};

    #[test]
    fn shards_cover_every_point_once_in_order_and_differ_by_at_most_one() {
        for len in 0..23usize {
            let points: Vec<SweepPoint> = (0..len)
                .map(|i| SweepPoint {
                    model: i.to_string(),
                    ..SweepPoint::default()
                })
                .collect();
            for count in 1..9usize {
                let parts: Vec<&[SweepPoint]> = (0..count)
                    .map(|index| Shard { index, count }.select(&points))
                    .collect();
                assert_eq!(parts.concat(), points, "{len} points, {count} shards");
                let sizes: Vec<usize> = parts.iter().map(|p| p.len()).collect();
                let (min, max) = (sizes.iter().min(), sizes.iter().max());
                assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{sizes:?}");
            }
        }
    }

    #[test]
    fn a_shard_parses_from_i_over_n() {
        assert_eq!("2/5".parse(), Ok(Shard { index: 2, count: 5 }));
        for bad in ["5/5", "0/0", "2", "x/3", "1/y", "-1/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
