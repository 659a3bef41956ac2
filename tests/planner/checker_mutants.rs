//! Builder faults the checker must catch on its own.
//!
//! Each mutant is a deliberate builder bug, applied where the builder's output is made: the
//! built plan is changed the way the faulty builder would have made it, and then hashed
//! again (a faulty builder hashes its own wrong output, so the hash is no help). The
//! checker, which shares no code with the builder, must reject every mutant of every sample
//! plan it applies to. `docs/checker.md` records the kill table this test prints
//! (`cargo test --test planner checker_mutants -- --nocapture`).

use std::collections::BTreeMap;

use jointplan::check::{check_plan, check_sealed_plan};
use jointplan::plan::hash::{plan_hash, plan_id};
use jointplan::plan::{
    AllocationLifetime, DynamicResourceDemand, ExecutionPlan, InvocationLivenessMode,
    SelectionReason, StepSlotKind,
};

use super::checker::sample_plans;

/// A builder fault: changes a plan, or returns `false` if the plan has nothing it applies to.
type Fault = fn(&mut ExecutionPlan) -> bool;

fn rehash(plan: &mut ExecutionPlan) {
    let hash = plan_hash(&plan.payload).unwrap();
    plan.payload.plan_id = plan_id(&hash);
    plan.plan_hash = hash;
}

