//! The independent plan checker.
//!
//! `check` decides whether a stored execution plan is *valid*, from the plan alone, without
//! calling any code of the builder: it imports only the plan's and the request's data types
//! and the canonical hashing (`tests/planner/checker_boundary.rs` enforces this). Each
//! property is re-derived by the simplest algorithm that is obviously right (sums, sweeps
//! over the nodes in order, pairwise comparisons), even where the builder uses a faster one,
//! so that a bug in the builder's derivation is not repeated here. Like regalloc2's checker
//! beside its allocator, it runs on every plan `jointplan plan` builds and on every plan
//! `jointplan verify` reads, and alone as `jointplan check PLAN.json`.
//!
//! A plan is valid when all of the following hold (`docs/checker.md` states each in full;
//! a violation names its rule and the JSON path of the culprit):
//!
//! 1. **Schema.** `payload.schema` is the schema this version writes.
//! 2. **Identity.** `plan_hash` is the canonical SHA-256 of the payload (its `plan_id`
//!    excluded) and `plan_id` is `plan/sha256/` followed by it.
//! 3. **Nodes.** There is at least one node, node ids are unique, and
//!    `maximum_scheduled_tokens` is not zero.
//! 4. **Dependencies.** Each node's dependencies are strictly ascending by id, never the node
//!    itself, and each names a node that runs earlier.
//! 5. **Selection evidence.** The estimate's provider is the selected provider; rejected
//!    providers are strictly ascending, never the selected one, storage rejections name a
//!    non-empty ascending resource list; the reason agrees with the request: no requested
//!    provider ⇒ `canonical_compatible`, requested = selected ⇒ `preferred_compatible`,
//!    otherwise `fallback_from_preferred` with evidence for the requested provider.
//! 6. **Node resources.** A node's `resources` are exactly the sorted, unique resources of
//!    its bindings' storage components and of its workspaces, and each is exactly one memory
//!    row (a static allocation or a dynamic descriptor).
//! 7. **No orphan rows.** Every static allocation and dynamic descriptor is a resource of
//!    some node.
//! 8. **Work contract.** A token contract's projections are non-empty, strictly ascending,
//!    contain the source, share the source's extent, and each matches a binding of the node
//!    (value, role, ordinal) whose tensor has that rank and that extent on that axis.
//! 9. **State effects.** Effects are strictly ascending by state; each names a state value
//!    the node binds, its resources are the sorted, unique component resources of those
//!    bindings, its access is the union of their accesses, its lifetime is request,
//!    sequence or step, and each resource is a dynamic descriptor of that lifetime.
//! 10. **Dependencies.** A node depends directly on exactly these nodes: the producer of
//!     every value it binds as an input, and, for each state it uses (in execution order),
//!     the state's last writer and, if it writes the state, every node that read it since.
//! 11. **Workspaces.** A node has a scratch, binding or persistent workspace resource exactly
//!     when its estimate asks for one. Scratch and binding workspaces are invocation-lifetime
//!     dynamic descriptors whose demand is the estimate's formula bound to the plan's
//!     sequence and token ceilings; a persistent workspace of plan scope is a static
//!     allocation of the formula's fixed bytes, of any other scope a dynamic descriptor of
//!     that lifetime. Alignment, usage and kind (with the node id) match, and the row is
//!     opaque bytes: element type u8, layout fingerprint the canonical hash of
//!     `"opaque_bytes_v1"`.
//! 12. **Exact aliases.** A node's aliases are strictly ascending by output ordinal; each
//!     joins an output binding to an input binding of the node that are both activations,
//!     with identical storage, and whose alias policy names that input.
//! 13. **One value, one placement.** Every binding of a value, in every node, has the same
//!     tensor and the same storage.
//! 14. **No undeclared overlap.** Two different values whose storage components share a byte
//!     of a resource belong to one class of exact aliases and have identical storage.
//! 15. **Capacity fields.** Device capacity is positive; the policy capacity is positive and
//!     at most the device's; the reserve is below it; usable = policy − reserve; the
//!     sequence ceiling is positive.
//! 16. **Row order.** Static allocations, dynamic descriptors and pools are strictly
//!     ascending by id, and no resource is both static and dynamic.
//! 17. **Static allocations.** One instance of positive size, whose stride is the size
//!     rounded up to the alignment and the profile's block; size = stride; lifetime plan;
//!     never a scratch or binding workspace; `static_bytes` is their sum.
//! 18. **Dynamic descriptors.** Lifetime is not plan; the alignment is a power of two; the
//!     instance count is the sequence ceiling; the demand evaluates to a positive size at
//!     the minimum shape (one sequence, one token, one page); the named pool exists and lists
//!     the descriptor.
//! 19. **Pools.** A pool's id is `dynamic-pool/sha256/` and the canonical SHA-256 of its
//!     compatibility key; its members are exactly the descriptors that name it, sorted; each
//!     member's profile, usage, element type, layout fingerprint and alignment are the key's.
//! 20. **Pool minima.** By summation over the members' minimum sizes (demand at the minimum
//!     shape, rounded up to alignment and block): request and sequence bytes are the sums
//!     over members of that lifetime; step bytes the sum over step slots of their largest
//!     member; the invocation peak the largest invocation phase (rule 22); minimum
//!     resident bytes their total, positive, at most the maximum,
//!     which is the live maximum (the same sums at the members' largest sizes, request and
//!     sequence members times their instances) plus the reusable ceiling, capped at the
//!     dynamic capacity (usable − static).
//! 21. **Step slots.** The slots partition the pool's step-lifetime members; a dedicated slot
//!     has one member; a shared slot's members are token-scaled activation values that are
//!     not retained, and any two of them are used in disjoint node intervals, the earlier
//!     one's last user an ancestor (through dependencies) of the later one's first user.
//! 22. **Invocation liveness.** A pool's rows are, per node that uses them, its
//!     invocation-lifetime members, sorted by node id; no members ⇒
//!     `no_invocation_resources`; `total_order_reuse` only if no member is a binding
//!     workspace and each row's node is an ancestor of the next row's node in execution
//!     order. The rows split into phases (in execution order, a row opens a phase when every
//!     row of the last one is its ancestor, else joins it, and the last two phases merge
//!     while some row of the phase before is not its ancestor; with a binding workspace, one
//!     phase); a phase costs the sum of its members.
//! 23. **Global liveness.** The plan's rows merge the pools' rows by node; its mode is none
//!     without invocation members, total order if every pool with members is totally
//!     ordered, concurrent otherwise.
//! 24. **Totals.** The plan's minimum request, sequence, step and invocation-peak bytes are
//!     the sums over pools; the minimum runnable bytes are their total; static bytes plus
//!     minimum runnable bytes fit the usable capacity; the theoretical ceiling is static
//!     bytes plus, over pools, their theoretical ceiling and reusable ceiling.
//! 25. **Retention.** Each retained completion value is an output binding of its producer
//!     (value, ordinal) with that tensor, and its resource and offset are one of the
//!     binding's storage components; retained values are strictly ascending by value id;
//!     terminal output resources are non-empty, strictly ascending, and resources of nodes.
//!
//! What the checker does not decide, because it needs the request: that the providers and
//! profiles chosen are the optimum, that fingerprints match the request, and that estimates
//! are the catalog's. `verify` decides those by rebuilding the plan from its request and
//! comparing.

