//! A semantic comparison of two plans of one program (`jointplan diff`): the nodes whose
//! provider changed, grouped by pattern; the resources whose storage profile changed; the
//! objective keys of both sides; and the memory figures of both sides with their deltas.
//!
//! Priced at a serving point ([`add_time`]), the comparison also says what each plan's
//! TTFT, TPOT and throughput are and the prefill and decode-step time each provider change
//! adds or saves ([`super::timing`]).
//!
//! Two plans are comparable when their programs have the same nodes in the same order; a
//! different node list is refused. `programs_equal` says whether the program fingerprints
//! are equal too (they differ when only shapes differ, e.g. another context length).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::objective_keys::{objective_keys, resource_profiles, ObjectiveKeys};
use super::report::ServingReport;
use super::timing::{
    change_time, node_times, time_diff, ChangeTime, Load, NodeTime, Pricer, TimeDiff,
};
use super::ResearchError;
use crate::plan::ExecutionPlan;
use crate::request::fingerprints::program_fingerprint;
use crate::request::{NodeId, PlanRequest, ProviderId, ResourceId};

/// One node whose provider differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeChange {
    /// The node.
    pub node: NodeId,
    /// Its provider in plan A.
    pub a: ProviderId,
    /// Its provider in plan B.
    pub b: ProviderId,
}

/// A provider change shared by several nodes (`a -> b: count`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChangePattern {
    /// The provider in plan A.
    pub a: ProviderId,
    /// The provider in plan B.
    pub b: ProviderId,
    /// How many nodes change this way.
    pub count: usize,
    /// The nodes, in node order (printed in the text form, not in the JSON).
    #[serde(skip)]
    pub nodes: Vec<NodeId>,
    /// The time the change adds (B - A), when the plans are priced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<ChangeTime>,
    /// Each node's share of it, in the order of `nodes` (printed per id pattern in the text
    /// form; empty when not priced, or priced with a calibration).
    #[serde(skip)]
    pub node_times: Vec<NodeTime>,
}

/// One resource whose storage profile differs (absent on a side that lacks the resource).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProfileChange {
    /// The resource.
    pub resource: ResourceId,
    /// Its profile in plan A.
    pub a: Option<String>,
    /// Its profile in plan B.
    pub b: Option<String>,
}

/// A value on both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sides<T> {
    /// Plan A's.
    pub a: T,
    /// Plan B's.
    pub b: T,
}

/// A memory figure on both sides and `b - a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryDelta {
    /// Plan A's bytes.
    pub a: i64,
    /// Plan B's bytes.
    pub b: i64,
    /// `b - a`.
    pub delta: i64,
}

/// The comparison of two plans.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanDiff {
    /// Whether the two program fingerprints are equal.
    pub programs_equal: bool,
    /// Nodes whose provider differs, in node order.
    pub nodes_changed: Vec<NodeChange>,
    /// The changes grouped by (a, b), most frequent first, then by provider ids.
    pub patterns: Vec<ChangePattern>,
    /// Resources whose profile differs, by resource id.
    pub profiles_changed: Vec<ProfileChange>,
    /// The objective keys of both plans.
    pub objective: Sides<ObjectiveKeys>,
    /// Memory figures by name, with both values and the delta.
    pub memory: BTreeMap<String, MemoryDelta>,
    /// Both plans' time at a serving point, when they are priced ([`add_time`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<TimeDiff>,
}

impl PlanDiff {
    /// Whether the plans choose the same providers and profiles and have the same memory
    /// figures.
    pub fn is_empty(&self) -> bool {
        self.nodes_changed.is_empty()
            && self.profiles_changed.is_empty()
            && self.memory.values().all(|m| m.delta == 0)
    }
}

/// [`diff_plans`], with the memory report of each plan ([`ServingReport`]) among the memory
/// figures, as `report.<item>`: the report needs the program of the plan's request (its
/// states), so each plan comes with the request it was built from.
pub fn diff_plans_with_reports(
    (a, request_a): (&ExecutionPlan, &PlanRequest),
    (b, request_b): (&ExecutionPlan, &PlanRequest),
) -> Result<PlanDiff, ResearchError> {
    let mut diff = diff_plans(a, b)?;
    let (ra, rb) = (report_figures(a, request_a)?, report_figures(b, request_b)?);
    merge_figures(&mut diff.memory, &ra, &rb)?;
    Ok(diff)
}

