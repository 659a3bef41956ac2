//! What a model holds, read from its synthesized request and its single-device plan: every
//! weight tensor (its layer, dimensions, format class, bytes and how tensor parallelism
//! splits it), every layer's KV state as the plan provisions it, and the activation and
//! workspace bytes of the plan's memory report. Placement never re-derives a byte count the
//! single-device plan has: a placement on one device holds what that plan holds.
//!
//! The facts need the plan's contents, not its hash: the plan is built up to its payload
//! ([`ExecutionPlan::build_payload`]) and sealed (hashed and checked, as `plan` seals it)
//! only when a placement is written out and quotes its id ([`ModelFacts::seal`]). A search
//! that only asks whether a model places (the levers of an infeasible placement, the
//! validation tables' timings) never pays for a hash or a check of a plan it does not keep.

use std::collections::BTreeMap;

use crate::builder::BuildOptions;
use crate::plan::{AllocationLifetime, DynamicResourceDemand, ExecutionPlan, ExecutionPlanPayload};
use crate::request::{
    align_up, BufferUsage, PlanRequest, StateCapacityDemand, StateLifetime, StorageProfile,
    WeightComponentRole, WeightComponentSpec, WeightEncoding, WeightId,
};
use crate::study::ServingReport;
use crate::synth::architecture::MixerKind;
use crate::synth::registry::entry_of;
use crate::synth::weights::{weight_layout, WeightClass, WeightPlan};
use crate::synth::{Architecture, DeviceDescription, ModelConfig, ModelSource, WeightFormat};

use super::PlacementError;

/// Alignment of every weight component in a device's weight arenas (the synthesizer's
/// `WEIGHT_ALIGNMENT`: each shard is laid out as the single-device plan lays out a tensor).
pub const WEIGHT_ALIGNMENT: u64 = crate::synth::program::WEIGHT_ALIGNMENT;

/// Where a tensor lives in the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Home {
    /// The first stage (the embedding).
    First,
    /// One decoder layer.
    Layer(u32),
    /// The last stage (final norm, head).
    Last,
}

/// How tensor parallelism splits a tensor (the engines' linear layers, docs/placement.md
/// "Tensor parallelism": each rule cites the vLLM code it follows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Every rank holds all of it (norms, routers and their biases, the MLA
    /// down-projections, a row-parallel layer's bias).
    Replicate,
    /// Split into `degree` equal parts along `axis` (column- and row-parallel linears,
    /// vocabulary-parallel embedding and head, per-head vectors such as attention sinks).
    Split {
        /// The axis split.
        axis: usize,
    },
    /// K/V projections: split by heads along `axis`; with fewer heads than ranks each rank
    /// holds one head, replicated (vLLM's `QKVParallelLinear`).
    KvHeads {
        /// The axis of the heads.
        axis: usize,
        /// KV heads.
        heads: u64,
    },
    /// A routed expert group's tensor: under tensor-split experts split along `axis`, or
    /// held whole by every rank when `axis` is `None` (the down projection's bias, which
    /// vLLM's fused MoE allocates whole on every rank); under expert parallelism whole on
    /// the rank that owns the group.
    Expert {
        /// The axis split under tensor-split experts (`None`: every rank holds it whole).
        axis: Option<usize>,
        /// The group's index in its layer.
        group: u64,
    },
}

/// One weight tensor of the model.
#[derive(Clone, Debug)]
pub struct TensorFacts {
    /// Weight id.
    pub id: String,
    /// Where it lives.
    pub home: Home,
    /// Logical dimensions.
    pub dims: Vec<u64>,
    /// The format class that reproduces its components.
    pub class: WeightClass,
    /// How tensor parallelism splits it.
    pub rule: Rule,
    /// Physical bytes (Σ of its components).
    pub bytes: u64,
    /// Its components as stored: dimensions and encoding.
    pub components: Vec<(Vec<u64>, WeightEncoding)>,
    /// The checkpoint tensors it fuses (gate and up, say), as the layout reads them: their
    /// count sets a per-tensor scale's length, their names which patterns keep them dense.
    pub names: Vec<String>,
}

