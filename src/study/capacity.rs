//! Capacity infeasibility: the plan does not fit the usable capacity. The core is the
//! capacity check that failed, the largest allocations the planner names, and the policy
//! fields that size them; the relaxations are the nearest value of each numeric policy field
//! for which the request builds, the others unchanged, found by search with the planner as
//! the oracle:
//!
//! - `policy.memory_capacity_bytes` up (the device's memory raised with it when needed),
//!   starting from the shortfall the planner reports; the first plan that builds says what
//!   its checks need (static + minimum runnable dynamic bytes + reserve), which one build
//!   at that value and one a byte below prove (bisection only when they do not);
//! - `policy.memory_reserve_bytes`, `policy.maximum_active_sequences` and
//!   `policy.maximum_scheduled_tokens` down, by bisection between the smallest value and
//!   the request's.
//!
//! A static overflow (the static allocations alone exceed the usable capacity) is answered
//! at once for the sequence and token ceilings (they do not size static allocations) and for
//! a reserve smaller than the shortfall; only the capacity is searched. The plan built by the
//! capacity search also says what the allocations hold ([`Holdings`]: weights, one
//! sequence's KV cache and state, activations, workspaces, the paged alternative), so that
//! the answer can offer every lever with its amount.
//!
//! A value whose request is not even valid (the planner reports bad input, e.g. a token
//! ceiling below the program's token extents) counts as not building.
//!
//! Every probe is a whole build, which takes seconds for a model of tens of thousands of
//! nodes, so the search has a time budget ([`SEARCH_BUDGET`]): a field whose search the
//! budget cuts short is listed as unsearched rather than reported with a wrong value, and
//! the refusal itself (the core) never waits on it.

use std::time::{Duration, Instant};

use super::infeasible::{Fact, Holdings, Infeasibility, Relaxation};
use super::ResearchError;
use crate::builder::error::PlanError;
use crate::builder::BuildOptions;
use crate::memory::{Contributor, MemoryError};
use crate::plan::ExecutionPlan;
use crate::request::PlanRequest;

/// A numeric policy field the search may move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Capacity,
    Reserve,
    Sequences,
    Tokens,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Capacity => "policy.memory_capacity_bytes",
            Field::Reserve => "policy.memory_reserve_bytes",
            Field::Sequences => "policy.maximum_active_sequences",
            Field::Tokens => "policy.maximum_scheduled_tokens",
        }
    }

    fn value(self, request: &PlanRequest) -> u64 {
        let p = &request.policy;
        match self {
            Field::Capacity => p.memory_capacity_bytes,
            Field::Reserve => p.memory_reserve_bytes,
            Field::Sequences => u64::from(p.maximum_active_sequences),
            Field::Tokens => p.maximum_scheduled_tokens,
        }
    }

    /// The request with this field at `value` (`None` if the value cannot be written).
    fn with(self, request: &PlanRequest, value: u64) -> Option<PlanRequest> {
        let mut r = request.clone();
        let p = &mut r.policy;
        match self {
            Field::Capacity => {
                p.memory_capacity_bytes = value;
                let device = &mut r.catalog.device.total_memory_bytes;
                *device = (*device).max(value);
            }
            Field::Reserve => p.memory_reserve_bytes = value,
            Field::Sequences => p.maximum_active_sequences = u32::try_from(value).ok()?,
            Field::Tokens => p.maximum_scheduled_tokens = value,
        }
        Some(r)
    }
}

/// How long the relaxation search may take in all (probes already running finish).
pub const SEARCH_BUDGET: Duration = Duration::from_secs(20);

/// The search's time budget ran out before a field's answer was found.
struct OutOfBudget;

/// A probe's answer: builds or not, or the budget is spent.
type Probe<T> = Result<Result<T, OutOfBudget>, ResearchError>;

