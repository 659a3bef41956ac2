//! Random valid plan requests for the property tests (`tests/planner/request_props.rs`).
//!
//! A [`DecoderSpec`] describes a Qwen3-style decoder of one to a few layers on the CUDA
//! device: its shape, which attention kernels the catalog has (the paged one reads the KV
//! cache in `fixed_block(65536)+paged(65536)`, the flash one only in linear+contiguous),
//! which one each layer prefers, the policy's storage-profile order, whether the device
//! offers the paged profile, each layer's token mixer (a paged attention with a
//! token-scaled KV-cache state in one shared cache resource or one per layer, a gated-delta
//! linear attention with zero-initialised recurrent states, or none), whether each residual add writes in place, the
//! policy ceilings, reusable execution and completion retention. [`DecoderSpec::request`]
//! turns it into a sealed request with the same builders as the shipped models.
#![allow(dead_code)]

use jointplan::request::*;

use super::model_fixtures::*;
use super::model_parts::*;
use super::operations::*;

/// Which causal-attention kernels the catalog offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionKernels {
    /// Only the paged kernel (KV cache in paged 64 KiB blocks).
    Paged,
    /// Only the flash kernel (contiguous KV cache).
    Flash,
    /// Both kernels.
    Both,
}

impl AttentionKernels {
    fn paged(self) -> bool {
        matches!(self, Self::Paged | Self::Both)
    }

    fn flash(self) -> bool {
        matches!(self, Self::Flash | Self::Both)
    }
}

/// Which attention kernel a layer prefers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preference {
    /// No preferred provider.
    Neither,
    /// The paged kernel.
    Paged,
    /// The flash kernel.
    Flash,
}

/// The policy's storage-profile order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileOrder {
    /// `[linear+contiguous]`.
    LinearOnly,
    /// `[linear+contiguous, paged 64 KiB]`.
    LinearThenPaged,
    /// `[paged 64 KiB, linear+contiguous]`.
    PagedThenLinear,
}

impl ProfileOrder {
    fn profiles(self) -> Vec<StorageProfile> {
        match self {
            Self::LinearOnly => vec![LINEAR],
            Self::LinearThenPaged => vec![LINEAR, paged_64k()],
            Self::PagedThenLinear => vec![paged_64k(), LINEAR],
        }
    }
}

/// The token mixer of a layer, before its feed-forward block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mixer {
    /// Causal paged attention with a token-scaled KV-cache state.
    Attention,
    /// Gated-delta linear attention with zero-initialised convolution and recurrent
    /// sequence states.
    GatedDelta,
    /// None: the layer is its feed-forward block alone.
    Nothing,
}

/// One decoder layer.
#[derive(Clone, Debug)]
pub struct LayerSpec {
    /// The token mixer.
    pub mixer: Mixer,
    /// The attention kernel this layer prefers (ignored without attention; a kernel the
    /// catalog lacks is preferred all the same). A gated-delta layer prefers its one
    /// provider unless this is `Neither`.
    pub preferred: Preference,
    /// The residual add writes in place of its input (may_alias) rather than on its own
    /// resource.
    pub in_place_residual: bool,
}

/// A random decoder request, before it is built.
#[derive(Clone, Debug)]
pub struct DecoderSpec {
    /// The layers, in order.
    pub layers: Vec<LayerSpec>,
    /// Hidden size.
    pub hidden: u64,
    /// Head dimension (divides `hidden`).
    pub head_dim: u64,
    /// Query heads per KV head (grouped-query attention).
    pub kv_group: u64,
    /// Feed-forward intermediate size as a multiple of `hidden`.
    pub intermediate_factor: u64,
    /// Vocabulary size.
    pub vocab: u64,
    /// Tokens of the program's activations.
    pub tokens: u64,
    /// KV-cache context tokens.
    pub context: u64,
    /// The attention kernels of the catalog.
    pub kernels: AttentionKernels,
    /// The policy's profile order.
    pub order: ProfileOrder,
    /// The device offers the paged profile (it always offers linear+contiguous).
    pub device_paged: bool,
    /// All KV states share one `resource/state/kv-cache` (else one resource per layer).
    pub shared_kv: bool,
    /// Policy: maximum active sequences.
    pub sequences: u32,
    /// Policy: maximum scheduled tokens (at least `tokens`).
    pub scheduled_tokens: u64,
    /// Policy: reusable execution with buckets up to `sequences`.
    pub reusable: bool,
    /// Retain `value.output.final_hidden` at completion.
    pub retain_final_hidden: bool,
}

impl DecoderSpec {
    /// Whether the paged profile is usable: in the policy order and offered by the device.
    pub fn paged_usable(&self) -> bool {
        self.order != ProfileOrder::LinearOnly && self.device_paged
    }

    /// Whether some kernel can serve the attention layers (the generator only asks for
    /// plannable specs; every other slot accepts linear+contiguous, which is always usable).
    pub fn plannable(&self) -> bool {
        !self.layers.iter().any(|l| l.mixer == Mixer::Attention)
            || self.kernels.flash()
            || self.paged_usable()
    }