/// One layer's sequence state (KV cache, latent cache, recurrent state).
#[derive(Clone, Debug)]
pub struct StateFacts {
    /// The layer.
    pub layer: u32,
    /// State id.
    pub id: String,
    /// Bytes per token (token-scaled states), else 0.
    pub bytes_per_token: u64,
    /// Maximum tokens (token-scaled states), else 0.
    pub maximum_tokens: u64,
    /// Bytes of one sequence's state as the single-device plan provisions it.
    pub sequence_bytes: u64,
    /// Logical bytes of one sequence's state that is not token-scaled (a recurrent
    /// state), before the profile's rounding; else 0.
    pub fixed_bytes: u64,
    /// The storage profile the plan chose for it.
    pub profile: StorageProfile,
    /// Its alignment in the plan.
    pub alignment: u64,
    /// The layer's token mixer.
    pub mixer: MixerKind,
}

/// The single-device plan of a model's facts: built, or sealed into its plan id.
#[derive(Clone, Debug)]
pub enum SingleDevicePlan {
    /// Built up to its payload (the plan id unset), neither hashed nor checked.
    Built(Box<ExecutionPlanPayload>),
    /// Hashed and checked: its plan id.
    Sealed(String),
}

/// The model as placement sees it.
#[derive(Clone, Debug)]
pub struct ModelFacts {
    /// Family id.
    pub family: String,
    /// Weight format.
    pub format: WeightFormat,
    /// The architecture.
    pub architecture: Architecture,
    /// Decoder layers.
    pub layer_count: u32,
    /// Every weight tensor, in the request's order.
    pub tensors: Vec<TensorFacts>,
    /// Every sequence state.
    pub states: Vec<StateFacts>,
    /// Activation bytes of the single-device plan's report (at the ceilings).
    pub activation_bytes: u64,
    /// Workspace bytes of the single-device plan's report (at the ceilings).
    pub workspace_bytes: u64,
    /// Weight bytes of the single-device plan's report.
    pub plan_weight_bytes: u64,
    /// KV bytes per sequence of the single-device plan's report.
    pub plan_kv_bytes_per_sequence: u64,
    /// The single-device plan the facts were read from.
    pub single_device: SingleDevicePlan,
    /// The policy's sequence ceiling (`maximum_active_sequences`): what the activations and
    /// workspaces are sized for and the most a serving point runs at once.
    pub sequences: u64,
    /// The policy's requirement (`minimum_sequences`, 1 when absent): sequences whose KV
    /// cache must fit at the context at once, the rule every engine starts by (one request
    /// of the maximum length). What a placement provisions KV cache for.
    pub required_sequences: u64,
    /// The policy's context (the largest token-scaled state's maximum tokens).
    pub context_tokens: u64,
    /// The policy's scheduled-token ceiling.
    pub scheduled_tokens: u64,
    /// Policy id.
    pub policy: String,
    /// Bytes of one activation element.
    pub activation_element_bytes: u64,
    /// The synthesized request (its program prices the time model).
    pub request: PlanRequest,
    /// The provider the single-device plan selected for each node.
    pub providers: BTreeMap<crate::request::NodeId, crate::request::ProviderId>,
}

fn model_error(message: impl Into<String>) -> PlacementError {
    PlacementError::Model(message.into())
}

/// A device description like `device` with room for every byte of any model: the plan of
/// the whole model on it gives the per-layer figures whatever the set's devices hold.
fn roomy(device: &DeviceDescription) -> DeviceDescription {
    let mut roomy = device.clone();
    roomy.total_memory_bytes = 1 << 50;
    roomy
}

const CLASSES: [WeightClass; 5] = [
    WeightClass::Projection,
    WeightClass::Embedding,
    WeightClass::Head,
    WeightClass::Norm,
    WeightClass::Plain,
];

fn stored(components: &[&WeightComponentSpec]) -> Vec<(Vec<u64>, WeightEncoding)> {
    components
        .iter()
        .map(|c| (c.dimensions.clone(), c.encoding.clone()))
        .collect()
}

