//! The decoder graph: embedding, one block per layer, final norm and logits.
//!
//! Per layer (`i`), with `x` the layer input (the residual stream):
//! * grouped-query attention: `input_norm` (rms_norm) → `q_proj`, `k_proj`, `v_proj`
//!   (dense_linear) → optional per-head `q_norm`/`k_norm` in place → `attention`
//!   (causal_paged_attention, KV state `state.layer.{i}.kv` read_write; written in place over
//!   the query when the output has the query's shape) → `o_proj` → `attention_residual`
//!   (residual_add in place over `x`);
//! * latent attention (MLA): `input_norm` → `q_a_proj` → `q_a_norm` → `q_b_proj` (or one
//!   `q_proj`), `kv_a_proj` (compressed latent + rotary key) → `attention`
//!   (causal_paged_latent_attention over `state.layer.{i}.latent_kv`, with the `kv_b`
//!   up-projection absorbed) → `o_proj` → `attention_residual`;
//! * Gated DeltaNet: `input_norm` → `linear_attention` (gated_delta_recurrent_attention with
//!   `state.layer.{i}.conv` and `state.layer.{i}.delta`, zero-initialised) →
//!   `attention_residual`;
//! * then `post_attention_norm` and either a dense `feed_forward` (dense_swiglu) +
//!   `residual` in place, or a `router` (moe_router), an optional `shared_expert`
//!   (dense_swiglu) + `shared_residual` in place, and one `expert.{g}` node per group of
//!   routed experts (routed_expert_swiglu), each accumulating its experts' weighted outputs
//!   into the residual stream in place. The chain of in-place accumulations orders the
//!   expert groups and keeps one `[tokens, hidden]` buffer per layer.

use crate::request::{ElementType, ModelFamilyId, ProgramValueId, WeightLayoutId};

use super::architecture::{
    Architecture, FeedForwardKind, GateActivation, LayerSpec, MixerKind, NormPlacement,
};
use super::gguf::GgufModel;
use super::kv_cache::KvCacheDtype;
use super::operation::Operation;
use super::program::{Attr, ProgramBuilder, ProgramParts};
use super::weights::{WeightClass, WeightFormat, WeightPlan};
use super::SynthError;

use Attr::{B, R, S, U};

mod mixers;
mod mtp;

use mtp::MtpInputs;

/// What the graph is built from.
pub struct GraphSpec<'a> {
    /// The validated architecture (overrides applied).
    pub arch: &'a Architecture,
    /// Family id.
    pub family_id: ModelFamilyId,
    /// Weight layout id.
    pub layout_id: WeightLayoutId,
    /// Weight format and the modules it keeps dense.
    pub weights: WeightPlan,
    /// The KV cache's element type.
    pub kv_cache: KvCacheDtype,
    /// Token ceiling of one step (the extent of every activation's token axis).
    pub tokens: u64,
    /// Longest context of a sequence (the KV states' `maximum_tokens`).
    pub context_tokens: u64,
    /// Routed experts per node.
    pub expert_group_size: u64,
}

struct Graph<'a> {
    b: ProgramBuilder,
    spec: &'a GraphSpec<'a>,
    act: ElementType,
    /// The KV caches' element type.
    kv: ElementType,
}

fn names(list: &[String]) -> Vec<String> {
    list.to_vec()
}