mod liveness;
mod memory;
mod nodes;
mod order;
mod pools;
mod state;
mod storage;

use std::fmt;

use serde::Serialize;

use crate::canonical::Sha256Hex;
use crate::plan::hash::{plan_hash, plan_id};
use crate::plan::{ExecutionPlan, ExecutionPlanPayload, PLAN_SCHEMA};

/// One broken rule of a valid plan.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Violation {
    /// The rule's number (the module documentation and `docs/checker.md`).
    pub rule: u32,
    /// JSON path of the culprit in the plan file.
    pub json_path: String,
    /// What is wrong, in the plan's terms.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rule {} at {}: {}",
            self.rule, self.json_path, self.message
        )
    }
}

/// Orders JSON paths with every run of digits compared as a number, so array indices sort
/// numerically (`nodes[9]` before `nodes[10]`; a digit run inside a key does too, `k2`
/// before `k10`), and everything else byte by byte (for the checker's paths, whose keys are
/// plain field names and ids, that is key order). Total: paths that tie as numbers (`[01]`,
/// `[1]`) fall back to their bytes.
fn path_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) if p.is_ascii_digit() && q.is_ascii_digit() => {
                let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
                let (m, n) = (digits(x), digits(y));
                // Numbers without their leading zeros: longer is larger, then by digits.
                let trim = |s: &[u8]| {
                    let zeros = s.iter().take_while(|&&c| c == b'0').count();
                    s[zeros.min(s.len() - 1)..].to_vec()
                };
                let (u, v) = (trim(&x[..m]), trim(&y[..n]));
                let order = u.len().cmp(&v.len()).then_with(|| u.cmp(&v));
                if order != Ordering::Equal {
                    return order;
                }
                (x, y) = (&x[m..], &y[n..]);
            }
            (Some(p), Some(q)) => {
                if p != q {
                    return p.cmp(q);
                }
                (x, y) = (&x[1..], &y[1..]);
            }
        }
    }
}