/// The layout's components of `dims` in `format` and `class` for the checkpoint tensors
/// `names`, as `(dimensions, encoding)`.
pub fn layout_of(
    format: WeightFormat,
    id: &str,
    dims: &[u64],
    class: WeightClass,
    names: &[String],
) -> Option<Vec<(Vec<u64>, WeightEncoding)>> {
    // The matrix classes read the two last dimensions: a vector is never one of them.
    if dims.len() < 2 && !matches!(class, WeightClass::Norm | WeightClass::Plain) {
        return None;
    }
    let weight = WeightId::new(id).ok()?;
    let layout = weight_layout(&WeightPlan::of(format), &weight, dims, class, names).ok()?;
    let mut components: Vec<&WeightComponentSpec> = layout.components.iter().collect();
    components.sort_by(|a, b| a.id.cmp(&b.id));
    Some(stored(&components))
}

/// The checkpoint names a tensor's layout was made from: its values' external names
/// without the suffix the layout appended (`.weight`, `.qweight`, `_blocks`,
/// `.weight_packed`; a bias keeps its full name).
fn checkpoint_names(parts: &[&WeightComponentSpec]) -> Vec<String> {
    const SUFFIXES: [&str; 4] = [".weight_packed", ".qweight", ".weight", "_blocks"];
    let values = parts.iter().find(|c| {
        matches!(
            c.role,
            WeightComponentRole::Values | WeightComponentRole::PackedValues
        )
    });
    values.map_or_else(Vec::new, |c| {
        c.external_names
            .iter()
            .map(|n| {
                SUFFIXES
                    .iter()
                    .find_map(|s| n.strip_suffix(s))
                    .unwrap_or(n)
                    .to_owned()
            })
            .collect()
    })
}

/// What of a tensor's checkpoint names its layout reads (their count and whether they are
/// routed experts): tensors equal in these and in shape share a layout.
pub fn names_key(names: &[String]) -> (usize, bool) {
    (names.len(), names.iter().all(|n| n.contains(".experts.")))
}

/// The rule of a weight by its name (docs/placement.md, "Tensor parallelism"), `None` for
/// a name no rule covers.
fn rule_of(rest: &str, dims: &[u64], kv_heads: u64) -> Option<Rule> {
    let last = dims.len().saturating_sub(1);
    let rows = dims.len().saturating_sub(2);
    if let Some(tail) = rest.strip_prefix("experts.") {
        let (group, name) = tail.split_once('.')?;
        let group = group.parse::<u64>().ok()?;
        let axis = match name {
            "gate_up" => Some(rows),
            "down" => Some(last),
            // gpt-oss's expert biases: `[experts, 2, intermediate]` splits with its gate
            // and up projection; `[experts, hidden]` is whole on every rank.
            "gate_up.bias" => Some(last),
            "down.bias" => None,
            _ => return None,
        };
        return Some(Rule::Expert { axis, group });
    }
    Some(match rest {
        "q_proj" | "q_b_proj" | "kv_b_proj" | "q_proj.bias" => Rule::Split { axis: 0 },
        "k_proj" | "v_proj" | "k_proj.bias" | "v_proj.bias" => Rule::KvHeads {
            axis: 0,
            heads: kv_heads,
        },
        "o_proj" | "out_proj" => Rule::Split { axis: last },
        "feed_forward.gate_up" | "shared_expert.gate_up" => Rule::Split { axis: rows },
        "feed_forward.down" | "shared_expert.down" => Rule::Split { axis: last },
        "token_embedding" | "lm_head" => Rule::Split { axis: 0 },
        // Per attention head (gpt-oss's sinks) or per gated-DeltaNet head or channel.
        "sinks" | "in_proj_qkvz" | "in_proj_ba" | "conv1d" | "dt_bias" | "a_log" => {
            Rule::Split { axis: 0 }
        }
        "router" | "router.bias" | "q_a_proj" | "kv_a_proj" | "o_proj.bias" => Rule::Replicate,
        "eh_proj.embedding" | "eh_proj.hidden" => Rule::Replicate,
        other if other.ends_with("norm") || other.ends_with("norm.bias") => Rule::Replicate,
        _ => return None,
    })
}