impl Graph<'_> {
    fn arch(&self) -> &Architecture {
        self.spec.arch
    }

    fn t(&self) -> u64 {
        self.spec.tokens
    }

    fn eps(&self) -> Attr {
        R(self.arch().rms_norm_eps)
    }

    fn rope_attrs(&self) -> Result<Vec<(&'static str, Attr)>, SynthError> {
        let arch = self.arch();
        let mut attrs = vec![("rope_theta", R(arch.rope_theta))];
        match &arch.rope_scaling {
            None => attrs.push(("rope_scaling", S("none".to_owned()))),
            Some(scaling) => {
                if !matches!(
                    scaling.kind.as_str(),
                    "dynamic" | "linear" | "llama3" | "longrope" | "yarn"
                ) {
                    return Err(SynthError::config(
                        "rope_scaling.rope_type",
                        format!(
                            "{:?} is not one of default, dynamic, linear, llama3, longrope (su), yarn",
                            scaling.kind
                        ),
                    ));
                }
                attrs.push(("rope_scaling", S(scaling.kind.clone())));
                attrs.push(("rope_scaling_factor", R(scaling.factor)));
            }
        }
        Ok(attrs)
    }

    fn rms_norm(
        &mut self,
        name: &str,
        x: &ProgramValueId,
        weight: ProgramValueId,
        width: u64,
    ) -> Result<ProgramValueId, SynthError> {
        let out = self.b.activation(name, vec![self.t(), width], self.act)?;
        let eps = self.eps();
        self.b.node(
            name,
            Operation::RmsNorm,
            vec![x.clone(), weight],
            vec![out.clone()],
            vec![("hidden_size", U(width)), ("epsilon", eps)],
        )?;
        Ok(out)
    }

    fn linear(
        &mut self,
        name: &str,
        x: &ProgramValueId,
        weight: ProgramValueId,
        in_features: u64,
        out_features: u64,
    ) -> Result<ProgramValueId, SynthError> {
        self.projection(name, x, vec![weight], in_features, out_features)
    }

    /// A projection weight `[out_features, in_features]` of `group` (the checkpoint tensor
    /// `hf_name`) and the linear layer `name` that applies it to `x`.
    fn projected(
        &mut self,
        name: &str,
        group: &str,
        hf_name: &str,
        x: &ProgramValueId,
        in_features: u64,
        out_features: u64,
    ) -> Result<ProgramValueId, SynthError> {
        let weight = self.b.weight(
            name,
            group,
            vec![out_features, in_features],
            WeightClass::Projection,
            &[hf_name.to_owned()],
        )?;
        self.linear(name, x, weight, in_features, out_features)
    }

    /// A linear layer over `weights`: the matrix, and the bias (if any) after it.
    fn projection(
        &mut self,
        name: &str,
        x: &ProgramValueId,
        weights: Vec<ProgramValueId>,
        in_features: u64,
        out_features: u64,
    ) -> Result<ProgramValueId, SynthError> {
        let out = self
            .b
            .activation(name, vec![self.t(), out_features], self.act)?;
        let op = if weights.len() > 1 {
            Operation::BiasedDenseLinear
        } else {
            Operation::DenseLinear
        };
        let mut inputs = vec![x.clone()];
        inputs.extend(weights);
        self.b.node(
            name,
            op,
            inputs,
            vec![out.clone()],
            vec![
                ("in_features", U(in_features)),
                ("out_features", U(out_features)),
            ],
        )?;
        Ok(out)
    }

    fn residual(
        &mut self,
        name: &str,
        stream: &ProgramValueId,
        addend: ProgramValueId,
    ) -> Result<ProgramValueId, SynthError> {
        let out = self.b.in_place(name, stream)?;
        let hidden = self.arch().hidden_size;
        self.b.node(
            name,
            Operation::ResidualAdd,
            vec![stream.clone(), addend],
            vec![out.clone()],
            vec![("hidden_size", U(hidden))],
        )?;
        Ok(out)
    }

    fn swiglu(
        &mut self,
        name: &str,
        group: &str,
        hf: &str,
        x: &ProgramValueId,
        intermediate: u64,
    ) -> Result<ProgramValueId, SynthError> {
        let hidden = self.arch().hidden_size;
        let gate_up_names = if self.arch().fused_projections {
            vec![format!("{hf}.gate_up_proj")]
        } else {
            names(&[format!("{hf}.gate_proj"), format!("{hf}.up_proj")])
        };
        let gate_up = self.b.weight(
            &format!("{name}.gate_up"),
            group,
            vec![2, intermediate, hidden],
            WeightClass::Projection,
            &gate_up_names,
        )?;
        let down = self.b.weight(
            &format!("{name}.down"),
            group,
            vec![hidden, intermediate],
            WeightClass::Projection,
            &[format!("{hf}.down_proj")],
        )?;
        let out = self.b.activation(name, vec![self.t(), hidden], self.act)?;
        let mut attrs = vec![
            ("hidden_size", U(hidden)),
            ("intermediate_size", U(intermediate)),
        ];
        if self.arch().gate_activation == GateActivation::GeluTanh {
            attrs.push(("gate_activation", S("gelu_tanh".to_owned())));
        }
        self.b.node(
            name,
            Operation::DenseSwiglu,
            vec![x.clone(), gate_up, down],
            vec![out.clone()],
            attrs,
        )?;
        Ok(out)
    }

    fn norm_weight(
        &mut self,
        name: &str,
        group: &str,
        width: u64,
        hf: &str,
    ) -> Result<ProgramValueId, SynthError> {
        self.b.weight(
            name,
            group,
            vec![width],
            WeightClass::Norm,
            &[hf.to_owned()],
        )
    }

    /// A LayerNorm with weight `{name}` and bias `{name}.bias` (checkpoint `{hf}.weight`,
    /// `{hf}.bias`) over `x`, the node `node_name`.
    fn layer_norm(
        &mut self,
        name: &str,
        node_name: &str,
        group: &str,
        x: &ProgramValueId,
        hf: &str,
    ) -> Result<ProgramValueId, SynthError> {
        let hidden = self.arch().hidden_size;
        let w = self.norm_weight(name, group, hidden, hf)?;
        let bias = self.norm_weight(
            &format!("{name}.bias"),
            group,
            hidden,
            &format!("{hf}.bias"),
        )?;
        let out = self
            .b
            .activation(node_name, vec![self.t(), hidden], self.act)?;
        let eps = self.eps();
        self.b.node(
            node_name,
            Operation::LayerNorm,
            vec![x.clone(), w, bias],
            vec![out.clone()],
            vec![("hidden_size", U(hidden)), ("epsilon", eps)],
        )?;
        Ok(out)
    }

    /// The norm before a sublayer, `name` its weight and node: an RMSNorm, a LayerNorm with
    /// bias, or none (post-norm architectures: `x` itself).
    fn pre_norm(
        &mut self,
        name: &str,
        group: &str,
        x: &ProgramValueId,
        hf: &str,
    ) -> Result<ProgramValueId, SynthError> {
        let hidden = self.arch().hidden_size;
        match self.arch().norm_placement {
            NormPlacement::Post => Ok(x.clone()),
            NormPlacement::Pre => {
                let w = self.norm_weight(name, group, hidden, hf)?;
                self.rms_norm(name, x, w, hidden)
            }
            NormPlacement::PreLayerNorm => self.layer_norm(name, name, group, x, hf),
        }
    }

    fn routed(
        &mut self,
        i: usize,
        stream: &ProgramValueId,
        normed: &ProgramValueId,
    ) -> Result<ProgramValueId, SynthError> {
        let arch = self.arch().clone();
        let e = arch
            .experts
            .ok_or_else(|| SynthError::Internal("routed layer without experts".to_owned()))?;
        // PhiMoE's checkpoint calls the mixture `block_sparse_moe` and the experts'
        // gate, up and down matrices `w1`, `w3` and `w2`.
        let (mixture, gate_name, up_name, down_name) = if arch.block_sparse_moe {
            ("block_sparse_moe", "w1", "w3", "w2")
        } else {
            ("mlp", "gate_proj", "up_proj", "down_proj")
        };
        let (group, hf, l) = (
            format!("layer.{i}"),
            format!("model.layers.{i}.{mixture}"),
            format!("layer.{i}"),
        );
        let hidden = arch.hidden_size;
        let t = self.t();
        let k = e.experts_per_token;
        // gpt-oss names its router `router` and gives it and the experts biases.
        let biased = arch.expert_biases;
        let router_name = if biased {
            format!("{hf}.router")
        } else {
            format!("{hf}.gate")
        };
        let mut router_inputs = vec![normed.clone()];
        router_inputs.push(self.b.weight(
            &format!("{l}.router"),
            &group,
            vec![e.routed_experts, hidden],
            WeightClass::Plain,
            std::slice::from_ref(&router_name),
        )?);
        if biased {
            router_inputs.push(self.b.weight(
                &format!("{l}.router.bias"),
                &group,
                vec![e.routed_experts],
                WeightClass::Norm,
                &[format!("{router_name}.bias")],
            )?);
        }
        let weights =
            self.b
                .activation(&format!("{l}.route_weights"), vec![t, k], ElementType::F32)?;
        let indices =
            self.b
                .activation(&format!("{l}.route_indices"), vec![t, k], ElementType::I32)?;
        self.b.node(
            &format!("{l}.router"),
            if biased {
                Operation::BiasedMoeRouter
            } else {
                Operation::MoeRouter
            },
            router_inputs,
            vec![weights.clone(), indices.clone()],
            vec![
                ("experts", U(e.routed_experts)),
                ("experts_per_token", U(k)),
                (
                    "scoring",
                    S(if e.sigmoid_scoring {
                        "sigmoid"
                    } else {
                        "softmax"
                    }
                    .to_owned()),
                ),
                ("normalize_top_k", B(e.normalize_top_k)),
                ("routed_scaling_factor", R(e.routed_scaling_factor)),
                ("expert_groups", U(e.expert_groups)),
                ("top_k_groups", U(e.top_k_groups)),
                ("layer_index", U(i as u64)),
            ],
        )?;
        let mut acc = stream.clone();
        if e.shared_intermediate_size > 0 {
            let shared = self.swiglu(
                &format!("{l}.shared_expert"),
                &group,
                &format!("{hf}.shared_experts"),
                normed,
                e.shared_intermediate_size,
            )?;
            acc = self.residual(&format!("{l}.shared_residual"), &acc, shared)?;
        }
        let size = self.spec.expert_group_size.max(1);
        let groups = e.routed_experts.div_ceil(size);
        let intermediate = e.expert_intermediate_size;
        for g in 0..groups {
            let first = g * size;
            let count = size.min(e.routed_experts - first);
            let experts: Vec<u64> = (first..first + count).collect();
            let gate_up = self.b.weight(
                &format!("{l}.experts.{g}.gate_up"),
                &group,
                vec![count, 2, intermediate, hidden],
                WeightClass::Projection,
                &experts
                    .iter()
                    .flat_map(|x| {
                        [
                            format!("{hf}.experts.{x}.{gate_name}"),
                            format!("{hf}.experts.{x}.{up_name}"),
                        ]
                    })
                    .collect::<Vec<_>>(),
            )?;
            let down = self.b.weight(
                &format!("{l}.experts.{g}.down"),
                &group,
                vec![count, hidden, intermediate],
                WeightClass::Projection,
                &experts
                    .iter()
                    .map(|x| format!("{hf}.experts.{x}.{down_name}"))
                    .collect::<Vec<_>>(),
            )?;
            let name = if g + 1 == groups {
                format!("{l}.output")
            } else {
                format!("{l}.expert.{g}")
            };
            let mut inputs = vec![
                acc.clone(),
                normed.clone(),
                weights.clone(),
                indices.clone(),
                gate_up,
                down,
            ];
            if biased {
                inputs.push(self.b.weight(
                    &format!("{l}.experts.{g}.gate_up.bias"),
                    &group,
                    vec![count, 2, intermediate],
                    WeightClass::Norm,
                    &[format!("{hf}.experts.gate_up_proj_bias")],
                )?);
                inputs.push(self.b.weight(
                    &format!("{l}.experts.{g}.down.bias"),
                    &group,
                    vec![count, hidden],
                    WeightClass::Norm,
                    &[format!("{hf}.experts.down_proj_bias")],
                )?);
            }
            let out = self.b.in_place(&name, &acc)?;
            self.b.node(
                &format!("{l}.expert.{g}"),
                if biased {
                    Operation::BiasedRoutedExpertSwiglu
                } else {
                    Operation::RoutedExpertSwiglu
                },
                inputs,
                vec![out.clone()],
                vec![
                    ("first_expert", U(first)),
                    ("group_experts", U(count)),
                    ("hidden_size", U(hidden)),
                    ("intermediate_size", U(intermediate)),
                    ("experts_per_token", U(k)),
                    ("layer_index", U(i as u64)),
                ],
            )?;
            acc = out;
        }
        Ok(acc)
    }

    /// One decoder layer `i` of kind `layer` over the residual stream `x` (the main layers
    /// and the multi-token-prediction block alike): its norms, token mixer and
    /// feed-forward; returns the layer's output stream.
    fn decoder_layer(
        &mut self,
        i: usize,
        layer: &LayerSpec,
        x: &ProgramValueId,
    ) -> Result<ProgramValueId, SynthError> {
        let group = format!("layer.{i}");
        let hf = format!("model.layers.{i}");
        let normed = self.pre_norm(
            &format!("layer.{i}.input_norm"),
            &group,
            x,
            &format!("{hf}.input_layernorm"),
        )?;
        let h = match layer.mixer {
            MixerKind::Attention => self.attention(i, x, &normed)?,
            MixerKind::LatentAttention => self.latent_attention(i, x, &normed)?,
            MixerKind::GatedDelta => self.gated_delta(i, x, &normed)?,
        };
        // Gemma's pre-MLP norm is `pre_feedforward_layernorm` (its `post_attention_layernorm`
        // normalises the attention output); everyone else's is `post_attention_layernorm`.
        let pre_mlp = if self.arch().sandwich_norms {
            "pre_feedforward_layernorm"
        } else {
            "post_attention_layernorm"
        };
        let normed = self.pre_norm(
            &format!("layer.{i}.post_attention_norm"),
            &group,
            &h,
            &format!("{hf}.{pre_mlp}"),
        )?;
        match layer.feed_forward {
            FeedForwardKind::Dense => {
                let m = self.swiglu(
                    &format!("layer.{i}.feed_forward"),
                    &group,
                    &format!("{hf}.mlp"),
                    &normed,
                    self.arch().intermediate_size,
                )?;
                let m = self.output_norm(
                    i,
                    "feed_forward_output_norm",
                    "post_feedforward_layernorm",
                    m,
                )?;
                self.residual(&format!("layer.{i}.output"), &h, m)
            }
            FeedForwardKind::Routed => self.routed(i, &h, &normed),
        }
    }
}

