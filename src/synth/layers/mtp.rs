//! The multi-token-prediction (MTP) modules built after the main layers on request
//! (`--speculative mtp`; what they own and share: [`crate::synth::speculative`]).

use crate::request::{ElementType, ProgramValueId};
use crate::synth::architecture::LayerSpec;
use crate::synth::operation::Operation;
use crate::synth::program::Attr;
use crate::synth::SynthError;

use super::Graph;
use Attr::U;

/// What a multi-token-prediction module reads of the main model.
pub(super) struct MtpInputs<'a> {
    /// The program's token ids.
    pub(super) tokens: &'a ProgramValueId,
    /// The embedding table (shared).
    pub(super) table: &'a ProgramValueId,
    /// The main model's final (normalised) hidden state.
    pub(super) previous: &'a ProgramValueId,
    /// The head (shared).
    pub(super) head: &'a ProgramValueId,
}

impl Graph<'_> {
    /// Multi-token-prediction module `i` (after the main layers; DeepSeek-V3's layer 61 in
    /// the checkpoint's names), as vLLM's `DeepSeekMultiTokenPredictorLayer` computes it:
    /// the next tokens' embedding (the main model's table) and the main model's final
    /// hidden state, each RMS-normalised (`enorm`, `hnorm`), projected together by
    /// `eh_proj` (`[hidden, 2 x hidden]`, built as its two column halves whose outputs
    /// add), one decoder layer of kind `layer`, the `shared_head` norm and the draft
    /// logits through the main model's head. Returns the draft logits.
    pub(super) fn mtp_module(
        &mut self,
        i: usize,
        layer: &LayerSpec,
        inputs: MtpInputs<'_>,
    ) -> Result<ProgramValueId, SynthError> {
        let (hidden, vocab, t) = (self.arch().hidden_size, self.arch().vocab_size, self.t());
        let (group, hf, l) = (
            format!("layer.{i}"),
            format!("model.layers.{i}"),
            format!("layer.{i}"),
        );
        let embedded = self
            .b
            .activation(&format!("{l}.embedding"), vec![t, hidden], self.act)?;
        self.b.node(
            &format!("{l}.embedding"),
            Operation::TokenEmbedding,
            vec![inputs.tokens.clone(), inputs.table.clone()],
            vec![embedded.clone()],
            vec![("vocab_size", U(vocab)), ("hidden_size", U(hidden))],
        )?;
        let w = self.norm_weight(
            &format!("{l}.enorm"),
            &group,
            hidden,
            &format!("{hf}.enorm"),
        )?;
        let e = self.rms_norm(&format!("{l}.enorm"), &embedded, w, hidden)?;
        let w = self.norm_weight(
            &format!("{l}.hnorm"),
            &group,
            hidden,
            &format!("{hf}.hnorm"),
        )?;
        let h = self.rms_norm(&format!("{l}.hnorm"), inputs.previous, w, hidden)?;
        let eh = format!("{hf}.eh_proj");
        let from_e = self.projected(
            &format!("{l}.eh_proj.embedding"),
            &group,
            &eh,
            &e,
            hidden,
            hidden,
        )?;
        let from_h = self.projected(
            &format!("{l}.eh_proj.hidden"),
            &group,
            &eh,
            &h,
            hidden,
            hidden,
        )?;
        let x = self.residual(&format!("{l}.eh_proj"), &from_e, from_h)?;
        let out = self.decoder_layer(i, layer, &x)?;
        let w = self.norm_weight(
            &format!("{l}.shared_head_norm"),
            &group,
            hidden,
            &format!("{hf}.shared_head.norm"),
        )?;
        let normed = self.rms_norm(&format!("{l}.final_hidden"), &out, w, hidden)?;
        let logits = self
            .b
            .activation(&format!("{l}.logits"), vec![1, vocab], ElementType::F32)?;
        self.b.node(
            &format!("{l}.logits"),
            Operation::LastTokenDenseLinear,
            vec![normed, inputs.head.clone()],
            vec![logits.clone()],
            vec![("hidden_size", U(hidden)), ("vocab_size", U(vocab))],
        )?;
        Ok(logits)
    }
}
