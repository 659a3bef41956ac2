//! Hand-built plan nodes, programs and policies for the memory-plan tests.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use jointplan::memory::{derive_memory_plan, MemoryError, MemoryInput};
use jointplan::plan::MemoryPlan;
use jointplan::plan::{
    NodeWorkContract, PlanNode, ProviderSelection, SelectionReason, TokenProjection,
};
use jointplan::request::fingerprints::reusable_bucket_id;
pub use jointplan::request::BufferUsage;
use jointplan::request::{
    AliasPolicy, BucketCapacity, ContractVersion, DeterminismRequirement, ElementType, EstimatorId,
    ExecutionSemantics, ModelFamilyId, ModelProgram, NodeId, OperationId, PolicyId, ProgramValueId,
    ProviderId, ProviderResourcePlan, ReplayEquivalence, ResourceId, ReusableExecutionBucket,
    ReusableExecutionClassId, ReusableExecutionPolicy, RuntimePolicy, Sha256Hex,
    StateCapacityDemand, StateId, StateInitialization, StateLifetime, StateSpec, StorageAllocator,
    StorageComponent, StorageProfile, StorageRequirement, StorageView, TensorAccess, TensorLayout,
    TensorSpec, ValueBinding, ValueRole, ValueStorage, WeightId, WeightReference,
    WorkspaceRequirement, WorkspaceScope, WorkspaceSizeFormula,
};

/// A resource id.
pub fn rid(text: &str) -> ResourceId {
    ResourceId::new(text).unwrap()
}

/// A node id.
pub fn nid(text: &str) -> NodeId {
    NodeId::new(text).unwrap()
}

fn vid(text: &str) -> ProgramValueId {
    ProgramValueId::new(text).unwrap()
}

fn fp(digit: char) -> Sha256Hex {
    Sha256Hex::new(digit.to_string().repeat(64)).unwrap()
}

/// linear+contiguous.
pub const LINEAR: StorageProfile = StorageProfile::STATIC_CONTIGUOUS;

/// fixed_block(b)+contiguous.
pub fn block(bytes: u64) -> StorageProfile {
    StorageProfile {
        allocator: StorageAllocator::FixedBlockArena { block_bytes: bytes },
        view: StorageView::Contiguous,
    }
}

/// fixed_block(b)+paged(b).
pub fn paged(bytes: u64) -> StorageProfile {
    StorageProfile {
        allocator: StorageAllocator::FixedBlockArena { block_bytes: bytes },
        view: StorageView::PagedRegions { block_bytes: bytes },
    }
}

/// The test policy of rules 7: 1 MiB, reserve 128, 3 sequences, 4096 tokens.
pub fn test_policy() -> RuntimePolicy {
    RuntimePolicy {
        policy_id: PolicyId::new("runtime-policy.test").unwrap(),
        version: ContractVersion::new(1, 0),
        memory_capacity_bytes: 1 << 20,
        memory_reserve_bytes: 128,
        maximum_active_sequences: 3,
        maximum_scheduled_tokens: 4096,
        execution_determinism: DeterminismRequirement::BitwiseSameRuntime,
        dynamic_storage_profile_order: vec![LINEAR],
        reusable_execution: None,
        wire_limits: None,
    }
}

/// A reusable policy of one class with the given capacities.
pub fn reusable_policy(lanes: u32, capacities: &[(u32, u64, u64)]) -> ReusableExecutionPolicy {
    let class_id = ReusableExecutionClassId::new("uniform-query").unwrap();
    ReusableExecutionPolicy {
        maximum_reusable_lanes: lanes,
        buckets: capacities
            .iter()
            .map(|&(s, t, p)| {
                let capacity = BucketCapacity {
                    maximum_sequences: s,
                    maximum_tokens: t,
                    maximum_pages: p,
                };
                ReusableExecutionBucket {
                    bucket_id: reusable_bucket_id(&class_id, &capacity).unwrap(),
                    class_id: class_id.clone(),
                    capacity,
                }
            })
            .collect(),
    }
}

