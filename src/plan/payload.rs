//! The execution plan's types (rules 1.10): per-node decisions and evidence, and the
//! payload that is hashed into the plan id.

use std::collections::BTreeSet;
use std::io::Write;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::memory_plan::{AllocationLifetime, MemoryPlan};
use super::settings::SelectionSettings;
use crate::canonical::{FieldValue, Replacement};
use crate::request::{
    AttributeId, CapabilityId, ContractVersion, DeviceId, ExecutionSemantics, ExecutionWeightPlan,
    ModelFamilyId, NodeId, OperationId, ProgramValueId, ProviderId, ProviderResourcePlan,
    QuantizationFormatId, ResourceId, SemanticValue, Sha256Hex, StateId, TensorAccess, TensorSpec,
    ValueBinding, ValueRole, WeightFormatId,
};

/// The plan schema version jointplan writes and accepts.
pub const PLAN_SCHEMA: ContractVersion = ContractVersion::new(1, 0);

/// One binding slot's projection onto the token axis.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenProjection {
    /// The value.
    pub value_id: ProgramValueId,
    /// Its role.
    pub role: ValueRole,
    /// Its ordinal.
    pub ordinal: u32,
    /// The token axis.
    pub axis: u32,
    /// The tensor rank.
    pub rank: u32,
    /// The extent of the token axis in the resolved tensor.
    pub canonical_extent: u64,
}

/// How a node's work scales, with every binding that carries the token axis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum NodeWorkContract {
    /// Independent of tokens.
    Fixed,
    /// Scales with scheduled tokens.
    Tokens {
        /// The projection named by the program.
        source: TokenProjection,
        /// Every projection, sorted (contains the source).
        projections: Vec<TokenProjection>,
    },
}

/// Kind of an exact alias.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AliasKind {
    /// The operation allowed it.
    MayAlias,
    /// The operation required it.
    MustAlias,
}

/// An output stored exactly in place of an input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExactAlias {
    /// The output value.
    pub output_value_id: ProgramValueId,
    /// Its ordinal.
    pub output_ordinal: u32,
    /// The input value.
    pub input_value_id: ProgramValueId,
    /// Its ordinal.
    pub input_ordinal: u32,
    /// May or must.
    pub kind: AliasKind,
}

/// How a node touches a program state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateEffect {
    /// The state.
    pub state_id: StateId,
    /// Its value.
    pub state_value_id: ProgramValueId,
    /// Its lifetime (request, sequence or step).
    pub lifetime: AllocationLifetime,
    /// Union of the node's accesses.
    pub access: TensorAccess,
    /// Resources of its components (sorted, non-empty).
    pub resource_ids: Vec<ResourceId>,
}

/// Why the selected provider was selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SelectionReason {
    /// The preferred provider was compatible and chosen.
    PreferredCompatible,
    /// No preference: the joint optimum.
    CanonicalCompatible,
    /// The preferred provider lost; evidence says why.
    FallbackFromPreferred,
}

/// One reason a provider is incompatible with a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CompatibilityRejection {
    /// The operation's version does not satisfy the node.
    OperationVersionMismatch {
        /// Version the node requires.
        required: ContractVersion,
        /// The operation's version.
        available: ContractVersion,
    },
    /// The provider's version does not satisfy the node.
    ProviderVersionMismatch {
        /// Version the node requires.
        required: ContractVersion,
        /// The provider's version.
        available: ContractVersion,
    },
    /// Capabilities the provider lacks.
    MissingCapabilities(BTreeSet<CapabilityId>),
    /// Weight formats the provider cannot read.
    UnsupportedWeightFormats(BTreeSet<WeightFormatId>),
    /// Quantization formats the provider cannot read.
    UnsupportedQuantizationFormats(BTreeSet<QuantizationFormatId>),
    /// The provider's determinism is below the policy's.
    InsufficientExecutionDeterminism {
        /// What the policy requires.
        required: crate::request::DeterminismRequirement,
        /// What the provider promises.
        available: ExecutionSemantics,
    },
}