    fn shape(&self) -> DecoderShape {
        let heads = self.hidden / self.head_dim;
        DecoderShape {
            hidden: self.hidden,
            heads,
            kv_heads: (heads / self.kv_group).max(1),
            head_dim: self.head_dim,
            intermediate: self.hidden * self.intermediate_factor,
            vocab: self.vocab,
            tokens: self.tokens,
            context: self.context,
        }
    }

    /// The layer's preferred provider; a kernel the catalog lacks is still preferred (the
    /// plan then records it as `not_registered`).
    fn preferred(&self, layer: &LayerSpec) -> Option<&'static str> {
        match layer.preferred {
            Preference::Paged => Some(PAGED),
            Preference::Flash => Some(FLASH),
            Preference::Neither => None,
        }
    }

    fn policy(&self) -> RuntimePolicy {
        let mut policy = policy(
            "runtime-policy.cuda.generated",
            22 * GIB,
            GIB,
            self.sequences,
            self.scheduled_tokens,
        );
        policy.dynamic_storage_profile_order = self.order.profiles();
        if self.reusable {
            policy.reusable_execution = Some(uniform_query_reusable(self.sequences));
        }
        policy
    }

    /// The sealed request.
    pub fn request(&self) -> PlanRequest {
        let s = &self.shape();
        let mut operations = DECODER_OPERATIONS.to_vec();
        operations.push("gated_delta_recurrent_attention");
        let mut device = cuda_device(&operations);
        if !self.device_paged {
            device.dynamic_storage_profiles.remove(&paged_64k());
        }
        let device_id = device.id.clone();
        let attention_layers = self
            .layers
            .iter()
            .filter(|l| l.mixer == Mixer::Attention)
            .count() as u64;
        let mut b = RequestBuilder::new(
            "family.qwen3.dense",
            qwen3_config(s, self.layers.len()),
            "weight-format.safetensors.dense",
            "weight-layout.qwen3.dense.packed_gate_up",
            device,
            self.policy(),
        );
        let dense = dense_providers(&mut b);
        let delta = simple(&mut b, op_gated_delta());
        let delta_shape = DeltaShape {
            key_heads: s.heads,
            value_heads: s.heads,
            key_dim: s.head_dim,
            value_dim: s.head_dim,
            kernel: 4,
        };
        let attention_op = op_causal_paged_attention();
        let mut kernels = Vec::new();
        if self.kernels.paged() {
            kernels.push((
                paged_attention_kernel(&attention_op, &device_id),
                s.heads * 64,
            ));
        }
        if self.kernels.flash() {
            kernels.push((
                flash_attention_kernel(&attention_op, &device_id),
                s.heads * 128,
            ));
        }
        b.add_operation(
            attention_op,
            kernels.iter().map(|(p, _)| p.clone()).collect(),
        );
        // Like the reference's `resolve`, a kernel whose KV slot has no usable profile is no
        // candidate but a resolution-local storage rejection.
        let paged_rejected = self.kernels.paged() && !self.paged_usable();
        let candidates: Vec<(&ProviderDescriptor, u64)> = kernels
            .iter()
            .filter(|(p, _)| !(paged_rejected && p.provider_id.as_str() == PAGED))
            .map(|(p, scratch)| (p, *scratch))
            .collect();

        embedding_and_head_weights(&mut b, s);
        embedding_node(&mut b, s, &dense.embed);
        let mut hidden_in: &'static str = "value.hidden.embedding";
        let mut kv_slot = 0u64;
        for (i, layer) in self.layers.iter().enumerate() {
            let mixed = if layer.mixer == Mixer::GatedDelta {
                let preferred = layer.preferred != Preference::Neither;
                gated_delta_layer(&mut b, s, &delta_shape, i, hidden_in, &delta, preferred);
                leak(format!("value.layer.{i}.attention"))
            } else if layer.mixer == Mixer::Attention {
                let kv = if self.shared_kv {
                    KvPlacement {
                        resource: "resource/state/kv-cache".to_owned(),
                        offset_bytes: kv_slot * kv_bytes(s),
                        bytes_per_token: attention_layers * kv_bytes(s),
                    }
                } else {
                    KvPlacement {
                        resource: format!("resource/state/layer.{i}.kv"),
                        offset_bytes: 0,
                        bytes_per_token: kv_bytes(s),
                    }
                };
                kv_slot += 1;
                attention_layer(
                    &mut b,
                    s,
                    i,
                    hidden_in,
                    &kv,
                    self.preferred(layer),
                    &candidates,
                );
                if paged_rejected {
                    b.reject_for_storage(
                        &format!("node.layer.{i}.attention"),
                        PAGED,
                        &[kv.resource.as_str()],
                    );
                }
                leak(format!("value.layer.{i}.attention"))
            } else {
                hidden_in
            };
            feed_forward_from(
                &mut b,
                s,
                i,
                mixed,
                layer.in_place_residual,
                &[&dense.norm, &dense.swiglu, &dense.residual],
            );
            hidden_in = leak(format!("value.layer.{i}.output"));
        }
        head_nodes(&mut b, s, hidden_in, &dense.norm, &dense.linear);
        if self.retain_final_hidden {
            b.retention.insert(id("value.output.final_hidden"));
        }
        b.finish()
    }
}
