//! Exact why-not (`jointplan explain PLAN --request REQUEST --why-not NODE=PROVIDER`): the
//! selection is solved again with the node pinned to the provider (under the plan's own
//! recorded settings), and the two plans are compared: which objective key gets worse first,
//! by how much, and which nodes and resources change with it. If the pin leaves no plan, the
//! answer is the minimal reason ([`super::infeasible`]).

use serde::Serialize;

use super::diff::{add_time, diff_plans, diff_pricers, GivenPricing, PlanDiff};
use super::infeasible::{analyze, Infeasibility};
use super::objective_keys::{objective_keys, ObjectiveKeys};
use super::ResearchError;
use crate::builder::BuildOptions;
use crate::plan::ExecutionPlan;
use crate::request::{NodeId, PlanRequest, ProviderId};
use crate::selection::Level;

/// The first objective key on which two plans differ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeyChange {
    /// The key (`preferred_in_node_order`, `preferred_count`, `rank_count[k]`, `weighted_score`,
    /// `provider_ids`).
    pub key: String,
    /// Its value in the chosen plan.
    pub chosen: String,
    /// Its value with the pin.
    pub pinned: String,
    /// Whether the pinned plan is worse on this key (false: better, which only a plan accepted
    /// without a proof of optimality allows).
    pub worse: bool,
}

/// What pinning a node to a provider does.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum WhyNot {
    /// The plan already chose the provider.
    AlreadyChosen,
    /// A plan exists with the pin.
    Feasible {
        /// Its plan id.
        plan_id: String,
        /// The objective keys of the chosen plan.
        chosen: Box<ObjectiveKeys>,
        /// The objective keys with the pin.
        pinned: Box<ObjectiveKeys>,
        /// The first key that differs, in the objective's order (none: equal objective).
        first_difference: Option<KeyChange>,
        /// The nodes, resources and memory figures that change, and the time (`diff.time`)
        /// when the plans are priced.
        diff: Box<PlanDiff>,
    },
    /// No plan exists with the pin.
    Infeasible {
        /// Why (its own `status` is `infeasible` too).
        reason: Box<Infeasibility>,
    },
}

/// Answers "why not `provider` at `node`" for `plan`, built from `request`. The two plans
/// are priced at `pricing` when given, else at the serving point the plan recorded (a time
/// objective records one), else not at all.
pub fn why_not(
    request: &PlanRequest,
    plan: &ExecutionPlan,
    node: &NodeId,
    provider: &ProviderId,
    options: &BuildOptions,
    pricing: Option<GivenPricing>,
) -> Result<WhyNot, ResearchError> {
    let Some(planned) = plan.payload.nodes.iter().find(|n| &n.id == node) else {
        return Err(ResearchError::UnknownNode {
            flag: "--why-not",
            node: node.to_string(),
        });
    };
    if &planned.selection.selected_provider == provider {
        return Ok(WhyNot::AlreadyChosen);
    }
    let settings = &plan.payload.selection_settings;
    let base = options
        .with_recorded_settings(settings, || plan.payload.selected_providers())
        .map_err(|e| ResearchError::PlanNotOfRequest {
            detail: format!("payload.selection_settings: {e}"),
        })?;
    let rebuilt = ExecutionPlan::build(request, &base)?;
    if rebuilt.payload.plan_id != plan.payload.plan_id {
        return Err(ResearchError::PlanNotOfRequest {
            detail: format!(
                "the request builds {}, the plan is {} (`jointplan verify` names the first differing field)",
                rebuilt.payload.plan_id, plan.payload.plan_id
            ),
        });
    }
    let mut pinned_options = base.clone();
    pinned_options.replay = None;
    pinned_options.pins.insert(node.clone(), provider.clone());
    if let Some(set) = pinned_options.forbids.get_mut(node) {
        set.remove(provider);
        if set.is_empty() {
            pinned_options.forbids.remove(node);
        }
    }
    let pinned = match ExecutionPlan::build(request, &pinned_options) {
        Ok(p) => p,
        Err(e) if e.kind() == crate::error_kind::ErrorKind::Infeasible => {
            return match analyze(request, &pinned_options)? {
                Some(reason) => Ok(WhyNot::Infeasible {
                    reason: Box::new(reason),
                }),
                None => Err(e.into()),
            };
        }
        Err(e) => return Err(e.into()),
    };
    let chosen_keys = objective_keys(plan, Some(&request.policy));
    let pinned_keys = objective_keys(&pinned, Some(&request.policy));
    let profiles = request.policy.dynamic_storage_profile_order.len();
    let levels = base.selection.objective.levels(profiles);
    let weights = base.selection.objective.weights();
    let first_difference = levels
        .iter()
        .find_map(|level| key_change(*level, weights, &chosen_keys, &pinned_keys));
    let mut diff = diff_plans(plan, &pinned)?;
    if let Some(pricers) = diff_pricers(pricing, plan, &pinned)? {
        add_time(&mut diff, (plan, request), (&pinned, request), &pricers)?;
    }
    Ok(WhyNot::Feasible {
        plan_id: pinned.payload.plan_id.clone(),
        diff: Box::new(diff),
        chosen: Box::new(chosen_keys),
        pinned: Box::new(pinned_keys),
        first_difference,
    })
}