fn faults() -> Vec<(&'static str, Fault)> {
    vec![
        ("static size off by one", |p| {
            let Some(a) = p.payload.memory.static_allocations.first_mut() else {
                return false;
            };
            a.size_bytes += 1;
            true
        }),
        ("static stride off by one", |p| {
            let Some(a) = p.payload.memory.static_allocations.first_mut() else {
                return false;
            };
            a.instance_stride_bytes += 1;
            a.size_bytes += 1;
            true
        }),
        ("static total off by one", |p| {
            p.payload.memory.static_bytes += 1;
            true
        }),
        ("static row dropped", |p| {
            p.payload.memory.static_allocations.pop().is_some()
        }),
        ("step lifetime swapped for sequence", |p| {
            let Some(d) = p
                .payload
                .memory
                .dynamic_descriptors
                .iter_mut()
                .find(|d| d.lifetime == AllocationLifetime::Step)
            else {
                return false;
            };
            d.lifetime = AllocationLifetime::Sequence;
            true
        }),
        ("sequence lifetime swapped for request", |p| {
            let Some(d) = p
                .payload
                .memory
                .dynamic_descriptors
                .iter_mut()
                .find(|d| d.lifetime == AllocationLifetime::Sequence)
            else {
                return false;
            };
            d.lifetime = AllocationLifetime::Request;
            true
        }),
        ("token demand off by one", |p| {
            let Some(d) = p
                .payload
                .memory
                .dynamic_descriptors
                .iter_mut()
                .find(|d| matches!(d.demand, DynamicResourceDemand::Tokens { .. }))
            else {
                return false;
            };
            if let DynamicResourceDemand::Tokens {
                bytes_per_token, ..
            } = &mut d.demand
            {
                *bytes_per_token += 1;
            }
            true
        }),
        ("token ceiling off by one", |p| {
            let Some(d) = p
                .payload
                .memory
                .dynamic_descriptors
                .iter_mut()
                .find(|d| matches!(d.demand, DynamicResourceDemand::Tokens { .. }))
            else {
                return false;
            };
            if let DynamicResourceDemand::Tokens { maximum_tokens, .. } = &mut d.demand {
                *maximum_tokens += 1;
            }
            true
        }),
        ("workspace size off by one", |p| {
            let scratch: Vec<_> = p
                .payload
                .nodes
                .iter()
                .filter_map(|n| n.scratch_resource.clone())
                .collect();
            let Some(d) = p
                .payload
                .memory
                .dynamic_descriptors
                .iter_mut()
                .find(|d| scratch.contains(&d.base_resource_id))
            else {
                return false;
            };
            d.demand = match &d.demand {
                DynamicResourceDemand::Fixed { bytes } => {
                    DynamicResourceDemand::Fixed { bytes: bytes + 1 }
                }
                DynamicResourceDemand::Tokens {
                    bytes_per_token,
                    maximum_tokens,
                } => DynamicResourceDemand::Tokens {
                    bytes_per_token: bytes_per_token + 1,
                    maximum_tokens: *maximum_tokens,
                },
                _ => DynamicResourceDemand::Fixed { bytes: 1 },
            };
            true
        }),
        ("workspace lifetime swapped (invocation for step)", |p| {
            let Some(d) = p
                .payload
                .memory
                .dynamic_descriptors
                .iter_mut()
                .find(|d| d.lifetime == AllocationLifetime::Invocation)
            else {
                return false;
            };
            d.lifetime = AllocationLifetime::Step;
            true
        }),
        ("instances off by one", |p| {
            let Some(d) = p.payload.memory.dynamic_descriptors.first_mut() else {
                return false;
            };
            d.theoretical_maximum_instances += 1;
            true
        }),
        ("pool minimum step off by one", |p| {
            let Some(pool) = p
                .payload
                .memory
                .dynamic_pools
                .iter_mut()
                .find(|x| x.minimum_step_bytes > 0)
            else {
                return false;
            };
            pool.minimum_step_bytes += 1;
            pool.provisioning.minimum_resident_bytes += 1;
            true
        }),
        ("pool minimum sequence off by one", |p| {
            let Some(pool) = p.payload.memory.dynamic_pools.first_mut() else {
                return false;
            };
            pool.minimum_sequence_bytes += 1;
            pool.provisioning.minimum_resident_bytes += 1;
            true
        }),
        ("pool resident total off by one", |p| {
            let Some(pool) = p.payload.memory.dynamic_pools.first_mut() else {
                return false;
            };
            pool.provisioning.minimum_resident_bytes += 1;
            true
        }),
        ("pool maximum off by one", |p| {
            let Some(pool) = p.payload.memory.dynamic_pools.first_mut() else {
                return false;
            };
            pool.provisioning.maximum_resident_bytes -= 1;
            true
        }),
        ("pool member dropped", |p| {
            let Some(pool) = p
                .payload
                .memory
                .dynamic_pools
                .iter_mut()
                .find(|x| x.resource_ids.len() > 1)
            else {
                return false;
            };
            pool.resource_ids.pop();
            true
        }),
        (
            "shared step slot split wrongly (two dedicated slots merged)",
            |p| {
                for pool in &mut p.payload.memory.dynamic_pools {
                    let dedicated: Vec<usize> = pool
                        .step_resource_slots
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.kind == StepSlotKind::Dedicated)
                        .map(|(i, _)| i)
                        .collect();
                    if dedicated.len() >= 2 {
                        let moved = pool.step_resource_slots[dedicated[1]].resource_ids.clone();
                        pool.step_resource_slots[dedicated[0]]
                            .resource_ids
                            .extend(moved);
                        pool.step_resource_slots[dedicated[0]].kind =
                            StepSlotKind::OrderedSingleFenceStepWave;
                        pool.step_resource_slots.remove(dedicated[1]);
                        return true;
                    }
                }
                false
            },
        ),
        ("invocation liveness claims total order", |p| {
            let Some(pool) = p.payload.memory.dynamic_pools.iter_mut().find(|x| {
                x.invocation_liveness_mode == InvocationLivenessMode::ConservativeConcurrent
            }) else {
                return false;
            };
            pool.invocation_liveness_mode = InvocationLivenessMode::TotalOrderReuse;
            true
        }),
        ("invocation row dropped", |p| {
            let Some(pool) = p
                .payload
                .memory
                .dynamic_pools
                .iter_mut()
                .find(|x| !x.invocation_liveness.is_empty())
            else {
                return false;
            };
            pool.invocation_liveness.pop();
            true
        }),
        ("global liveness row dropped", |p| {
            p.payload.memory.invocation_liveness.pop().is_some()
        }),
        ("runnable total off by one", |p| {
            p.payload.memory.minimum_runnable_request_bytes += 1;
            true
        }),
        ("usable capacity off by one", |p| {
            p.payload.memory.usable_capacity_bytes += 1;
            true
        }),
        ("theoretical ceiling off by one", |p| {
            let t: u128 = p.payload.memory.theoretical_ceiling_bytes.parse().unwrap();
            p.payload.memory.theoretical_ceiling_bytes = (t + 1).to_string();
            true
        }),
        ("dependency dropped", |p| {
            let Some(n) = p
                .payload
                .nodes
                .iter_mut()
                .find(|n| !n.dependencies.is_empty())
            else {
                return false;
            };
            n.dependencies.pop();
            true
        }),
        ("extra dependency", |p| {
            let first = p.payload.nodes[0].id.clone();
            let Some(n) = p
                .payload
                .nodes
                .iter_mut()
                .skip(1)
                .find(|n| !n.dependencies.contains(&first))
            else {
                return false;
            };
            n.dependencies.insert(0, first);
            true
        }),
        (
            "skipped overlap: two values placed on the same bytes",
            |p| {
                // Two different values with components on one resource: the builder puts the
                // second on the first one's bytes, in every node that binds it.
                let mut first_on: BTreeMap<String, (String, u64)> = BTreeMap::new();
                let mut target = None;
                'find: for n in &p.payload.nodes {
                    for b in &n.values {
                        for c in &b.storage.components {
                            let resource = c.resource_id.to_string();
                            match first_on.get(&resource) {
                                None => {
                                    first_on
                                        .insert(resource, (b.value_id.to_string(), c.offset_bytes));
                                }
                                Some((v, offset))
                                    if *v != b.value_id.as_str() && *offset != c.offset_bytes =>
                                {
                                    target = Some((b.value_id.to_string(), resource, *offset));
                                    break 'find;
                                }
                                Some(_) => {}
                            }
                        }
                    }
                }
                let Some((value, resource, offset)) = target else {
                    return false;
                };
                for n in &mut p.payload.nodes {
                    for b in &mut n.values {
                        if b.value_id.as_str() == value {
                            for c in &mut b.storage.components {
                                if c.resource_id.as_str() == resource {
                                    c.offset_bytes = offset;
                                }
                            }
                        }
                    }
                }
                true
            },
        ),
        ("value placed differently in two nodes", |p| {
            let mut seen = BTreeMap::new();
            for (i, n) in p.payload.nodes.iter().enumerate() {
                for (k, b) in n.values.iter().enumerate() {
                    if let Some(first) = seen.insert(b.value_id.clone(), (i, k)) {
                        let _ = first;
                        p.payload.nodes[i].values[k].storage.components[0].offset_bytes += 64;
                        return true;
                    }
                }
            }
            false
        }),
        ("node resource dropped", |p| {
            let Some(n) = p.payload.nodes.iter_mut().find(|n| n.resources.len() > 1) else {
                return false;
            };
            n.resources.pop();
            true
        }),
        ("wrong selection reason", |p| {
            let Some(n) = p
                .payload
                .nodes
                .iter_mut()
                .find(|n| n.selection.selection_reason == SelectionReason::PreferredCompatible)
            else {
                return false;
            };
            n.selection.selection_reason = SelectionReason::CanonicalCompatible;
            true
        }),
        ("state effect resource dropped", |p| {
            let Some(n) = p
                .payload
                .nodes
                .iter_mut()
                .find(|n| n.state_effects.iter().any(|e| !e.resource_ids.is_empty()))
            else {
                return false;
            };
            let e = n
                .state_effects
                .iter_mut()
                .find(|e| !e.resource_ids.is_empty())
                .unwrap();
            e.resource_ids.pop();
            true
        }),
        ("alias record dropped its input", |p| {
            let Some(n) = p
                .payload
                .nodes
                .iter_mut()
                .find(|n| !n.exact_aliases.is_empty())
            else {
                return false;
            };
            n.exact_aliases[0].input_ordinal += 7;
            true
        }),
        ("token projection extent off by one", |p| {
            for n in &mut p.payload.nodes {
                if let jointplan::plan::NodeWorkContract::Tokens {
                    projections,
                    source,
                } = &mut n.work
                {
                    if projections.len() > 1 {
                        let last = projections.len() - 1;
                        projections[last].canonical_extent += 1;
                        let _ = source;
                        return true;
                    }
                }
            }
            false
        }),
        ("retained value on the wrong offset", |p| {
            let Some(r) = p.payload.retained_completion_values.first_mut() else {
                return false;
            };
            r.logical_offset_bytes += 16;
            true
        }),
    ]
}