/// The rule of weight `id` (named `rest` within its layer), or an error naming it.
fn rule_for(id: &str, rest: &str, dims: &[u64], kv_heads: u64) -> Result<Rule, PlacementError> {
    rule_of(rest, dims, kv_heads).ok_or_else(|| {
        model_error(format!(
            "weight {id}: no tensor-parallel rule covers the name `{rest}`; add one to \
             `rule_of` in src/placement/model.rs (and docs/placement.md, \"Tensor \
             parallelism\") saying how the engine shards it"
        ))
    })
}

fn home_of(id: &str) -> Result<(Home, &str), PlacementError> {
    let name = id
        .strip_prefix("weight.")
        .ok_or_else(|| model_error(format!("weight {id}: not a synthesized weight id")))?;
    if let Some(tail) = name.strip_prefix("layer.") {
        let (index, rest) = tail
            .split_once('.')
            .ok_or_else(|| model_error(format!("weight {id}: no name after its layer")))?;
        let layer = index
            .parse::<u32>()
            .map_err(|_| model_error(format!("weight {id}: layer {index} is not a number")))?;
        return Ok((Home::Layer(layer), rest));
    }
    Ok(if name == "token_embedding" {
        (Home::First, name)
    } else {
        (Home::Last, name)
    })
}

fn layer_of_state(id: &str) -> Option<u32> {
    id.strip_prefix("state.layer.")?
        .split('.')
        .next()?
        .parse()
        .ok()
}

impl ModelFacts {
    /// Synthesizes `source` under `policy` on a roomy copy of `device` (read from `file`),
    /// plans it, and
    /// reads the model's tensors, states and step bytes.
    pub fn gather(
        source: &ModelSource,
        device: &DeviceDescription,
        file: &std::path::Path,
        options: &BuildOptions,
        policy: &crate::synth::PolicyPreset,
    ) -> Result<ModelFacts, PlacementError> {
        let synthesized = source
            .synthesize_on_with_policy(&roomy(device), file, policy)
            .map_err(|e| PlacementError::Synth(Box::new(e)))?;
        let request = synthesized.request;
        let (payload, _) = ExecutionPlan::build_payload(&request, options)
            .map_err(|e| PlacementError::Plan(Box::new(e)))?;
        let (report, _) = ServingReport::of_payload(&request, &payload)
            .map_err(|e| PlacementError::Study(Box::new(e)))?;
        let mut facts = Self::read(request, payload, &report, synthesized.weight_format)?;
        facts.required_sequences = u64::from(policy.required_sequences()).min(facts.sequences);
        Ok(facts)
    }

    /// The facts with their single-device plan sealed: hashed and checked as `plan` seals
    /// it (the same errors), its payload dropped for its id.
    pub fn seal(mut self, options: &BuildOptions) -> Result<ModelFacts, PlacementError> {
        if let SingleDevicePlan::Built(payload) = self.single_device {
            let plan = ExecutionPlan::seal(*payload, &self.request, options)
                .map_err(|e| PlacementError::Plan(Box::new(e)))?;
            self.single_device = SingleDevicePlan::Sealed(plan.payload.plan_id);
        }
        Ok(self)
    }

    /// The single-device plan's id, once [`ModelFacts::seal`]ed.
    pub fn plan_id(&self) -> Option<&str> {
        match &self.single_device {
            SingleDevicePlan::Sealed(id) => Some(id),
            SingleDevicePlan::Built(_) => None,
        }
    }