/// The plan of `request` with `field` at `value`, if it builds (the oracle), with the
/// request it was built from.
fn plan_with(
    request: &PlanRequest,
    options: &BuildOptions,
    deadline: Instant,
    field: Field,
    value: u64,
) -> Probe<Option<(PlanRequest, ExecutionPlan)>> {
    if Instant::now() >= deadline {
        return Ok(Err(OutOfBudget));
    }
    let Some(changed) = field.with(request, value) else {
        return Ok(Ok(None));
    };
    match ExecutionPlan::build(&changed, options) {
        Ok(plan) => Ok(Ok(Some((changed, plan)))),
        Err(e)
            if e.kind() == crate::error_kind::ErrorKind::Infeasible
                || e.kind() == crate::error_kind::ErrorKind::BadInput =>
        {
            Ok(Ok(None))
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether `request` with `field` at `value` builds (the oracle).
fn builds(
    request: &PlanRequest,
    options: &BuildOptions,
    deadline: Instant,
    field: Field,
    value: u64,
) -> Probe<bool> {
    Ok(plan_with(request, options, deadline, field, value)?.map(|built| built.is_some()))
}

/// `builds`, with the budget's end passed up by `?` on the outer result.
macro_rules! probe {
    ($request:expr, $options:expr, $deadline:expr, $field:expr, $value:expr) => {
        match builds($request, $options, $deadline, $field, $value)? {
            Ok(answer) => answer,
            Err(out) => return Ok(Err(out)),
        }
    };
}

/// The largest value in `[low, high)` that builds (`high` does not), or `None`.
fn largest_building(
    request: &PlanRequest,
    options: &BuildOptions,
    deadline: Instant,
    field: Field,
    low: u64,
    high: u64,
) -> Probe<Option<u64>> {
    if low >= high || !probe!(request, options, deadline, field, low) {
        return Ok(Ok(None));
    }
    let (mut good, mut bad) = (low, high);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if probe!(request, options, deadline, field, mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Ok(Ok(Some(good)))
}

/// The smallest capacity above the request's that builds, and what the plan built on the
/// way holds. The search starts from `current + step` and doubles the step until a
/// plan builds; that plan says what its checks need (static + minimum runnable dynamic
/// bytes + the reserve), which is probed next, then proved by one build below it; only when
/// that proof fails is the rest found by bisection.
fn smallest_capacity(
    request: &PlanRequest,
    options: &BuildOptions,
    deadline: Instant,
    step: u64,
) -> Probe<Option<(u64, Option<Holdings>)>> {
    let current = Field::Capacity.value(request);
    let mut step = step.max(1);
    let mut found = None;
    for _ in 0..64 {
        let Some(candidate) = current.checked_add(step) else {
            break;
        };
        match plan_with(request, options, deadline, Field::Capacity, candidate)? {
            Err(out) => return Ok(Err(out)),
            Ok(Some(built)) => {
                found = Some((candidate, built));
                break;
            }
            Ok(None) => {}
        }
        step = match step.checked_mul(2) {
            Some(s) => s,
            None => break,
        };
    }
    let Some((mut good, (built_request, plan))) = found else {
        return Ok(Ok(None));
    };
    let holdings = Holdings::of(&built_request, &plan, good);
    let memory = &plan.payload.memory;
    let needed = memory
        .static_bytes
        .checked_add(memory.minimum_runnable_request_bytes)
        .and_then(|bytes| bytes.checked_add(request.policy.memory_reserve_bytes));
    if let Some(needed) = needed.filter(|&n| n > current && n < good) {
        if probe!(request, options, deadline, Field::Capacity, needed) {
            good = needed;
        }
    }
    // Usually the figure is exact: one more build proves it.
    if !probe!(request, options, deadline, Field::Capacity, good - 1) {
        return Ok(Ok(Some((good, holdings))));
    }
    let mut bad = current;
    while good - bad > 1 {
        let mid = bad + (good - bad) / 2;
        if probe!(request, options, deadline, Field::Capacity, mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Ok(Ok(Some((good, holdings))))
}

/// The largest allocations the planner names, as facts.
fn allocation_facts(contributors: &[Contributor]) -> impl Iterator<Item = Fact> + '_ {
    contributors.iter().map(|c| Fact::Allocation {
        resource: c.resource_id.to_string(),
        what: c.what.clone(),
        bytes: c.bytes,
    })
}

fn gib(bytes: u64) -> String {
    format!(
        "{:.2} GiB ({bytes} bytes)",
        bytes as f64 / (1u64 << 30) as f64
    )
}

/// The capacity explanation of `error` (a capacity failure of `request`).
pub fn capacity_infeasibility(
    request: &PlanRequest,
    options: &BuildOptions,
    error: &PlanError,
) -> Result<Option<Infeasibility>, ResearchError> {
    capacity_infeasibility_within(request, options, error, SEARCH_BUDGET)
}

/// [`capacity_infeasibility`] with the search's time budget given.
pub fn capacity_infeasibility_within(
    request: &PlanRequest,
    options: &BuildOptions,
    error: &PlanError,
    budget: Duration,
) -> Result<Option<Infeasibility>, ResearchError> {
    let mut core = Vec::new();
    let mut shortfall = 1u64;
    match error {
        PlanError::Memory(MemoryError::CapacityExceeded {
            required,
            usable,
            contributors,
            ..
        }) => {
            core.push(Fact::Capacity {
                usable_bytes: *usable,
                required_bytes: *required,
                check: "static bytes + minimum runnable dynamic bytes <= usable capacity"
                    .to_owned(),
            });
            shortfall =
                u64::try_from(required.saturating_sub(u128::from(*usable))).unwrap_or(u64::MAX);
            core.extend(allocation_facts(contributors));
        }
        PlanError::Memory(MemoryError::StaticExceedsUsable {
            static_bytes,
            usable,
            contributors,
        }) => {
            core.push(Fact::Capacity {
                usable_bytes: *usable,
                required_bytes: u128::from(*static_bytes),
                check: "static bytes <= usable capacity".to_owned(),
            });
            shortfall = static_bytes.saturating_sub(*usable);
            core.extend(allocation_facts(contributors));
        }
        PlanError::Memory(MemoryError::PoolExceedsDynamicCapacity {
            pool,
            minimum_resident,
            dynamic_capacity,
            ..
        }) => {
            core.push(Fact::Capacity {
                usable_bytes: *dynamic_capacity,
                required_bytes: u128::from(*minimum_resident),
                check: format!("pool {pool}: minimum resident bytes <= dynamic capacity"),
            });
            shortfall = minimum_resident.saturating_sub(*dynamic_capacity);
        }
        _ => {}
    }
    let mut relaxations = Vec::new();
    let mut unsearched = Vec::new();
    let mut notes = Vec::new();
    let mut holdings = None;
    let deadline = Instant::now() + budget;
    // Static bytes (plan-lifetime values such as weights, fixed persistent workspaces) do
    // not move with the sequence or token ceilings, and lowering the reserve raises the
    // usable capacity by at most the reserve: a static overflow is answered without
    // building a plan for those fields.
    let static_overflow = matches!(
        error,
        PlanError::Memory(MemoryError::StaticExceedsUsable { .. })
    );
    if static_overflow {
        let capacity = Field::Capacity.value(request);
        notes.push(format!(
            "the static allocations alone exceed the usable capacity by {}: the sequence and \
             token ceilings do not size them, so only more capacity{} can make it fit; \
             {} must be at least {} for the static bytes alone, and the dynamic bytes need \
             more",
            gib(shortfall),
            if request.policy.memory_reserve_bytes >= shortfall {
                " or a smaller reserve"
            } else {
                ""
            },
            Field::Capacity.name(),
            capacity
                .checked_add(shortfall)
                .map_or_else(|| "more than 2^64 bytes".to_owned(), gib)
        ));
    }
    for field in [
        Field::Capacity,
        Field::Reserve,
        Field::Sequences,
        Field::Tokens,
    ] {
        let from = field.value(request);
        let cannot_help = static_overflow
            && match field {
                Field::Capacity => false,
                Field::Reserve => from < shortfall,
                Field::Sequences | Field::Tokens => true,
            };
        if cannot_help {
            if field == Field::Reserve {
                core.push(Fact::PolicyField {
                    field: field.name().to_owned(),
                    value: from,
                });
            }
            continue;
        }
        let searched = match field {
            Field::Capacity => match smallest_capacity(request, options, deadline, shortfall)? {
                Ok(Some((to, held))) => {
                    holdings = held;
                    Ok(Some(to))
                }
                Ok(None) => Ok(None),
                Err(out) => Err(out),
            },
            Field::Reserve => largest_building(request, options, deadline, field, 0, from)?,
            Field::Sequences | Field::Tokens => {
                largest_building(request, options, deadline, field, 1, from)?
            }
        };
        let Ok(to) = searched else {
            unsearched.push(field.name().to_owned());
            core.push(Fact::PolicyField {
                field: field.name().to_owned(),
                value: from,
            });
            continue;
        };
        // The capacity fields always size the check; the others only when moving them helps.
        if to.is_some() || matches!(field, Field::Capacity | Field::Reserve) {
            core.push(Fact::PolicyField {
                field: field.name().to_owned(),
                value: from,
            });
        }
        let Some(to) = to else { continue };
        let text = match field {
            Field::Capacity => format!(
                "needs {} more capacity: raise {} from {} to {}{}",
                gib(to - from),
                field.name(),
                gib(from),
                gib(to),
                if to > request.catalog.device.total_memory_bytes {
                    " (a device with at least that much memory)"
                } else {
                    ""
                }
            ),
            Field::Reserve => format!("lower {} from {} to {}", field.name(), gib(from), gib(to)),
            Field::Sequences => format!("cap {} at {to} (from {from})", field.name()),
            Field::Tokens => format!("cap {} at {to} tokens (from {from})", field.name()),
        };
        relaxations.push(Relaxation {
            field: field.name().to_owned(),
            from,
            to,
            text,
        });
    }
    Ok(Some(Infeasibility {
        unsearched,
        notes,
        holdings,
        next_device: None,
        status: "infeasible",
        kind: "capacity",
        error: error.to_string(),
        core,
        relaxations,
    }))
}