#[test]
fn the_checker_rejects_every_builder_fault() {
    let plans = sample_plans();
    let mut survivors = Vec::new();
    let mut table = Vec::new();
    for (name, fault) in faults() {
        let (mut applied, mut killed) = (0, 0);
        for (plan_name, plan) in &plans {
            let mut mutant = plan.clone();
            if !fault(&mut mutant) {
                continue;
            }
            rehash(&mut mutant);
            applied += 1;
            let report = check_plan(&mutant);
            // A faulty builder seals its own wrong output, so the checker `plan` runs (the
            // payload hash taken from the seal) must give the very same report.
            assert_eq!(check_sealed_plan(&mutant), report, "{name} on {plan_name}");
            if report.is_valid() {
                survivors.push(format!("{name} on {plan_name}"));
            } else {
                killed += 1;
            }
        }
        table.push(format!("| {name} | {applied} | {killed} |"));
    }
    println!(
        "| fault | plans it applies to | rejected |\n|---|---:|---:|\n{}",
        table.join("\n")
    );
    assert!(
        survivors.is_empty(),
        "the checker accepted builder faults:\n{}",
        survivors.join("\n")
    );
    assert!(
        table.iter().all(|row| !row.contains("| 0 | 0 |")),
        "a fault applied to no plan:\n{}",
        table.join("\n")
    );
}
