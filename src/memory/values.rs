//! Value resources (rules 4.1): every component of every binding, in execution order,
//! is checked (alignment, token projection) and classified by demand; touches of one
//! resource are accumulated and must agree.

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::{NodeWorkContract, PlanNode, TokenProjection};
use crate::request::fingerprints::{layout_class_fingerprint, value_resource_layout_fingerprint};
use crate::request::{
    BufferUsage, ElementType, IdMap, IdSet, ModelProgram, ProgramValueId, ResourceId,
    RuntimePolicy, Sha256Hex, StateCapacityDemand, StateInitialization, StateLifetime, StateSpec,
    TensorLayout, ValueRole,
};

use super::error::MemoryError;
use super::{AllocationLifetime, ResourceInitialization};

/// How a value resource's bytes are demanded (`value_resource_demand`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueDemand {
    /// A weight: a static allocation.
    PlanStatic,
    /// Fixed bytes per scope.
    Fixed { lifetime: AllocationLifetime },
    /// Fixed bytes per participating sequence (program inputs and outputs).
    ParticipantFixed {
        lifetime: AllocationLifetime,
        maximum_participants: u32,
    },
    /// Bytes per token up to a token ceiling.
    TokenScaled {
        lifetime: AllocationLifetime,
        bytes_per_token: u64,
        maximum_tokens: u64,
    },
}

impl std::fmt::Display for ValueDemand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::PlanStatic => f.write_str("plan_static"),
            Self::Fixed { lifetime } => write!(f, "fixed({lifetime:?})"),
            Self::ParticipantFixed {
                lifetime,
                maximum_participants,
            } => write!(
                f,
                "participant_fixed({lifetime:?}, {maximum_participants} participants)"
            ),
            Self::TokenScaled {
                lifetime,
                bytes_per_token,
                maximum_tokens,
            } => write!(
                f,
                "token_scaled({lifetime:?}, {bytes_per_token} bytes/token, {maximum_tokens} tokens)"
            ),
        }
    }
}

/// Everything the touches of one value resource agreed on.
#[derive(Clone, Debug)]
pub(crate) struct ValueResource {
    /// Index of the first node that touched it.
    pub first_node: usize,
    /// Largest component end.
    pub end: u64,
    /// Largest node value alignment.
    pub alignment: u64,
    /// Usage.
    pub usage: BufferUsage,
    /// Element type of every component.
    pub element_type: ElementType,
    /// Demand class.
    pub demand: ValueDemand,
    /// Initialization.
    pub initialization: ResourceInitialization,
    /// Interned layout-class fingerprints of the touching bindings.
    pub layouts: BTreeSet<u32>,
}

impl ValueResource {
    fn describe(&self) -> String {
        describe(
            self.usage,
            self.element_type,
            &self.demand,
            self.initialization,
        )
    }
}

fn describe(
    usage: BufferUsage,
    element_type: ElementType,
    demand: &ValueDemand,
    initialization: ResourceInitialization,
) -> String {
    format!("{usage:?} {element_type:?} with demand {demand} and initialization {initialization:?}")
}

/// How program values are classified: weights, states, program inputs and outputs.
pub(crate) struct ProgramValues<'a> {
    weights: IdSet<&'a ProgramValueId>,
    states: IdMap<&'a ProgramValueId, &'a StateSpec>,
    io: IdSet<&'a ProgramValueId>,
}

impl<'a> ProgramValues<'a> {
    /// Indexes the program once.
    pub fn new(program: &'a ModelProgram) -> Self {
        Self {
            weights: program.weights.iter().map(|w| &w.value_id).collect(),
            states: program.states.iter().map(|s| (&s.value_id, s)).collect(),
            io: program.inputs.iter().chain(&program.outputs).collect(),
        }
    }
}

/// Interned layout-class fingerprints (most bindings are contiguous: hash each layout once).
#[derive(Default)]
pub(crate) struct LayoutInterner {
    by_layout: BTreeMap<TensorLayout, u32>,
    fingerprints: Vec<Sha256Hex>,
    by_set: BTreeMap<BTreeSet<u32>, Sha256Hex>,
}