/// Why a provider was not selected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RejectionReason {
    /// The preferred provider is not in the operation's catalog row.
    NotRegistered,
    /// The provider is incompatible with the node.
    Incompatible(Vec<CompatibilityRejection>),
    /// The provider cannot accept the storage profile chosen for these resources.
    StorageIncompatible {
        /// The resources (sorted, non-empty).
        resource_ids: Vec<ResourceId>,
    },
    /// A recorded selection setting ruled the provider out (`payload.selection_settings`).
    Setting(SettingRejection),
}

/// Which recorded selection setting made a node's preferred provider lose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SettingRejection {
    /// The node is pinned to another provider.
    PinnedElsewhere,
    /// The provider is forbidden at the node.
    Forbidden,
    /// The recorded (non-default) objective ranks another choice higher, and no storage
    /// conflict rules the provider out.
    Objective,
}

/// A provider that was not selected, with the reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RejectedProvider {
    /// The provider.
    pub provider_id: ProviderId,
    /// Why.
    pub reasons: RejectionReason,
}

/// The provider choice of one node, with its evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderSelection {
    /// The preferred provider, if any.
    pub requested_provider: Option<ProviderId>,
    /// The selected provider.
    pub selected_provider: ProviderId,
    /// Why it was selected.
    pub selection_reason: SelectionReason,
    /// Every provider not selected that has evidence, sorted by provider id.
    pub rejected_providers: Vec<RejectedProvider>,
}

/// One planned node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanNode {
    /// Node id.
    pub id: NodeId,
    /// Nodes that must run first (sorted, strict, all earlier).
    pub dependencies: Vec<NodeId>,
    /// Operation.
    pub operation_id: OperationId,
    /// Operation version the node requires.
    pub operation_version: ContractVersion,
    /// Declaration-order fingerprint of the operation.
    pub operation_fingerprint: Sha256Hex,
    /// The selected provider's implementation fingerprint.
    pub provider_implementation_fingerprint: Sha256Hex,
    /// The selected provider's execution semantics.
    pub provider_execution_semantics: ExecutionSemantics,
    /// The resolution's extra capabilities.
    pub required_capabilities: BTreeSet<CapabilityId>,
    /// Node attributes.
    pub attributes: std::collections::BTreeMap<AttributeId, SemanticValue>,
    /// Work contract.
    pub work: NodeWorkContract,
    /// Provider selection and evidence.
    pub selection: ProviderSelection,
    /// The selected provider's estimate.
    pub provider_resources: ProviderResourcePlan,
    /// Bindings.
    pub values: Vec<ValueBinding>,
    /// Exact aliases.
    pub exact_aliases: Vec<ExactAlias>,
    /// State effects, ascending by state.
    pub state_effects: Vec<StateEffect>,
    /// Scratch workspace resource.
    pub scratch_resource: Option<ResourceId>,
    /// Binding workspace resource.
    pub binding_resource: Option<ResourceId>,
    /// Persistent workspace resource.
    pub persistent_resource: Option<ResourceId>,
    /// Every resource the node touches (sorted, unique).
    pub resources: Vec<ResourceId>,
}

/// A value whose bytes survive until completion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetainedCompletionValue {
    /// The value.
    pub value_id: ProgramValueId,
    /// Its producer.
    pub producer_node_id: NodeId,
    /// The producer's output ordinal.
    pub output_ordinal: u32,
    /// Its resource.
    pub resource_id: ResourceId,
    /// Its offset.
    pub logical_offset_bytes: u64,
    /// Its tensor.
    pub tensor: TensorSpec,
}