    fn read(
        request: PlanRequest,
        plan: ExecutionPlanPayload,
        report: &ServingReport,
        format: WeightFormat,
    ) -> Result<ModelFacts, PlacementError> {
        let config: ModelConfig = serde_json::from_value(request.family.canonical_config.clone())
            .map_err(|e| model_error(format!("the family's config: {e}")))?;
        let architecture = entry_of(&config)
            .and_then(|entry| entry.specialize(&config, config.architecture()?))
            .map_err(|e| PlacementError::Synth(Box::new(e)))?;
        let layer_count =
            u32::try_from(architecture.layers.len()).map_err(|_| model_error("too many layers"))?;
        let kv_heads = architecture.attention.key_value_heads;
        let schema = &request.family.weight_schema;
        let components: BTreeMap<&str, &WeightComponentSpec> = schema
            .components
            .iter()
            .map(|c| (c.id.as_str(), c))
            .collect();
        let mut tensors = Vec::with_capacity(schema.tensors.len());
        // Tensors of one shape and encoding share a class: look it up once.
        let mut classes: BTreeMap<String, WeightClass> = BTreeMap::new();
        for tensor in &schema.tensors {
            let id = tensor.id.as_str();
            let mut parts: Vec<&WeightComponentSpec> = Vec::with_capacity(tensor.components.len());
            for c in &tensor.components {
                parts.push(components.get(c.as_str()).copied().ok_or_else(|| {
                    model_error(format!("weight {id}: component {c} is not in the schema"))
                })?);
            }
            parts.sort_by(|a, b| a.id.cmp(&b.id));
            let held = stored(&parts);
            let names = checkpoint_names(&parts);
            let mut bytes = 0u64;
            for part in &parts {
                bytes = part
                    .physical_bytes()
                    .and_then(|b| bytes.checked_add(b))
                    .ok_or_else(|| model_error(format!("weight {id}: bytes overflow")))?;
            }
            let key = format!(
                "{:?} {:?} {:?} {:?}",
                held,
                tensor.dimensions,
                tensor.logical_element_type,
                names_key(&names)
            );
            let class = match classes.get(&key) {
                Some(class) => *class,
                None => {
                    let class = CLASSES
                        .into_iter()
                        .find(|class| {
                            layout_of(format, id, &tensor.dimensions, *class, &names).as_ref()
                                == Some(&held)
                        })
                        .ok_or_else(|| {
                            model_error(format!(
                                "weight {id}: no class of the {} format reproduces its components",
                                format.name()
                            ))
                        })?;
                    classes.insert(key, class);
                    class
                }
            };
            let (home, rest) = home_of(id)?;
            if let Home::Layer(layer) = home {
                if layer >= layer_count {
                    return Err(model_error(format!(
                        "weight {id}: layer {layer} is beyond the {layer_count} layers"
                    )));
                }
            }
            tensors.push(TensorFacts {
                id: id.to_owned(),
                home,
                rule: rule_for(id, rest, &tensor.dimensions, kv_heads)?,
                dims: tensor.dimensions.clone(),
                class,
                bytes,
                components: held,
                names,
            });
        }
        let states = Self::states(&request, &plan, &architecture)?;
        let context_tokens = states.iter().map(|s| s.maximum_tokens).max().unwrap_or(0);
        let providers = plan
            .nodes
            .iter()
            .map(|n| (n.id.clone(), n.selection.selected_provider.clone()))
            .collect();
        Ok(ModelFacts {
            family: request.family.family_id.to_string(),
            format,
            layer_count,
            tensors,
            states,
            activation_bytes: report.activation_bytes,
            workspace_bytes: report.workspace_bytes,
            plan_weight_bytes: report.weights_bytes,
            plan_kv_bytes_per_sequence: report.kv_bytes_per_sequence,
            single_device: SingleDevicePlan::Built(Box::new(plan)),
            sequences: u64::from(request.policy.maximum_active_sequences),
            required_sequences: 1,
            context_tokens,
            scheduled_tokens: request.policy.maximum_scheduled_tokens,
            policy: request.policy.policy_id.to_string(),
            activation_element_bytes: format.activation_type().byte_size(),
            architecture,
            providers,
            request,
        })
    }