/// `plan` was built from `request`'s program (same program fingerprint), else
/// [`ResearchError::PlanNotOfRequest`] with `detail()`.
fn ensure_plan_of_request(
    plan: &ExecutionPlan,
    request: &PlanRequest,
    detail: impl FnOnce() -> String,
) -> Result<(), ResearchError> {
    let program = program_fingerprint(&request.family.program).map_err(|e| {
        ResearchError::PlanNotOfRequest {
            detail: e.to_string(),
        }
    })?;
    if program != plan.payload.program_fingerprint {
        return Err(ResearchError::PlanNotOfRequest { detail: detail() });
    }
    Ok(())
}

/// The report items of a plan as figures (`worst_case_fits` as 1 or 0; an item without a
/// bound, such as sequences that fit without per-sequence state, is left out).
fn report_figures(
    plan: &ExecutionPlan,
    request: &PlanRequest,
) -> Result<BTreeMap<String, i64>, ResearchError> {
    ensure_plan_of_request(plan, request, || {
        format!(
            "plan {} is of another program than the request",
            plan.payload.plan_id
        )
    })?;
    let report = ServingReport::of(request, plan).map_err(|e| ResearchError::Report {
        detail: e.to_string(),
    })?;
    let mut figures = BTreeMap::new();
    let mut put = |name: &str, bytes: Option<u64>| -> Result<(), ResearchError> {
        if let Some(bytes) = bytes {
            figures.insert(format!("report.{name}"), signed(name, bytes)?);
        }
        Ok(())
    };
    put("weights_bytes", Some(report.weights_bytes))?;
    put("kv_bytes_per_token", Some(report.kv_bytes_per_token))?;
    put("kv_bytes_per_sequence", Some(report.kv_bytes_per_sequence))?;
    put("activation_bytes", Some(report.activation_bytes))?;
    put("workspace_bytes", Some(report.workspace_bytes))?;
    put("reserve_bytes", Some(report.reserve_bytes))?;
    put("tokens_that_fit", report.tokens_that_fit)?;
    put("sequences_that_fit", report.sequences_that_fit)?;
    put("worst_case_fits", Some(u64::from(report.worst_case_fits)))?;
    let headroom = i64::try_from(report.headroom_bytes).map_err(|_| ResearchError::Overflow {
        what: "report.headroom_bytes".to_owned(),
    })?;
    figures.insert("report.headroom_bytes".to_owned(), headroom);
    Ok(figures)
}

/// Adds the figures of both sides to `memory`, with their deltas (0 for a side without one).
fn merge_figures(
    memory: &mut BTreeMap<String, MemoryDelta>,
    ma: &BTreeMap<String, i64>,
    mb: &BTreeMap<String, i64>,
) -> Result<(), ResearchError> {
    let names: BTreeSet<&String> = ma.keys().chain(mb.keys()).collect();
    for name in names {
        let x = ma.get(name).copied().unwrap_or(0);
        let y = mb.get(name).copied().unwrap_or(0);
        let delta = y.checked_sub(x).ok_or_else(|| ResearchError::Overflow {
            what: format!("the delta of {name}"),
        })?;
        memory.insert(name.clone(), MemoryDelta { a: x, b: y, delta });
    }
    Ok(())
}