impl LayoutInterner {
    fn intern(&mut self, layout: &TensorLayout) -> Result<u32, MemoryError> {
        if let Some(&index) = self.by_layout.get(layout) {
            return Ok(index);
        }
        let index = u32::try_from(self.fingerprints.len())
            .map_err(|_| super::error::overflow("too many distinct tensor layouts"))?;
        self.fingerprints.push(layout_class_fingerprint(layout)?);
        self.by_layout.insert(layout.clone(), index);
        Ok(index)
    }

    /// The value-resource layout fingerprint of a set of interned layouts.
    pub fn resource_fingerprint(&mut self, set: &BTreeSet<u32>) -> Result<Sha256Hex, MemoryError> {
        if let Some(fp) = self.by_set.get(set) {
            return Ok(fp.clone());
        }
        let classes: BTreeSet<Sha256Hex> = set
            .iter()
            .filter_map(|&i| self.fingerprints.get(i as usize).cloned())
            .collect();
        let fp = value_resource_layout_fingerprint(&classes)?;
        self.by_set.insert(set.clone(), fp.clone());
        Ok(fp)
    }
}

/// The projection of one binding slot onto the token axis, if the node's work has one.
pub(crate) fn token_projection(
    work: &NodeWorkContract,
    role: ValueRole,
    ordinal: u32,
) -> Option<&TokenProjection> {
    match work {
        NodeWorkContract::Fixed => None,
        NodeWorkContract::Tokens { projections, .. } => projections
            .iter()
            .find(|p| p.role == role && p.ordinal == ordinal),
    }
}

fn state_lifetime(lifetime: StateLifetime) -> AllocationLifetime {
    match lifetime {
        StateLifetime::Request => AllocationLifetime::Request,
        StateLifetime::Sequence => AllocationLifetime::Sequence,
        StateLifetime::Step => AllocationLifetime::Step,
    }
}

/// Accumulates every value resource of the nodes (4.1).
pub(crate) fn collect_value_resources(
    program: &ProgramValues<'_>,
    policy: &RuntimePolicy,
    nodes: &[PlanNode],
    layouts: &mut LayoutInterner,
) -> Result<BTreeMap<ResourceId, ValueResource>, MemoryError> {
    let mut resources: BTreeMap<ResourceId, ValueResource> = BTreeMap::new();
    for (index, node) in nodes.iter().enumerate() {
        let alignment = node.provider_resources.value_alignment_bytes;
        if !alignment.is_power_of_two() {
            return Err(MemoryError::InvalidValueAlignment {
                node: node.id.clone(),
                alignment,
            });
        }
        for binding in &node.values {
            let projection = token_projection(&node.work, binding.role, binding.ordinal);
            let layout = layouts.intern(&binding.tensor.layout)?;
            for component in &binding.storage.components {
                if component.offset_bytes % alignment != 0 {
                    return Err(MemoryError::MisalignedComponent {
                        node: node.id.clone(),
                        value: binding.value_id.clone(),
                        resource: component.resource_id.clone(),
                        offset: component.offset_bytes,
                        alignment,
                    });
                }
                let end =
                    component
                        .end_bytes()
                        .ok_or_else(|| MemoryError::ComponentEndOverflow {
                            node: node.id.clone(),
                            value: binding.value_id.clone(),
                            resource: component.resource_id.clone(),
                        })?;
                let token_projection = match projection {
                    None => None,
                    Some(p) => {
                        if component.offset_bytes != 0 {
                            return Err(MemoryError::ProjectedComponentOffset {
                                node: node.id.clone(),
                                value: binding.value_id.clone(),
                                resource: component.resource_id.clone(),
                                offset: component.offset_bytes,
                            });
                        }
                        if p.canonical_extent == 0
                            || component.length_bytes % p.canonical_extent != 0
                        {
                            return Err(MemoryError::ProjectedLengthNotDivisible {
                                node: node.id.clone(),
                                value: binding.value_id.clone(),
                                resource: component.resource_id.clone(),
                                length: component.length_bytes,
                                extent: p.canonical_extent,
                            });
                        }
                        Some((
                            component.length_bytes / p.canonical_extent,
                            p.canonical_extent,
                        ))
                    }
                };
                let (demand, initialization) = value_resource_demand(
                    program,
                    policy,
                    node,
                    binding,
                    &component.resource_id,
                    end,
                    token_projection,
                )?;
                match resources.get_mut(&component.resource_id) {
                    None => {
                        resources.insert(
                            component.resource_id.clone(),
                            ValueResource {
                                first_node: index,
                                end,
                                alignment,
                                usage: binding.usage,
                                element_type: component.element_type,
                                demand,
                                initialization,
                                layouts: BTreeSet::from([layout]),
                            },
                        );
                    }
                    Some(existing) => {
                        if existing.usage != binding.usage
                            || existing.element_type != component.element_type
                            || existing.demand != demand
                            || existing.initialization != initialization
                        {
                            return Err(MemoryError::ConflictingResourceUse {
                                resource: component.resource_id.clone(),
                                first_node: nodes[existing.first_node].id.clone(),
                                node: node.id.clone(),
                                first: existing.describe().into(),
                                second: describe(
                                    binding.usage,
                                    component.element_type,
                                    &demand,
                                    initialization,
                                )
                                .into(),
                            });
                        }
                        existing.end = existing.end.max(end);
                        existing.alignment = existing.alignment.max(alignment);
                        existing.layouts.insert(layout);
                    }
                }
            }
        }
    }
    Ok(resources)
}