/// Every violation the checker found, in rule order, or none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// The violations (empty: the plan is valid).
    pub violations: Vec<Violation>,
}

impl CheckReport {
    /// Whether the plan is valid.
    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Collects violations.
#[derive(Default)]
pub(crate) struct Findings(Vec<Violation>);

impl Findings {
    pub(crate) fn add(
        &mut self,
        rule: u32,
        json_path: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.0.push(Violation {
            rule,
            json_path: json_path.into(),
            message: message.into(),
        });
    }
}

/// The violations one family of rules finds in `payload`.
fn findings_of(
    rules: fn(&ExecutionPlanPayload, &mut Findings),
    payload: &ExecutionPlanPayload,
) -> Findings {
    let mut found = Findings::default();
    rules(payload, &mut found);
    found
}

/// Checks every rule on `plan` and reports every violation.
pub fn check_plan(plan: &ExecutionPlan) -> CheckReport {
    check_plan_and_hash(plan).0
}

/// [`check_plan`], also returning the payload's plan hash as rule 2 computed it (`None` if
/// the payload cannot be hashed): a reader of a stored plan compares it with the hash of
/// the stored text to know that the text is the plan's canonical form, without hashing the
/// plan once more.
pub fn check_plan_and_hash(plan: &ExecutionPlan) -> (CheckReport, Option<Sha256Hex>) {
    check_with_payload_hash(plan, || plan_hash(&plan.payload))
}

/// [`check_plan`] on a plan its caller has just sealed: `plan.plan_hash` is the plan hash
/// the caller computed from this very payload (as the builder does before it sets the plan
/// id, which is not hash material, and moves the payload into the plan). Rule 2 then takes
/// that hash as the payload's instead of running the same hash function on the same bytes
/// a second time (the checker's own share of `jointplan plan`'s CPU was mostly that hash),
/// and still checks the plan id against it; every other rule is checked as by
/// [`check_plan`]. A stored plan, whose hash says nothing until it is recomputed, is checked
/// by [`check_plan`].
pub fn check_sealed_plan(plan: &ExecutionPlan) -> CheckReport {
    check_with_payload_hash(plan, || Ok(plan.plan_hash.clone())).0
}

/// Every rule, with `payload_hash` giving the payload's plan hash for rule 2.
fn check_with_payload_hash(
    plan: &ExecutionPlan,
    payload_hash: impl FnOnce() -> Result<Sha256Hex, crate::canonical::CanonicalError> + Send,
) -> (CheckReport, Option<Sha256Hex>) {
    let (rules, hash) = check_beside_sealing(&plan.payload, payload_hash);
    let report = rules.with_identity(plan, &hash);
    (report, hash.ok())
}

/// Runs every rule but the identity (rule 2) on `payload` beside `beside` (on the threads
/// of the current rayon pool) and returns their findings with `beside`'s result.
///
/// Why: the identity is the only rule that reads the plan id and the plan hash, so the
/// others can check a payload its caller is still sealing. The builder hashes the payload
/// and writes the plan file beside these rules, instead of hashing first and checking
/// after; [`UnsealedReport::sealed`] then adds the identity of the sealed plan.
pub fn check_beside_sealing<T: Send>(
    payload: &ExecutionPlanPayload,
    beside: impl FnOnce() -> T + Send,
) -> (UnsealedReport, T) {
    let mut found = Findings::default();
    // 1.
    if payload.schema != PLAN_SCHEMA {
        found.add(
            1,
            "payload.schema",
            format!("schema {} is not {PLAN_SCHEMA}", payload.schema),
        );
    }
    // The three rule families read the payload and nothing else, so they run side by side
    // (and beside `beside`); the violations are sorted when the report is made, so it is
    // the same whatever ran first.
    let (beside, (node_rules, (storage_rules, memory_rules))) = rayon::join(beside, || {
        rayon::join(
            || findings_of(nodes::check, payload),
            || {
                rayon::join(
                    || findings_of(storage::check, payload),
                    || findings_of(memory::check, payload),
                )
            },
        )
    });
    let mut violations = found.0;
    violations.extend(node_rules.0);
    violations.extend(storage_rules.0);
    violations.extend(memory_rules.0);
    (UnsealedReport { violations }, beside)
}

/// The violations of every rule but the identity (rule 2), found by
/// [`check_beside_sealing`] on a payload not yet sealed.
#[derive(Debug)]
pub struct UnsealedReport {
    violations: Vec<Violation>,
}

impl UnsealedReport {
    /// The report on `plan`, sealed from the payload these rules checked (its plan id and
    /// plan hash set, nothing else changed): these violations and the identity, with
    /// `plan.plan_hash` taken as the payload's hash, as [`check_sealed_plan`] takes it.
    pub fn sealed(self, plan: &ExecutionPlan) -> CheckReport {
        self.with_identity(plan, &Ok(plan.plan_hash.clone()))
    }