/// The hashed content of an execution plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionPlanPayload {
    /// Plan schema version.
    pub schema: ContractVersion,
    /// `plan/sha256/<plan_hash>`.
    pub plan_id: String,
    /// Family.
    pub family_id: ModelFamilyId,
    /// Device.
    pub device_id: DeviceId,
    /// Device runtime implementation fingerprint.
    pub device_runtime_implementation_fingerprint: Sha256Hex,
    /// Family fingerprint.
    pub prepared_family_fingerprint: Sha256Hex,
    /// Program fingerprint.
    pub program_fingerprint: Sha256Hex,
    /// Catalog fingerprint.
    pub capability_catalog_fingerprint: Sha256Hex,
    /// Policy version.
    pub policy_version: ContractVersion,
    /// Canonical policy fingerprint.
    pub policy_fingerprint: Sha256Hex,
    /// Token ceiling.
    pub maximum_scheduled_tokens: u64,
    /// Execution weights.
    pub execution_weights: ExecutionWeightPlan,
    /// The execution schema's weight format.
    pub weight_format: WeightFormatId,
    /// The execution schema's quantization formats.
    pub quantization_formats: BTreeSet<QuantizationFormatId>,
    /// Retained values, by value id.
    pub retained_completion_values: Vec<RetainedCompletionValue>,
    /// Resources of program outputs (sorted, unique, non-empty).
    pub terminal_output_resources: Vec<ResourceId>,
    /// Nodes in execution order.
    pub nodes: Vec<PlanNode>,
    /// Memory plan.
    pub memory: MemoryPlan,
    /// The selection settings, where they differ from the defaults (omitted when all are
    /// default, so default plans keep their bytes).
    #[serde(default, skip_serializing_if = "SelectionSettings::is_default")]
    pub selection_settings: SelectionSettings,
}

impl ExecutionPlanPayload {
    /// Every node's selected provider, by node id (what a replay of the plan fixes).
    pub fn selected_providers(&self) -> std::collections::BTreeMap<NodeId, ProviderId> {
        self.nodes
            .iter()
            .map(|n| (n.id.clone(), n.selection.selected_provider.clone()))
            .collect()
    }
}

/// A built, hashed and internally validated plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionPlan {
    /// The payload.
    pub payload: ExecutionPlanPayload,
    /// Canonical sha256 of the payload without its plan id.
    pub plan_hash: Sha256Hex,
}

/// A plan is mostly its nodes (77% of DeepSeek-V3's): read on every core.
impl crate::json_input::LargeArray for ExecutionPlan {
    type Element = PlanNode;
    const PATH: &'static [&'static str] = &["payload", "nodes"];
    fn elements_mut(&mut self) -> &mut Vec<PlanNode> {
        &mut self.payload.nodes
    }
}

impl ExecutionPlanPayload {
    /// The nodes of the plan file form printed on the rayon pool
    /// ([`FieldValue::Elements`]): a replacement for [`crate::canonical::write_pretty_with`]
    /// that leaves the bytes as they are.
    pub fn nodes_printed_on_the_pool(&self) -> Replacement<'_> {
        Replacement {
            struct_name: "ExecutionPlanPayload",
            field: "nodes",
            value: FieldValue::Elements(&self.nodes),
        }
    }
}

impl ExecutionPlan {
    /// The plan as a JSON tree (its serde form), for callers that edit or inspect plans as
    /// JSON: one instance of the serializer, in the library, shared by every caller.
    pub fn to_json_tree(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }

    /// The plan as compact JSON text (its serde form): one instance of the serializer, in
    /// the library, shared by every caller.
    pub fn to_json_text(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// A plan from its JSON tree (the inverse of [`ExecutionPlan::to_json_tree`]).
    pub fn from_json_tree(tree: serde_json::Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(tree)
    }

    /// Writes the plan file form (pretty JSON and a final newline: the bytes of
    /// `serde_json::to_writer_pretty`, by [`crate::canonical::write_pretty_with`], the nodes
    /// printed on the rayon pool) to `writer`, streamed in chunks of a quarter megabyte, so
    /// a file needs no `BufWriter`.
    pub fn write_json<W: Write>(&self, writer: W) -> Result<W, serde_json::Error> {
        let nodes = self.payload.nodes_printed_on_the_pool();
        let mut writer = crate::canonical::write_pretty_with(self, writer, &[nodes])?;
        writer.write_all(b"\n").map_err(serde_json::Error::io)?;
        Ok(writer)
    }

    /// Bytes of the plan file form ([`ExecutionPlan::write_json`]), counted without
    /// keeping them: what the `maximum_plan_json_bytes` wire limit is measured on.
    pub fn json_bytes(&self) -> Result<u64, serde_json::Error> {
        Ok(self.write_json(ByteCount(0))?.0)
    }
}

/// An `io::Write` that only counts.
struct ByteCount(u64);

impl Write for ByteCount {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let added = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        self.0 = self.0.saturating_add(added);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
