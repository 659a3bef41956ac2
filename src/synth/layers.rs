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

use crate::request::{
    ElementType, ModelFamilyId, ProgramValueId, StateCapacityDemand, StateInitialization,
    WeightLayoutId,
};

use super::catalog::Operation;
use super::config::{Architecture, FeedForwardKind, GateActivation, MixerKind};
use super::program::{Attr, ProgramBuilder, ProgramParts};
use super::weights::{WeightClass, WeightFormat};
use super::SynthError;

use Attr::{B, R, S, U};

/// What the graph is built from.
pub struct GraphSpec<'a> {
    /// The validated architecture (overrides applied).
    pub arch: &'a Architecture,
    /// Family id.
    pub family_id: ModelFamilyId,
    /// Weight layout id.
    pub layout_id: WeightLayoutId,
    /// Weight format.
    pub format: WeightFormat,
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
                    "dynamic" | "linear" | "llama3" | "yarn"
                ) {
                    return Err(SynthError::config(
                        "rope_scaling.rope_type",
                        format!(
                            "{:?} is not one of dynamic, linear, llama3, yarn",
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

    fn attention(
        &mut self,
        i: usize,
        x: &ProgramValueId,
        normed: &ProgramValueId,
    ) -> Result<ProgramValueId, SynthError> {
        let arch = self.arch().clone();
        let a = arch.attention;
        let (group, hf, l) = (
            format!("layer.{i}"),
            format!("model.layers.{i}.self_attn"),
            format!("layer.{i}"),
        );
        let hidden = arch.hidden_size;
        let query_features = a.query_heads * a.head_dim;
        let q_proj_features = if a.output_gate {
            2 * query_features
        } else {
            query_features
        };
        let kv_features = a.key_value_heads * a.head_dim;
        let mut qkv = Vec::with_capacity(3);
        for (which, features) in [
            ("q", q_proj_features),
            ("k", kv_features),
            ("v", kv_features),
        ] {
            // Phi-3 stores q, k and v as row ranges of one `qkv_proj` tensor.
            let source = if arch.fused_projections {
                format!("{hf}.qkv_proj")
            } else {
                format!("{hf}.{which}_proj")
            };
            let mut weights = vec![self.b.weight(
                &format!("{l}.{which}_proj"),
                &group,
                vec![features, hidden],
                WeightClass::Projection,
                std::slice::from_ref(&source),
            )?];
            if arch.attention_bias {
                weights.push(self.b.weight(
                    &format!("{l}.{which}_proj.bias"),
                    &group,
                    vec![features],
                    WeightClass::Norm,
                    &[format!("{source}.bias")],
                )?);
            }
            qkv.push(self.projection(
                &format!("{l}.{which}_proj"),
                normed,
                weights,
                hidden,
                features,
            )?);
        }
        let (Some(v), Some(mut k), Some(mut q)) = (qkv.pop(), qkv.pop(), qkv.pop()) else {
            return Err(SynthError::Internal(
                "the q, k and v projections were not all built".to_owned(),
            ));
        };
        if a.output_gate {
            // Qwen3-Next: per-head RMSNorm of queries and keys, in place.
            for (which, value, heads) in [
                ("q", &mut q, a.query_heads),
                ("k", &mut k, a.key_value_heads),
            ] {
                let w = self.norm_weight(
                    &format!("{l}.{which}_norm"),
                    &group,
                    a.head_dim,
                    &format!("{hf}.{which}_norm"),
                )?;
                let out = self.b.in_place(&format!("{l}.{which}_norm"), value)?;
                let eps = self.eps();
                self.b.node(
                    &format!("{l}.{which}_norm"),
                    Operation::HeadRmsNorm,
                    vec![value.clone(), w],
                    vec![out.clone()],
                    vec![
                        ("heads", U(heads)),
                        ("head_dim", U(a.head_dim)),
                        ("epsilon", eps),
                    ],
                )?;
                *value = out;
            }
        }
        let kv_bytes = 2 * kv_features * self.act.byte_size();
        let window = arch.layers.get(i).and_then(|layer| layer.window);
        // A sliding-window layer keeps only the last `window` tokens' keys and values.
        let kv_tokens = window.map_or(self.spec.context_tokens, |w| {
            w.min(self.spec.context_tokens)
        });
        let kv = self.b.state(
            &format!("layer.{i}.kv"),
            vec![2, a.key_value_heads, a.head_dim],
            self.act,
            StateCapacityDemand::TokenScaled {
                bytes_per_token: kv_bytes,
                maximum_tokens: kv_tokens,
            },
            StateInitialization::None,
        )?;
        let out = if q_proj_features == query_features {
            self.b.in_place(&format!("{l}.attention"), &q)?
        } else {
            self.b.activation(
                &format!("{l}.attention"),
                vec![self.t(), query_features],
                self.act,
            )?
        };
        let mut attrs = vec![
            ("hidden_size", U(hidden)),
            ("query_heads", U(a.query_heads)),
            ("key_value_heads", U(a.key_value_heads)),
            ("head_dim", U(a.head_dim)),
            ("query_features", U(query_features)),
            ("query_projection_features", U(q_proj_features)),
            ("kv_features", U(kv_features)),
            ("rope_dim", U(a.rope_dim)),
            ("rope_interleaved", B(false)),
            ("maximum_context_tokens", U(self.spec.context_tokens)),
            ("output_gate", B(a.output_gate)),
            ("causal", B(true)),
            ("layer_index", U(i as u64)),
        ];
        attrs.extend(self.rope_attrs()?);
        if let Some(window) = window {
            attrs.push(("sliding_window", U(window)));
        }
        self.b.note_kv_bytes_per_token(kv_bytes);
        self.b.node(
            &format!("{l}.attention"),
            Operation::CausalPagedAttention,
            vec![q, k, v, kv],
            vec![out.clone()],
            attrs,
        )?;
        let wo = self.b.weight(
            &format!("{l}.o_proj"),
            &group,
            vec![hidden, query_features],
            WeightClass::Projection,
            &[format!("{hf}.o_proj")],
        )?;
        let o = self.linear(&format!("{l}.o_proj"), &out, wo, query_features, hidden)?;
        let o = self.output_norm(i, "attention_output_norm", "post_attention_layernorm", o)?;
        self.residual(&format!("{l}.attention_residual"), x, o)
    }

    /// Gemma's sandwich norm of a block output before its residual add (`value` unchanged
    /// for architectures without one).
    fn output_norm(
        &mut self,
        i: usize,
        name: &str,
        hf_name: &str,
        value: ProgramValueId,
    ) -> Result<ProgramValueId, SynthError> {
        if !self.arch().sandwich_norms {
            return Ok(value);
        }
        let hidden = self.arch().hidden_size;
        let w = self.norm_weight(
            &format!("layer.{i}.{name}"),
            &format!("layer.{i}"),
            hidden,
            &format!("model.layers.{i}.{hf_name}"),
        )?;
        self.rms_norm(&format!("layer.{i}.{name}"), &value, w, hidden)
    }

    fn latent_attention(
        &mut self,
        i: usize,
        x: &ProgramValueId,
        normed: &ProgramValueId,
    ) -> Result<ProgramValueId, SynthError> {
        let arch = self.arch().clone();
        let m = arch
            .latent
            .ok_or_else(|| SynthError::Internal("latent attention without MLA dims".to_owned()))?;
        let (group, hf, l) = (
            format!("layer.{i}"),
            format!("model.layers.{i}.self_attn"),
            format!("layer.{i}"),
        );
        let hidden = arch.hidden_size;
        let q_features = m.query_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim);
        let latent_features = m.kv_lora_rank + m.qk_rope_head_dim;
        let kv_b_features = m.query_heads * (m.qk_nope_head_dim + m.v_head_dim);
        let value_features = m.query_heads * m.v_head_dim;
        let q = match m.q_lora_rank {
            Some(rank) => {
                let wa = self.b.weight(
                    &format!("{l}.q_a_proj"),
                    &group,
                    vec![rank, hidden],
                    WeightClass::Projection,
                    &[format!("{hf}.q_a_proj")],
                )?;
                let cq = self.linear(&format!("{l}.q_a_proj"), normed, wa, hidden, rank)?;
                let wn = self.norm_weight(
                    &format!("{l}.q_a_norm"),
                    &group,
                    rank,
                    &format!("{hf}.q_a_layernorm"),
                )?;
                let cqn = self.rms_norm(&format!("{l}.q_a_norm"), &cq, wn, rank)?;
                let wb = self.b.weight(
                    &format!("{l}.q_b_proj"),
                    &group,
                    vec![q_features, rank],
                    WeightClass::Projection,
                    &[format!("{hf}.q_b_proj")],
                )?;
                self.linear(&format!("{l}.q_b_proj"), &cqn, wb, rank, q_features)?
            }
            None => {
                let wq = self.b.weight(
                    &format!("{l}.q_proj"),
                    &group,
                    vec![q_features, hidden],
                    WeightClass::Projection,
                    &[format!("{hf}.q_proj")],
                )?;
                self.linear(&format!("{l}.q_proj"), normed, wq, hidden, q_features)?
            }
        };
        let wkv = self.b.weight(
            &format!("{l}.kv_a_proj"),
            &group,
            vec![latent_features, hidden],
            WeightClass::Projection,
            &[format!("{hf}.kv_a_proj_with_mqa")],
        )?;
        let latent = self.linear(
            &format!("{l}.kv_a_proj"),
            normed,
            wkv,
            hidden,
            latent_features,
        )?;
        let kv_norm = self.norm_weight(
            &format!("{l}.kv_a_norm"),
            &group,
            m.kv_lora_rank,
            &format!("{hf}.kv_a_layernorm"),
        )?;
        let kv_b = self.b.weight(
            &format!("{l}.kv_b_proj"),
            &group,
            vec![kv_b_features, m.kv_lora_rank],
            WeightClass::Plain,
            &[format!("{hf}.kv_b_proj")],
        )?;
        let cache_bytes = latent_features * self.act.byte_size();
        let cache = self.b.state(
            &format!("layer.{i}.latent_kv"),
            vec![latent_features],
            self.act,
            StateCapacityDemand::TokenScaled {
                bytes_per_token: cache_bytes,
                maximum_tokens: self.spec.context_tokens,
            },
            StateInitialization::None,
        )?;
        let out = self.b.activation(
            &format!("{l}.attention"),
            vec![self.t(), value_features],
            self.act,
        )?;
        let eps = self.eps();
        let mut attrs = vec![
            ("query_heads", U(m.query_heads)),
            ("kv_lora_rank", U(m.kv_lora_rank)),
            ("qk_nope_head_dim", U(m.qk_nope_head_dim)),
            ("qk_rope_head_dim", U(m.qk_rope_head_dim)),
            ("v_head_dim", U(m.v_head_dim)),
            ("maximum_context_tokens", U(self.spec.context_tokens)),
            ("epsilon", eps),
            ("causal", B(true)),
            ("layer_index", U(i as u64)),
        ];
        attrs.extend(self.rope_attrs()?);
        self.b.note_kv_bytes_per_token(cache_bytes);
        self.b.node(
            &format!("{l}.attention"),
            Operation::CausalPagedLatentAttention,
            vec![q, latent, kv_norm, kv_b, cache],
            vec![out.clone()],
            attrs,
        )?;
        let wo = self.b.weight(
            &format!("{l}.o_proj"),
            &group,
            vec![hidden, value_features],
            WeightClass::Projection,
            &[format!("{hf}.o_proj")],
        )?;
        let o = self.linear(&format!("{l}.o_proj"), &out, wo, value_features, hidden)?;
        self.residual(&format!("{l}.attention_residual"), x, o)
    }

    fn gated_delta(
        &mut self,
        i: usize,
        x: &ProgramValueId,
        normed: &ProgramValueId,
    ) -> Result<ProgramValueId, SynthError> {
        let arch = self.arch().clone();
        let d = arch
            .gated_delta
            .ok_or_else(|| SynthError::Internal("linear attention without its dims".to_owned()))?;
        let (group, hf, l) = (
            format!("layer.{i}"),
            format!("model.layers.{i}.linear_attn"),
            format!("layer.{i}"),
        );
        let hidden = arch.hidden_size;
        let qkvz = 2 * d.key_features() + 2 * d.value_features();
        let ba = 2 * d.value_heads;
        let w_qkvz = self.b.weight(
            &format!("{l}.in_proj_qkvz"),
            &group,
            vec![qkvz, hidden],
            WeightClass::Projection,
            &[format!("{hf}.in_proj_qkvz")],
        )?;
        let w_ba = self.b.weight(
            &format!("{l}.in_proj_ba"),
            &group,
            vec![ba, hidden],
            WeightClass::Projection,
            &[format!("{hf}.in_proj_ba")],
        )?;
        let w_conv = self.b.weight(
            &format!("{l}.conv1d"),
            &group,
            vec![d.conv_features(), d.conv_kernel],
            WeightClass::Plain,
            &[format!("{hf}.conv1d")],
        )?;
        let dt_bias = self.norm_weight(
            &format!("{l}.dt_bias"),
            &group,
            d.value_heads,
            &format!("{hf}.dt_bias"),
        )?;
        let a_log = self.norm_weight(
            &format!("{l}.a_log"),
            &group,
            d.value_heads,
            &format!("{hf}.A_log"),
        )?;
        let norm = self.norm_weight(
            &format!("{l}.linear_norm"),
            &group,
            d.value_head_dim,
            &format!("{hf}.norm"),
        )?;
        let w_out = self.b.weight(
            &format!("{l}.out_proj"),
            &group,
            vec![hidden, d.value_features()],
            WeightClass::Projection,
            &[format!("{hf}.out_proj")],
        )?;
        let conv = self.b.state(
            &format!("layer.{i}.conv"),
            vec![d.conv_features(), d.conv_kernel - 1],
            self.act,
            StateCapacityDemand::FixedPerScope,
            StateInitialization::Zero,
        )?;
        let delta = self.b.state(
            &format!("layer.{i}.delta"),
            vec![d.value_heads, d.key_head_dim, d.value_head_dim],
            ElementType::F32,
            StateCapacityDemand::FixedPerScope,
            StateInitialization::Zero,
        )?;
        let out = self
            .b
            .activation(&format!("{l}.attention"), vec![self.t(), hidden], self.act)?;
        let eps = self.eps();
        self.b.node(
            &format!("{l}.linear_attention"),
            Operation::GatedDeltaRecurrentAttention,
            vec![
                normed.clone(),
                w_qkvz,
                w_ba,
                w_conv,
                dt_bias,
                a_log,
                norm,
                w_out,
                conv,
                delta,
            ],
            vec![out.clone()],
            vec![
                ("hidden_size", U(hidden)),
                ("key_heads", U(d.key_heads)),
                ("value_heads", U(d.value_heads)),
                ("key_head_dim", U(d.key_head_dim)),
                ("value_head_dim", U(d.value_head_dim)),
                ("conv_kernel", U(d.conv_kernel)),
                ("epsilon", eps),
                ("layer_index", U(i as u64)),
            ],
        )?;
        self.residual(&format!("{l}.attention_residual"), x, out)
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
        let (group, hf, l) = (
            format!("layer.{i}"),
            format!("model.layers.{i}.mlp"),
            format!("layer.{i}"),
        );
        let hidden = arch.hidden_size;
        let t = self.t();
        let k = e.experts_per_token;
        let w_router = self.b.weight(
            &format!("{l}.router"),
            &group,
            vec![e.routed_experts, hidden],
            WeightClass::Plain,
            &[format!("{hf}.gate")],
        )?;
        let weights =
            self.b
                .activation(&format!("{l}.route_weights"), vec![t, k], ElementType::F32)?;
        let indices =
            self.b
                .activation(&format!("{l}.route_indices"), vec![t, k], ElementType::I32)?;
        self.b.node(
            &format!("{l}.router"),
            Operation::MoeRouter,
            vec![normed.clone(), w_router],
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
                            format!("{hf}.experts.{x}.gate_proj"),
                            format!("{hf}.experts.{x}.up_proj"),
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
                    .map(|x| format!("{hf}.experts.{x}.down_proj"))
                    .collect::<Vec<_>>(),
            )?;
            let name = if g + 1 == groups {
                format!("{l}.output")
            } else {
                format!("{l}.expert.{g}")
            };
            let out = self.b.in_place(&name, &acc)?;
            self.b.node(
                &format!("{l}.expert.{g}"),
                Operation::RoutedExpertSwiglu,
                vec![
                    acc.clone(),
                    normed.clone(),
                    weights.clone(),
                    indices.clone(),
                    gate_up,
                    down,
                ],
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
}

/// Builds the program, weight schema and resource layout of `spec`.
pub fn build_program(spec: &GraphSpec<'_>) -> Result<ProgramParts, SynthError> {
    let arch = spec.arch;
    let mut g = Graph {
        b: ProgramBuilder::new(spec.family_id.clone(), spec.format),
        spec,
        act: spec.format.activation_type(),
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
        vec![tokens, table.clone()],
        vec![x.clone()],
        vec![
            ("vocab_size", U(arch.vocab_size)),
            ("hidden_size", U(hidden)),
        ],
    )?;

    for (i, layer) in arch.layers.iter().enumerate() {
        g.b.block(&format!("block.layer.{i}"));
        let group = format!("layer.{i}");
        let hf = format!("model.layers.{i}");
        let w = g.norm_weight(
            &format!("layer.{i}.input_norm"),
            &group,
            hidden,
            &format!("{hf}.input_layernorm"),
        )?;
        let normed = g.rms_norm(&format!("layer.{i}.input_norm"), &x, w, hidden)?;
        let h = match layer.mixer {
            MixerKind::Attention => g.attention(i, &x, &normed)?,
            MixerKind::LatentAttention => g.latent_attention(i, &x, &normed)?,
            MixerKind::GatedDelta => g.gated_delta(i, &x, &normed)?,
        };
        // Gemma's pre-MLP norm is `pre_feedforward_layernorm` (its `post_attention_layernorm`
        // normalises the attention output); everyone else's is `post_attention_layernorm`.
        let pre_mlp = if arch.sandwich_norms {
            "pre_feedforward_layernorm"
        } else {
            "post_attention_layernorm"
        };
        let w = g.norm_weight(
            &format!("layer.{i}.post_attention_norm"),
            &group,
            hidden,
            &format!("{hf}.{pre_mlp}"),
        )?;
        let normed = g.rms_norm(&format!("layer.{i}.post_attention_norm"), &h, w, hidden)?;
        x = match layer.feed_forward {
            FeedForwardKind::Dense => {
                let m = g.swiglu(
                    &format!("layer.{i}.feed_forward"),
                    &group,
                    &format!("{hf}.mlp"),
                    &normed,
                    arch.intermediate_size,
                )?;
                let m = g.output_norm(
                    i,
                    "feed_forward_output_norm",
                    "post_feedforward_layernorm",
                    m,
                )?;
                g.residual(&format!("layer.{i}.output"), &h, m)?
            }
            FeedForwardKind::Routed => g.routed(i, &h, &normed)?,
        };
    }

    g.b.block("block.head");
    let w = g.norm_weight("final_norm", "head", hidden, "model.norm")?;
    let final_hidden = g.rms_norm("output.final_hidden", &x, w, hidden)?;
    let head = if arch.tie_word_embeddings {
        table
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
        vec![final_hidden, head],
        vec![logits.clone()],
        vec![
            ("hidden_size", U(hidden)),
            ("vocab_size", U(arch.vocab_size)),
        ],
    )?;
    g.b.finish(vec![logits], spec.layout_id.clone())
}
