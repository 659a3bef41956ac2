//! Cartesian sweeps over the knobs a placement researcher varies: model folder, device
//! file, policy preset and its fields, storage-view order, weight format, layers, experts,
//! and, for time, device sets with their parallel degrees, the serving point (concurrency,
//! input and output tokens; [`super::sweep_time`]) and the serving engine (`engine`: its
//! memory rules set a single-device plan's budget as `plan --engine` sets it, and its time
//! profile prices the serving point).
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

use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::engine::{EngineChoice, EngineError};
use crate::synth::policy::ViewKind;

use super::budget::Budget;
use super::report::ServingReport;
use super::sweep_time::{ServingTerms, SweepPlacement, SweepTime};
use super::StudyError;

pub use super::sweep_run::{
    plan_batch, plan_point, prepare_point, prepare_point_in, run_points, PolicyFields,
    PreparedPoint,
};

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
    /// Serving engines, as `plan --engine` spells them (`vllm`, `vllm@0.6`, `sglang`,
    /// `trtllm`, `llama.cpp`): a single-device point is planned as `plan MODEL --engine E`
    /// plans it (the engine's memory rules set the plan's budget) and priced with the
    /// engine's time profile; a device-set point is placed as `plan --devices SET.json
    /// --engine E --tensor-parallel N` places it (the engine's degree, its budget on every
    /// device; docs/placement.md, "Serving engines across devices").
    #[serde(default)]
    pub engine: Vec<String>,
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
    /// Serving engine (`NAME[@VERSION]`); absent, the point is planned without an engine's
    /// rules and priced with the default time profile (vLLM's), as `plan` without
    /// `--engine` does. Skipped when absent, so that a point without it keeps its key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

/// The knobs of a point, by name, in column order (the device-set, serving-point and
/// engine knobs last, so that a grid without them keeps its columns' order).
pub const KNOBS: [&str; 18] = [
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
    "engine",
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
            "engine" => text(&self.engine),
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
/// short values, the status, the context used where the model capped it, the tokens of KV
/// cache that fit, the serving point's times, and the wall time.
pub fn progress_line(row: &SweepRow, finished: usize, total: usize, varying: &[&str]) -> String {
    let percent = (finished * 100).checked_div(total).unwrap_or(100);
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
    let tokens = match row.report.as_ref().and_then(|r| r.tokens_that_fit) {
        Some(tokens) => format!(", {tokens} KV tokens fit"),
        None => String::new(),
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
        "sweep: {finished}/{total} ({percent}%) {}: {}{capped}{tokens}{time}{reason}, {:.2} s",
        knobs.join(" "),
        row.status,
        row.plan_seconds
    )
}

/// An engine value as `plan --engine` takes it (`NAME[@VERSION]`): the engine and version
/// whose memory rules apply, and the name of its time profile; or what is wrong with it,
/// with every accepted spelling.
pub fn parse_engine(value: &str) -> Result<(EngineChoice, &'static str), String> {
    let problem = match value.parse::<EngineChoice>() {
        Err(EngineError::UnknownVersion { engine, known, .. }) => {
            format!("{engine} has no modelled version of this name; its versions: {known}")
        }
        Err(_) => "unknown engine".to_owned(),
        Ok(choice) => match super::engine_facts::time_profile_name(value) {
            Some(profile) => return Ok((choice, profile)),
            None => "no time profile has this name".to_owned(),
        },
    };
    Err(format!(
        "{value:?} is not an engine as `plan --engine` takes it ({problem}); accepted: {}",
        super::engine_facts::accepted_engines()
    ))
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
        self.check_engines()?;
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
        let engines = axis(&self.engine);
        expand(&|p, i| p.engine = engines[i].clone(), engines.len());
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

    /// Every `engine` value names an engine and a modelled version, as `plan --engine`
    /// takes it; a bad one is refused before any point is planned.
    fn check_engines(&self) -> Result<(), StudyError> {
        for (index, value) in self.engine.iter().enumerate() {
            parse_engine(value).map_err(|message| StudyError::Settings {
                path: format!("grid.engine[{index}]"),
                message,
            })?;
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
            self.engine.len(),
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
    /// The budget the point's engine gave the plan (capacity, reserve and the engine's
    /// rule), where the point names an engine and is planned on one device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_budget: Option<Budget>,
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