/// The demand class and initialization of one component touch.
fn value_resource_demand(
    program: &ProgramValues<'_>,
    policy: &RuntimePolicy,
    node: &PlanNode,
    binding: &crate::request::ValueBinding,
    resource: &ResourceId,
    end: u64,
    token_projection: Option<(u64, u64)>,
) -> Result<(ValueDemand, ResourceInitialization), MemoryError> {
    if program.weights.contains(&binding.value_id) {
        return Ok((ValueDemand::PlanStatic, ResourceInitialization::None));
    }
    if let Some(state) = program.states.get(&binding.value_id) {
        let lifetime = state_lifetime(state.lifetime);
        let tensor_bytes =
            state
                .tensor
                .byte_len()
                .ok_or_else(|| MemoryError::InvalidStateDemand {
                    state: state.id.clone(),
                    value: state.value_id.clone(),
                    reason: "the state tensor's byte length overflows u64".to_owned(),
                })?;
        if let Some(reason) = state.capacity_demand.problem(tensor_bytes) {
            return Err(MemoryError::InvalidStateDemand {
                state: state.id.clone(),
                value: state.value_id.clone(),
                reason,
            });
        }
        let initialization = match state.initialization {
            StateInitialization::None => ResourceInitialization::None,
            StateInitialization::Zero => ResourceInitialization::Zero,
        };
        let demand = match state.capacity_demand {
            StateCapacityDemand::FixedPerScope => ValueDemand::Fixed { lifetime },
            StateCapacityDemand::TokenScaled {
                bytes_per_token,
                maximum_tokens,
            } => {
                if bytes_per_token < end {
                    return Err(MemoryError::StateBytesPerTokenBelowEnd {
                        node: node.id.clone(),
                        state: state.id.clone(),
                        resource: resource.clone(),
                        bytes_per_token,
                        end,
                    });
                }
                ValueDemand::TokenScaled {
                    lifetime,
                    bytes_per_token,
                    maximum_tokens,
                }
            }
        };
        return Ok((demand, initialization));
    }
    if binding.usage != BufferUsage::Activations {
        return Err(MemoryError::NonActivationValue {
            node: node.id.clone(),
            value: binding.value_id.clone(),
            usage: binding.usage,
        });
    }
    let lifetime = AllocationLifetime::Step;
    let demand = match token_projection {
        Some((bytes_per_token, extent)) => {
            if bytes_per_token == 0 || extent == 0 {
                return Err(MemoryError::ZeroTokenProjection {
                    node: node.id.clone(),
                    value: binding.value_id.clone(),
                    bytes_per_token,
                    extent,
                });
            }
            // The reference keeps the canonical extent for request-lifetime activations; the
            // lifetime is always step, so the policy's token ceiling applies.
            let maximum_tokens = if lifetime == AllocationLifetime::Request {
                extent
            } else {
                policy.maximum_scheduled_tokens
            };
            ValueDemand::TokenScaled {
                lifetime,
                bytes_per_token,
                maximum_tokens,
            }
        }
        None if program.io.contains(&binding.value_id) => ValueDemand::ParticipantFixed {
            lifetime,
            maximum_participants: policy.maximum_active_sequences,
        },
        None => ValueDemand::Fixed { lifetime },
    };
    Ok((demand, ResourceInitialization::None))
}