/// Builds the program, weight schema and resource layout of `spec`.
pub fn build_program(spec: &GraphSpec<'_>) -> Result<ProgramParts, SynthError> {
    let arch = spec.arch;
    let mut plan = spec.weights.clone();
    if matches!(plan.format, WeightFormat::Gguf(_)) {
        plan.gguf = Some(GgufModel {
            layers: arch.layers.len() as u64,
            attention_layers: arch
                .layers
                .iter()
                .enumerate()
                .filter(|(_, l)| {
                    matches!(l.mixer, MixerKind::Attention | MixerKind::LatentAttention)
                })
                .map(|(i, _)| i as u64)
                .collect(),
            experts: arch.experts.as_ref().map_or(0, |e| e.routed_experts),
            tied: arch.tie_word_embeddings,
        });
    }
    let act = plan.format.activation_type();
    let mut g = Graph {
        b: ProgramBuilder::new(spec.family_id.clone(), plan),
        spec,
        act,
        kv: spec.kv_cache.element_type(act),
    };
    let hidden = arch.hidden_size;
    let t = spec.tokens;

    g.b.block("block.embedding");
    let tokens = g.b.program_input("token_ids", vec![t], ElementType::U32)?;
    let table = g.b.weight(
        "token_embedding",
        "embedding",
        vec![arch.vocab_size, hidden],
        WeightClass::Embedding,
        &["model.embed_tokens".to_owned()],
    )?;
    let mut x = g.b.activation("hidden.embedding", vec![t, hidden], g.act)?;
    g.b.node(
        "embedding",
        Operation::TokenEmbedding,
        vec![tokens.clone(), table.clone()],
        vec![x.clone()],
        vec![
            ("vocab_size", U(arch.vocab_size)),
            ("hidden_size", U(hidden)),
        ],
    )?;

    for (i, layer) in arch.layers.iter().enumerate() {
        g.b.block(&format!("block.layer.{i}"));
        x = g.decoder_layer(i, layer, &x)?;
    }

    g.b.block("block.head");
    let final_hidden = if arch.norm_placement == NormPlacement::PreLayerNorm {
        g.layer_norm(
            "final_norm",
            "output.final_hidden",
            "head",
            &x,
            "model.norm",
        )?
    } else {
        let w = g.norm_weight("final_norm", "head", hidden, "model.norm")?;
        g.rms_norm("output.final_hidden", &x, w, hidden)?
    };
    let head = if arch.tie_word_embeddings {
        table.clone()
    } else {
        g.b.weight(
            "lm_head",
            "head",
            vec![arch.vocab_size, hidden],
            WeightClass::Head,
            &["lm_head".to_owned()],
        )?
    };
    let logits =
        g.b.activation("output.logits", vec![1, arch.vocab_size], ElementType::F32)?;
    g.b.node(
        "logits",
        Operation::LastTokenDenseLinear,
        vec![final_hidden.clone(), head.clone()],
        vec![logits.clone()],
        vec![
            ("hidden_size", U(hidden)),
            ("vocab_size", U(arch.vocab_size)),
        ],
    )?;
    // The multi-token-prediction modules, built only on request (`--speculative mtp`).
    let mut outputs = vec![logits];
    for (j, layer) in arch.mtp_layers.iter().enumerate() {
        let i = arch.layers.len() + j;
        g.b.block(&format!("block.layer.{i}"));
        let inputs = MtpInputs {
            tokens: &tokens,
            table: &table,
            previous: &final_hidden,
            head: &head,
        };
        outputs.push(g.mtp_module(i, layer, inputs)?);
    }
    g.b.finish(outputs, spec.layout_id.clone())
}