/// Everything `derive_memory_plan` reads, built by hand.
pub struct Fixture {
    /// Device memory.
    pub device_capacity_bytes: u64,
    /// Policy.
    pub policy: RuntimePolicy,
    /// Program (only inputs, outputs, weights and states matter).
    pub program: ModelProgram,
    /// Nodes in execution order.
    pub nodes: Vec<PlanNode>,
    /// Selected profiles (defaults to linear+contiguous for every resource touched).
    pub profiles: BTreeMap<ResourceId, StorageProfile>,
    /// Retained resources.
    pub retained: BTreeSet<ResourceId>,
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

impl Fixture {
    /// An empty program under the test policy on a 1 MiB device.
    pub fn new() -> Self {
        Self {
            device_capacity_bytes: 1 << 20,
            policy: test_policy(),
            program: ModelProgram {
                family_id: ModelFamilyId::new("family.test").unwrap(),
                inputs: Vec::new(),
                blocks: Vec::new(),
                states: Vec::new(),
                weights: Vec::new(),
                outputs: Vec::new(),
            },
            nodes: Vec::new(),
            profiles: BTreeMap::new(),
            retained: BTreeSet::new(),
        }
    }

    /// Declares a program weight value.
    pub fn weight(&mut self, value: &str, bytes: u64) -> &mut Self {
        self.program.weights.push(WeightReference {
            weight_id: WeightId::new(format!("weight.{value}")).unwrap(),
            value_id: vid(value),
            tensor: tensor(bytes / 2, ElementType::F16),
        });
        self
    }

    /// Declares a program state.
    pub fn state(
        &mut self,
        state: &str,
        value: &str,
        dimensions: Vec<u64>,
        lifetime: StateLifetime,
        capacity_demand: StateCapacityDemand,
        initialization: StateInitialization,
    ) -> &mut Self {
        self.program.states.push(StateSpec {
            id: StateId::new(state).unwrap(),
            value_id: vid(value),
            tensor: TensorSpec {
                dimensions,
                element_type: ElementType::F16,
                layout: TensorLayout::Contiguous,
            },
            lifetime,
            capacity_demand,
            initialization,
        });
        self
    }

    /// Declares a program input.
    pub fn program_input(&mut self, value: &str) -> &mut Self {
        self.program.inputs.push(vid(value));
        self
    }

    /// Declares a program output.
    pub fn program_output(&mut self, value: &str) -> &mut Self {
        self.program.outputs.push(vid(value));
        self
    }

    /// Starts a node (added by [`NodeBuilder::done`]).
    pub fn node(&mut self, id: &str) -> NodeBuilder<'_> {
        NodeBuilder {
            node: blank_node(id),
            fixture: self,
        }
    }

    /// Sets the selected profile of a resource.
    pub fn select(&mut self, resource: &str, profile: StorageProfile) -> &mut Self {
        self.profiles.insert(rid(resource), profile);
        self
    }

    /// Retains a resource.
    pub fn retain(&mut self, resource: &str) -> &mut Self {
        self.retained.insert(rid(resource));
        self
    }

    /// The node with this id.
    pub fn node_mut(&mut self, id: &str) -> &mut PlanNode {
        self.nodes.iter_mut().find(|n| n.id.as_str() == id).unwrap()
    }

    /// The memory input.
    pub fn input(&self) -> MemoryInput<'_> {
        MemoryInput {
            device_capacity_bytes: self.device_capacity_bytes,
            policy: &self.policy,
            program: &self.program,
            nodes: &self.nodes,
            selected_profiles: &self.profiles,
            retained_resources: &self.retained,
        }
    }

    /// Derives the memory plan.
    pub fn derive(&self) -> Result<MemoryPlan, MemoryError> {
        derive_memory_plan(&self.input())
    }

    /// Validates a plan against these nodes and retained resources.
    pub fn validate(&self, plan: &MemoryPlan) -> Result<(), MemoryError> {
        jointplan::memory::validate_memory_plan(plan, &self.nodes, &self.retained)
    }
}

fn tensor(elements: u64, element_type: ElementType) -> TensorSpec {
    TensorSpec {
        dimensions: vec![elements.max(1)],
        element_type,
        layout: TensorLayout::Contiguous,
    }
}