/// The change on one objective level, if the two plans differ there.
fn key_change(
    level: Level,
    weights: Option<&crate::selection::Weights>,
    a: &ObjectiveKeys,
    b: &ObjectiveKeys,
) -> Option<KeyChange> {
    let change = |key: String, chosen: String, pinned: String, worse: bool| {
        Some(KeyChange {
            key,
            chosen,
            pinned,
            worse,
        })
    };
    match level {
        Level::PreferredLex => {
            let i = a
                .preferred_flags
                .iter()
                .zip(&b.preferred_flags)
                .position(|(x, y)| x != y)?;
            let node = &a.providers[i].0;
            let met = |m: bool| if m { "met" } else { "not met" };
            change(
                "preferred_in_node_order".to_owned(),
                format!("{node}: preference {}", met(a.preferred_flags[i])),
                format!("{node}: preference {}", met(b.preferred_flags[i])),
                a.preferred_flags[i],
            )
        }
        Level::PreferredCount => (a.preferred_met != b.preferred_met).then(|| KeyChange {
            key: "preferred_count".to_owned(),
            chosen: a.preferred_met.to_string(),
            pinned: b.preferred_met.to_string(),
            worse: b.preferred_met < a.preferred_met,
        }),
        Level::RankCount(k) => {
            let (x, y) = (a.penalty_by_rank.get(k)?, b.penalty_by_rank.get(k)?);
            (x != y).then(|| KeyChange {
                key: format!("rank_count[{k}]"),
                chosen: format!("{x} resources at rank {k}"),
                pinned: format!("{y} resources at rank {k}"),
                worse: y > x,
            })
        }
        Level::Weighted => {
            let w = weights?;
            let score = |k: &ObjectiveKeys| w.score(k.preferred_met as u64, &k.penalty_by_rank);
            let (x, y) = (score(a), score(b));
            (x != y).then(|| KeyChange {
                key: "weighted_score".to_owned(),
                chosen: x.to_string(),
                pinned: y.to_string(),
                worse: y > x,
            })
        }
        Level::ProviderLex => {
            let i = a
                .providers
                .iter()
                .zip(&b.providers)
                .position(|(x, y)| x.1 != y.1)?;
            let (node, pa) = &a.providers[i];
            let pb = &b.providers[i].1;
            change(
                "provider_ids".to_owned(),
                format!("{node}: {pa}"),
                format!("{node}: {pb}"),
                pb.as_str() > pa.as_str(),
            )
        }
    }
}