    fn states(
        request: &PlanRequest,
        plan: &ExecutionPlanPayload,
        architecture: &Architecture,
    ) -> Result<Vec<StateFacts>, PlacementError> {
        let descriptors: BTreeMap<&str, _> = plan
            .memory
            .dynamic_descriptors
            .iter()
            .filter(|d| d.usage == BufferUsage::State && d.lifetime == AllocationLifetime::Sequence)
            .map(|d| (d.base_resource_id.as_str(), d))
            .collect();
        let mut states = Vec::new();
        for state in &request.family.program.states {
            if state.lifetime != StateLifetime::Sequence {
                continue;
            }
            let id = state.id.as_str();
            let layer = layer_of_state(id)
                .ok_or_else(|| model_error(format!("state {id}: not a layer's state")))?;
            let mixer = architecture
                .layers
                .get(layer as usize)
                .map(|l| l.mixer)
                .ok_or_else(|| model_error(format!("state {id}: no layer {layer}")))?;
            let name = id.strip_prefix("state.").unwrap_or(id);
            let resource = format!("resource/state/{name}");
            let descriptor = descriptors.get(resource.as_str()).ok_or_else(|| {
                model_error(format!("state {id}: the plan has no descriptor {resource}"))
            })?;
            let (bytes_per_token, maximum_tokens) = match state.capacity_demand {
                StateCapacityDemand::TokenScaled {
                    bytes_per_token,
                    maximum_tokens,
                } => (bytes_per_token, maximum_tokens),
                _ => (0, 0),
            };
            let logical = match descriptor.demand {
                DynamicResourceDemand::Fixed { bytes } => bytes,
                DynamicResourceDemand::Tokens {
                    bytes_per_token,
                    maximum_tokens,
                } => bytes_per_token
                    .checked_mul(maximum_tokens)
                    .ok_or_else(|| model_error(format!("state {id}: bytes overflow")))?,
                _ => {
                    return Err(model_error(format!(
                        "state {id}: a demand other than fixed or per token"
                    )))
                }
            };
            let profile = descriptor.storage.profile;
            let sequence_bytes = profile
                .quantize(logical, descriptor.alignment_bytes)
                .ok_or_else(|| model_error(format!("state {id}: bytes overflow")))?;
            states.push(StateFacts {
                layer,
                id: id.to_owned(),
                bytes_per_token,
                maximum_tokens,
                sequence_bytes,
                fixed_bytes: if bytes_per_token == 0 { logical } else { 0 },
                profile,
                alignment: descriptor.alignment_bytes,
                mixer,
            });
        }
        Ok(states)
    }

    /// Aligned bytes of components as one device's weight arena lays them out.
    pub fn arena_bytes(components: &[(Vec<u64>, WeightEncoding)]) -> Option<u64> {
        components.iter().try_fold(0u64, |acc, (dims, encoding)| {
            let elements = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
            let bytes = encoding.physical_bytes(elements)?;
            acc.checked_add(align_up(bytes, WEIGHT_ALIGNMENT)?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt_oss_tensors_follow_vllm() {
        let dims = [1, 2880];
        assert_eq!(rule_of("o_proj.bias", &[2880], 8), Some(Rule::Replicate));
        assert_eq!(rule_of("router.bias", &[32], 8), Some(Rule::Replicate));
        assert_eq!(rule_of("sinks", &[64], 8), Some(Rule::Split { axis: 0 }));
        assert_eq!(
            rule_of("experts.3.gate_up.bias", &[1, 2, 2880], 8),
            Some(Rule::Expert {
                axis: Some(2),
                group: 3
            })
        );
        assert_eq!(
            rule_of("experts.3.down.bias", &dims, 8),
            Some(Rule::Expert {
                axis: None,
                group: 3
            })
        );
    }

    #[test]
    fn a_name_without_a_rule_is_an_error_naming_it() {
        assert_eq!(rule_of("mystery_proj", &[4, 4], 8), None);
        assert_eq!(rule_of("experts.x.down", &[1, 4, 4], 8), None);
        assert_eq!(rule_of("experts.0.up_gate", &[1, 4, 4], 8), None);
        let error = rule_for("weight.layer.0.mystery_proj", "mystery_proj", &[4, 4], 8)
            .unwrap_err()
            .to_string();
        assert!(error.contains("weight.layer.0.mystery_proj"), "{error}");
        assert!(error.contains("add one to `rule_of`"), "{error}");
    }
}