fn blank_node(id: &str) -> PlanNode {
    PlanNode {
        id: nid(id),
        dependencies: Vec::new(),
        operation_id: OperationId::new("operation.main").unwrap(),
        operation_version: ContractVersion::new(1, 0),
        operation_fingerprint: fp('1'),
        provider_implementation_fingerprint: fp('2'),
        provider_execution_semantics: ExecutionSemantics::new(
            ReplayEquivalence::BitwiseEagerEquivalent,
        ),
        required_capabilities: BTreeSet::new(),
        attributes: BTreeMap::new(),
        work: NodeWorkContract::Fixed,
        selection: ProviderSelection {
            requested_provider: None,
            selected_provider: ProviderId::new("provider.operation.reference").unwrap(),
            selection_reason: SelectionReason::CanonicalCompatible,
            rejected_providers: Vec::new(),
        },
        provider_resources: ProviderResourcePlan {
            provider_id: ProviderId::new("provider.operation.reference").unwrap(),
            estimator_id: EstimatorId::new("resource-estimator.reference").unwrap(),
            estimator_version: ContractVersion::new(1, 0),
            estimator_implementation_fingerprint: fp('3'),
            estimator_input_fingerprint: fp('4'),
            estimate_fingerprint: fp('5'),
            value_alignment_bytes: 16,
            scratch: None,
            binding: None,
            persistent: None,
        },
        values: Vec::new(),
        exact_aliases: Vec::new(),
        state_effects: Vec::new(),
        scratch_resource: None,
        binding_resource: None,
        persistent_resource: None,
        resources: Vec::new(),
    }
}

/// One binding to add to a node.
#[derive(Clone, Debug)]
pub struct Bind {
    /// Value.
    pub value: String,
    /// Input or output.
    pub role: ValueRole,
    /// Usage.
    pub usage: BufferUsage,
    /// Resource.
    pub resource: String,
    /// Offset.
    pub offset: u64,
    /// Length.
    pub length: u64,
    /// Element type of tensor and component.
    pub element_type: ElementType,
    /// Access.
    pub access: TensorAccess,
    /// Token extent, if the binding carries the token axis.
    pub tokens: Option<u64>,
}

impl Bind {
    /// An f16 activation binding.
    pub fn new(value: &str, role: ValueRole, resource: &str, length: u64) -> Self {
        Self {
            value: value.to_owned(),
            role,
            usage: BufferUsage::Activations,
            resource: resource.to_owned(),
            offset: 0,
            length,
            element_type: ElementType::F16,
            access: match role {
                ValueRole::Input => TensorAccess::Read,
                ValueRole::Output => TensorAccess::Write,
            },
            tokens: None,
        }
    }
}

/// Builds one node.
pub struct NodeBuilder<'f> {
    fixture: &'f mut Fixture,
    node: PlanNode,
}

/// A workspace requirement accepting linear+contiguous.
pub fn workspace(
    formula: WorkspaceSizeFormula,
    alignment: u64,
    scope: WorkspaceScope,
) -> WorkspaceRequirement {
    WorkspaceRequirement {
        size_formula: formula,
        alignment_bytes: alignment,
        scope,
        storage: StorageRequirement {
            accepted_profiles: vec![LINEAR],
        },
    }
}