    /// These violations and rule 2's, with `hash` the payload's plan hash (or why it
    /// cannot be hashed), in rule order.
    fn with_identity(
        self,
        plan: &ExecutionPlan,
        hash: &Result<Sha256Hex, crate::canonical::CanonicalError>,
    ) -> CheckReport {
        let mut found = Findings(self.violations);
        // 2.
        match hash {
            Ok(hash) => {
                if *hash != plan.plan_hash {
                    found.add(
                        2,
                        "plan_hash",
                        format!(
                            "the payload hashes to {hash}, the plan says {}",
                            plan.plan_hash
                        ),
                    );
                }
                if plan.payload.plan_id != plan_id(&plan.plan_hash) {
                    found.add(
                        2,
                        "payload.plan_id",
                        format!(
                            "{} is not {}",
                            plan.payload.plan_id,
                            plan_id(&plan.plan_hash)
                        ),
                    );
                }
            }
            Err(error) => found.add(
                2,
                "payload",
                format!("the payload cannot be hashed: {error}"),
            ),
        }
        let mut violations = found.0;
        violations.sort_by(|a, b| {
            a.rule
                .cmp(&b.rule)
                .then_with(|| path_order(&a.json_path, &b.json_path))
                .then_with(|| a.message.cmp(&b.message))
        });
        violations.dedup();
        CheckReport { violations }
    }
}

#[cfg(test)]
mod tests {
    use super::path_order;
    use std::cmp::Ordering;

    #[test]
    fn paths_sort_in_path_order() {
        let mut paths = vec![
            "payload.nodes[100].id",
            "payload.nodes[10].id",
            "payload.nodes[9].values[2]",
            "payload.nodes[9].values[10]",
            "payload.memory",
            "payload.nodes[9]",
            "payload.nodes[09]",
        ];
        paths.sort_by(|a, b| path_order(a, b));
        assert_eq!(
            paths,
            [
                "payload.memory",
                "payload.nodes[09]",
                "payload.nodes[9]",
                "payload.nodes[9].values[2]",
                "payload.nodes[9].values[10]",
                "payload.nodes[10].id",
                "payload.nodes[100].id",
            ]
        );
        assert_eq!(path_order("a[0]", "a[00]"), "a[0]".cmp("a[00]"));
        assert_eq!(path_order("x", "x"), Ordering::Equal);
    }
}