/// Compares plan `a` with plan `b` (refused when their node lists differ).
pub fn diff_plans(a: &ExecutionPlan, b: &ExecutionPlan) -> Result<PlanDiff, ResearchError> {
    let (na, nb) = (&a.payload.nodes, &b.payload.nodes);
    if let Some(i) =
        (0..na.len().max(nb.len())).find(|&i| na.get(i).map(|n| &n.id) != nb.get(i).map(|n| &n.id))
    {
        let id = |n: Option<&crate::plan::PlanNode>| {
            n.map_or_else(|| "no node".to_owned(), |n| n.id.to_string())
        };
        return Err(ResearchError::DifferentPrograms {
            detail: format!(
                "node {i} is {} in A and {} in B; A has {} nodes, B {}",
                id(na.get(i)),
                id(nb.get(i)),
                na.len(),
                nb.len()
            ),
        });
    }
    let nodes_changed: Vec<NodeChange> = na
        .iter()
        .zip(nb)
        .filter(|(x, y)| x.selection.selected_provider != y.selection.selected_provider)
        .map(|(x, y)| NodeChange {
            node: x.id.clone(),
            a: x.selection.selected_provider.clone(),
            b: y.selection.selected_provider.clone(),
        })
        .collect();
    let mut grouped: BTreeMap<(&ProviderId, &ProviderId), Vec<NodeId>> = BTreeMap::new();
    for change in &nodes_changed {
        grouped
            .entry((&change.a, &change.b))
            .or_default()
            .push(change.node.clone());
    }
    let mut patterns: Vec<ChangePattern> = grouped
        .into_iter()
        .map(|((pa, pb), nodes)| ChangePattern {
            a: pa.clone(),
            b: pb.clone(),
            count: nodes.len(),
            nodes,
            time: None,
            node_times: Vec::new(),
        })
        .collect();
    patterns.sort_by(|x, y| {
        y.count
            .cmp(&x.count)
            .then_with(|| (&x.a, &x.b).cmp(&(&y.a, &y.b)))
    });
    let (pa, pb) = (resource_profiles(a), resource_profiles(b));
    let resources: BTreeSet<&ResourceId> = pa.keys().chain(pb.keys()).copied().collect();
    let profiles_changed = resources
        .into_iter()
        .filter(|r| pa.get(r) != pb.get(r))
        .map(|r| ProfileChange {
            resource: r.clone(),
            a: pa.get(r).cloned(),
            b: pb.get(r).cloned(),
        })
        .collect();
    let mut memory = BTreeMap::new();
    merge_figures(&mut memory, &memory_figures(a)?, &memory_figures(b)?)?;
    Ok(PlanDiff {
        programs_equal: a.payload.program_fingerprint == b.payload.program_fingerprint,
        nodes_changed,
        patterns,
        profiles_changed,
        objective: Sides {
            a: objective_keys(a, None),
            b: objective_keys(b, None),
        },
        memory,
        time: None,
    })
}

/// Where the serving points of a priced diff come from.
#[derive(Clone, Debug)]
pub struct DiffPricers {
    /// Prices plan A.
    pub a: Pricer,
    /// Prices plan B.
    pub b: Pricer,
    /// Where they come from, for people.
    pub source: String,
}

/// The pricers of two plans: `given` for both when there is one (its device figures, or
/// those a plan recorded when it has none: `load`), else the serving points the plans
/// recorded (a time objective records its point and device figures), each its own, or the
/// one that records one for both; `None` when nothing prices them.
pub fn diff_pricers(
    given: Option<GivenPricing>,
    a: &ExecutionPlan,
    b: &ExecutionPlan,
) -> Result<Option<DiffPricers>, ResearchError> {
    let recorded = |p: &ExecutionPlan| -> Result<Option<Pricer>, ResearchError> {
        p.payload
            .selection_settings
            .serving
            .as_ref()
            .map(Pricer::recorded)
            .transpose()
            .map_err(ResearchError::from)
    };
    let (ra, rb) = (recorded(a)?, recorded(b)?);
    if let Some(given) = given {
        let pricer = match given {
            GivenPricing::Pricer(pricer) => *pricer,
            GivenPricing::Load { load, calibration } => {
                let Some(figures_from) = ra.as_ref().or(rb.as_ref()) else {
                    return Err(ResearchError::Perf(crate::perf::PerfError::ServingPoint {
                        flag: "--performance-device".to_owned(),
                        message: "neither plan records device figures: give --performance-device DEVICE.json (a device file with performance figures, e.g. models/devices/h100-sxm-80gb.json)".to_owned(),
                    }));
                };
                Pricer::new(
                    load,
                    &figures_from.device,
                    figures_from.figures.clone(),
                    calibration,
                )?
            }
        };
        return Ok(Some(DiffPricers {
            a: pricer.clone(),
            b: pricer,
            source: "the serving point given".to_owned(),
        }));
    }
    Ok(match (ra, rb) {
        (Some(a), Some(b)) => Some(DiffPricers {
            a,
            b,
            source: "each plan's recorded serving point".to_owned(),
        }),
        (Some(a), None) => Some(DiffPricers {
            b: a.clone(),
            a,
            source: "plan A's recorded serving point (B records none)".to_owned(),
        }),
        (None, Some(b)) => Some(DiffPricers {
            a: b.clone(),
            b,
            source: "plan B's recorded serving point (A records none)".to_owned(),
        }),
        (None, None) => None,
    })
}