impl NodeBuilder<'_> {
    /// Adds a binding.
    pub fn bind(mut self, bind: Bind) -> Self {
        let ordinal = self
            .node
            .values
            .iter()
            .filter(|v| v.role == bind.role)
            .count() as u32;
        let elements = (bind.length / bind.element_type.byte_size()).max(1);
        let binding = ValueBinding {
            value_id: vid(&bind.value),
            role: bind.role,
            ordinal,
            tensor: tensor(elements, bind.element_type),
            access: bind.access,
            alias: AliasPolicy::NoAlias,
            usage: bind.usage,
            weight: None,
            storage: ValueStorage {
                components: vec![StorageComponent {
                    component_id: None,
                    resource_id: rid(&bind.resource),
                    offset_bytes: bind.offset,
                    length_bytes: bind.length,
                    element_type: bind.element_type,
                }],
            },
        };
        if let Some(extent) = bind.tokens {
            let projection = TokenProjection {
                value_id: vid(&bind.value),
                role: bind.role,
                ordinal,
                axis: 0,
                rank: 1,
                canonical_extent: extent,
            };
            self.node.work = match std::mem::replace(&mut self.node.work, NodeWorkContract::Fixed) {
                NodeWorkContract::Fixed => NodeWorkContract::Tokens {
                    source: projection.clone(),
                    projections: vec![projection],
                },
                NodeWorkContract::Tokens {
                    source,
                    mut projections,
                } => {
                    projections.push(projection);
                    projections.sort();
                    NodeWorkContract::Tokens {
                        source,
                        projections,
                    }
                }
            };
        }
        self.node.values.push(binding);
        self
    }

    /// Reads an f16 activation of `length` bytes.
    pub fn reads(self, value: &str, resource: &str, length: u64) -> Self {
        self.bind(Bind::new(value, ValueRole::Input, resource, length))
    }

    /// Writes an f16 activation of `length` bytes.
    pub fn writes(self, value: &str, resource: &str, length: u64) -> Self {
        self.bind(Bind::new(value, ValueRole::Output, resource, length))
    }

    /// Reads a token-scaled f16 activation of `tokens` tokens, `length` bytes.
    pub fn reads_tokens(self, value: &str, resource: &str, length: u64, tokens: u64) -> Self {
        self.bind(Bind {
            tokens: Some(tokens),
            ..Bind::new(value, ValueRole::Input, resource, length)
        })
    }

    /// Writes a token-scaled f16 activation of `tokens` tokens, `length` bytes.
    pub fn writes_tokens(self, value: &str, resource: &str, length: u64, tokens: u64) -> Self {
        self.bind(Bind {
            tokens: Some(tokens),
            ..Bind::new(value, ValueRole::Output, resource, length)
        })
    }

    /// Reads a weight of `length` bytes.
    pub fn reads_weight(self, value: &str, resource: &str, length: u64) -> Self {
        self.bind(Bind {
            usage: BufferUsage::Weights,
            ..Bind::new(value, ValueRole::Input, resource, length)
        })
    }

    /// Reads and writes a state of `length` bytes.
    pub fn updates_state(self, value: &str, resource: &str, length: u64) -> Self {
        self.bind(Bind {
            usage: BufferUsage::State,
            access: TensorAccess::ReadWrite,
            ..Bind::new(value, ValueRole::Input, resource, length)
        })
    }

    /// Depends on earlier nodes.
    pub fn after(mut self, dependencies: &[&str]) -> Self {
        self.node.dependencies = dependencies.iter().map(|d| nid(d)).collect();
        self.node.dependencies.sort();
        self
    }

    /// Sets the provider's value alignment.
    pub fn value_alignment(mut self, alignment: u64) -> Self {
        self.node.provider_resources.value_alignment_bytes = alignment;
        self
    }

    /// Adds a scratch workspace `resource/scratch/<node>`.
    pub fn scratch(mut self, requirement: WorkspaceRequirement) -> Self {
        self.node.provider_resources.scratch = Some(requirement);
        self.node.scratch_resource = Some(rid(&format!("resource/scratch/{}", self.node.id)));
        self
    }

    /// Adds a binding workspace `resource/binding/<node>`.
    pub fn binding_workspace(mut self, requirement: WorkspaceRequirement) -> Self {
        self.node.provider_resources.binding = Some(requirement);
        self.node.binding_resource = Some(rid(&format!("resource/binding/{}", self.node.id)));
        self
    }

    /// Adds a persistent workspace `resource/persistent/<node>`.
    pub fn persistent(mut self, requirement: WorkspaceRequirement) -> Self {
        self.node.provider_resources.persistent = Some(requirement);
        self.node.persistent_resource = Some(rid(&format!("resource/persistent/{}", self.node.id)));
        self
    }

    /// Fixed scratch of `bytes`, alignment 16.
    pub fn fixed_scratch(self, bytes: u64) -> Self {
        self.scratch(workspace(
            WorkspaceSizeFormula::Fixed { bytes },
            16,
            WorkspaceScope::Invocation,
        ))
    }

    /// Fixed binding workspace of `bytes`, alignment 16.
    pub fn fixed_binding(self, bytes: u64) -> Self {
        self.binding_workspace(workspace(
            WorkspaceSizeFormula::Fixed { bytes },
            16,
            WorkspaceScope::Invocation,
        ))
    }

    /// Adds the node: computes its resource closure and gives every new resource the
    /// linear+contiguous profile.
    pub fn done(mut self) {
        let mut resources: BTreeSet<ResourceId> = self
            .node
            .values
            .iter()
            .flat_map(|v| v.storage.components.iter().map(|c| c.resource_id.clone()))
            .collect();
        resources.extend(self.node.scratch_resource.clone());
        resources.extend(self.node.binding_resource.clone());
        resources.extend(self.node.persistent_resource.clone());
        for resource in &resources {
            self.fixture
                .profiles
                .entry(resource.clone())
                .or_insert(LINEAR);
        }
        self.node.resources = resources.into_iter().collect();
        self.fixture.nodes.push(self.node);
    }
}
