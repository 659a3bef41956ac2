//! The token mixers of a layer: grouped-query attention, latent attention (MLA) and Gated
//! DeltaNet, each from the layer's input norm to its residual add (the module docs of
//! [`super`] give each one's nodes), and the optional sandwich norm after a sublayer.

use crate::request::{ElementType, ProgramValueId, StateCapacityDemand, StateInitialization};
use crate::synth::architecture::{NormPlacement, QkNorm};
use crate::synth::operation::Operation;
use crate::synth::program::Attr;
use crate::synth::weights::WeightClass;
use crate::synth::SynthError;

use super::Graph;
use Attr::{B, U};

impl Graph<'_> {
    pub(super) fn attention(
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
        if arch.qk_norm == QkNorm::Projection {
            // OLMo 2: one RMSNorm over the whole query and the whole key projection.
            for (which, value, width) in
                [("q", &mut q, q_proj_features), ("k", &mut k, kv_features)]
            {
                let w = self.norm_weight(
                    &format!("{l}.{which}_norm"),
                    &group,
                    width,
                    &format!("{hf}.{which}_norm"),
                )?;
                *value = self.rms_norm(&format!("{l}.{which}_norm"), value, w, width)?;
            }
        }
        if a.output_gate || arch.qk_norm == QkNorm::PerHead {
            // Qwen3-Next, GLM-4.5 (use_qk_norm): per-head RMSNorm of queries and keys,
            // in place.
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
        let kv_bytes = 2 * kv_features * self.kv.byte_size();
        let window = arch.layers.get(i).and_then(|layer| layer.window);
        // A sliding-window layer keeps only the last `window` tokens' keys and values.
        let kv_tokens = window.map_or(self.spec.context_tokens, |w| {
            w.min(self.spec.context_tokens)
        });
        let kv = self.b.state(
            &format!("layer.{i}.kv"),
            vec![2, a.key_value_heads, a.head_dim],
            self.kv,
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
        let (op, inputs) = if arch.attention_sinks {
            // gpt-oss: one learned sink logit per query head.
            let sinks = self.norm_weight(
                &format!("{l}.sinks"),
                &group,
                a.query_heads,
                &format!("{hf}.sinks"),
            )?;
            (
                Operation::CausalPagedSinkAttention,
                vec![q, k, v, sinks, kv],
            )
        } else {
            (Operation::CausalPagedAttention, vec![q, k, v, kv])
        };
        self.b.note_kv_bytes_per_token(kv_bytes);
        self.b.node(
            &format!("{l}.attention"),
            op,
            inputs,
            vec![out.clone()],
            attrs,
        )?;
        let o = if arch.output_bias {
            let o_name = format!("{hf}.o_proj");
            let weights = vec![
                self.b.weight(
                    &format!("{l}.o_proj"),
                    &group,
                    vec![hidden, query_features],
                    WeightClass::Projection,
                    std::slice::from_ref(&o_name),
                )?,
                self.b.weight(
                    &format!("{l}.o_proj.bias"),
                    &group,
                    vec![hidden],
                    WeightClass::Norm,
                    &[format!("{o_name}.bias")],
                )?,
            ];
            self.projection(
                &format!("{l}.o_proj"),
                &out,
                weights,
                query_features,
                hidden,
            )?
        } else {
            self.projected(
                &format!("{l}.o_proj"),
                &group,
                &format!("{hf}.o_proj"),
                &out,
                query_features,
                hidden,
            )?
        };
        let o = self.output_norm(i, "attention_output_norm", "post_attention_layernorm", o)?;
        self.residual(&format!("{l}.attention_residual"), x, o)
    }

    /// Gemma's sandwich norm, or OLMo 2's post-norm, of a block output before its residual
    /// add (`value` unchanged for architectures without one).
    pub(super) fn output_norm(
        &mut self,
        i: usize,
        name: &str,
        hf_name: &str,
        value: ProgramValueId,
    ) -> Result<ProgramValueId, SynthError> {
        if !self.arch().sandwich_norms && self.arch().norm_placement != NormPlacement::Post {
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

    pub(super) fn latent_attention(
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
                let cq = self.projected(
                    &format!("{l}.q_a_proj"),
                    &group,
                    &format!("{hf}.q_a_proj"),
                    normed,
                    hidden,
                    rank,
                )?;
                let wn = self.norm_weight(
                    &format!("{l}.q_a_norm"),
                    &group,
                    rank,
                    &format!("{hf}.q_a_layernorm"),
                )?;
                let cqn = self.rms_norm(&format!("{l}.q_a_norm"), &cq, wn, rank)?;
                self.projected(
                    &format!("{l}.q_b_proj"),
                    &group,
                    &format!("{hf}.q_b_proj"),
                    &cqn,
                    rank,
                    q_features,
                )?
            }
            None => self.projected(
                &format!("{l}.q_proj"),
                &group,
                &format!("{hf}.q_proj"),
                normed,
                hidden,
                q_features,
            )?,
        };
        let latent = self.projected(
            &format!("{l}.kv_a_proj"),
            &group,
            &format!("{hf}.kv_a_proj_with_mqa"),
            normed,
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
        let cache_bytes = latent_features * self.kv.byte_size();
        let cache = self.b.state(
            &format!("layer.{i}.latent_kv"),
            vec![latent_features],
            self.kv,
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
        let o = self.projected(
            &format!("{l}.o_proj"),
            &group,
            &format!("{hf}.o_proj"),
            &out,
            value_features,
            hidden,
        )?;
        self.residual(&format!("{l}.attention_residual"), x, o)
    }

    pub(super) fn gated_delta(
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
}