/// A serving point given for a diff: a full pricer, or a load priced with the device
/// figures a plan recorded.
#[derive(Clone, Debug)]
pub enum GivenPricing {
    /// Prices both plans.
    Pricer(Box<Pricer>),
    /// A load; the device figures are those a plan recorded.
    Load {
        /// The load.
        load: Load,
        /// Measured kernel times, if any.
        calibration: crate::perf::Calibration,
    },
}

/// Adds both plans' time at their serving points to `diff` (of `a` and `b`, built from
/// `request_a` and `request_b`), and each provider change's time, priced on A's request at
/// A's point.
pub fn add_time(
    diff: &mut PlanDiff,
    (a, request_a): (&ExecutionPlan, &PlanRequest),
    (b, request_b): (&ExecutionPlan, &PlanRequest),
    pricers: &DiffPricers,
) -> Result<(), ResearchError> {
    for (plan, request, side) in [(a, request_a, "A"), (b, request_b, "B")] {
        ensure_plan_of_request(plan, request, || {
            format!(
                "plan {side} ({}) is of another program than its request",
                plan.payload.plan_id
            )
        })?;
    }
    let pa = pricers.a.price(request_a, a)?;
    let pb = pricers.b.price(request_b, b)?;
    let (mut prefill, mut decode) = (0.0, 0.0);
    for pattern in &mut diff.patterns {
        let t = change_time(
            &pricers.a,
            request_a,
            a,
            &pattern.nodes,
            &pattern.a,
            &pattern.b,
        )?;
        prefill += t.prefill_seconds;
        decode += t.decode_step_seconds;
        pattern.time = Some(t);
        pattern.node_times = node_times(
            &pricers.a,
            request_a,
            &pattern.nodes,
            &pattern.a,
            &pattern.b,
        )?
        .unwrap_or_default();
    }
    diff.time = Some(time_diff(
        (&pa, &pricers.a, request_a),
        (&pb, &pricers.b, request_b),
        diff.programs_equal,
        (prefill, decode),
        pricers.source.clone(),
    ));
    Ok(())
}

fn signed(what: &str, bytes: u64) -> Result<i64, ResearchError> {
    i64::try_from(bytes).map_err(|_| ResearchError::Overflow {
        what: what.to_owned(),
    })
}

/// The memory figures of a plan, in bytes: its totals (static, minimum runnable, usable
/// capacity, reserve, spare = usable − static − minimum runnable) and, per pool kind
/// (what the pool holds: activations, state, scratch, binding, persistent), the sums of the
/// pools' resident minima and maxima.
pub fn memory_figures(plan: &ExecutionPlan) -> Result<BTreeMap<String, i64>, ResearchError> {
    let m = &plan.payload.memory;
    let mut figures = BTreeMap::new();
    for (name, bytes) in [
        ("static_bytes", m.static_bytes),
        (
            "minimum_runnable_request_bytes",
            m.minimum_runnable_request_bytes,
        ),
        ("usable_capacity_bytes", m.usable_capacity_bytes),
        ("reserve_bytes", m.reserve_bytes),
    ] {
        figures.insert(name.to_owned(), signed(name, bytes)?);
    }
    // Spare at the minimum load (not the report's `headroom_bytes`, room for sequences at
    // the ceilings).
    let spare = figures["usable_capacity_bytes"]
        .checked_sub(figures["static_bytes"])
        .and_then(|h| h.checked_sub(figures["minimum_runnable_request_bytes"]))
        .ok_or_else(|| ResearchError::Overflow {
            what: "spare_bytes".to_owned(),
        })?;
    figures.insert("spare_bytes".to_owned(), spare);
    for pool in &m.dynamic_pools {
        let kind = serde_json::to_value(pool.compatibility.usage)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("{:?}", pool.compatibility.usage));
        for (bound, bytes) in [
            (
                "minimum_resident_bytes",
                pool.provisioning.minimum_resident_bytes,
            ),
            (
                "maximum_resident_bytes",
                pool.provisioning.maximum_resident_bytes,
            ),
        ] {
            let name = format!("pools.{kind}.{bound}");
            let bytes = signed(&name, bytes)?;
            let slot = figures.entry(name.clone()).or_insert(0);
            *slot = slot
                .checked_add(bytes)
                .ok_or(ResearchError::Overflow { what: name })?;
        }
    }
    Ok(figures)
}
