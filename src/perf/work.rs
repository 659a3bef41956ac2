//! The work of one node in one scheduler step: FLOPs per arithmetic type and bytes moved,
//! from the node's [`NodeCost`] and the step's [`StepShape`].

use super::profile::{ComputeType, NodeCost, Rows};

/// Sequences of a step that share a shape: `sequences` sequences, each adding `new_tokens`
/// tokens after `cached` tokens already in its cache. A decode step of `b` sequences at
/// context `c` is one segment `{b, 1, c - 1}`; a prefill chunk is `{1, chunk, prefix}`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    /// Sequences in the segment.
    pub sequences: u64,
    /// New tokens of each.
    pub new_tokens: u64,
    /// Tokens each already holds in its cache.
    pub cached: u64,
}

/// The sequences and tokens of one step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepShape {
    /// Its segments.
    pub segments: Vec<Segment>,
}

impl StepShape {
    /// One decode step of `batch` sequences whose context (cached tokens plus the new one)
    /// is `context`.
    pub fn decode(batch: u64, context: u64) -> Self {
        StepShape {
            segments: vec![Segment {
                sequences: batch,
                new_tokens: 1,
                cached: context.saturating_sub(1),
            }],
        }
    }

    /// The prefill of one sequence's `tokens` prompt tokens in one step.
    pub fn prefill(tokens: u64) -> Self {
        StepShape {
            segments: vec![Segment {
                sequences: 1,
                new_tokens: tokens,
                cached: 0,
            }],
        }
    }

    /// Tokens scheduled in the step.
    pub fn tokens(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| s.sequences.saturating_mul(s.new_tokens))
            .fold(0, u64::saturating_add)
    }

    /// Sequences in the step.
    pub fn sequences(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| s.sequences)
            .fold(0, u64::saturating_add)
    }
}

/// What a node does in one step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Work {
    /// FLOPs by arithmetic type ([`ComputeType::index`]).
    pub flops: [f64; 5],
    /// Bytes read and written.
    pub bytes: f64,
    /// Kernels launched.
    pub kernels: f64,
}

impl Work {
    /// FLOPs of every type.
    pub fn total_flops(&self) -> f64 {
        self.flops.iter().sum()
    }
}

/// `sum_{j=1..x} min(j, w)`: the attended pairs of `x` causal query tokens from the first.
fn causal_pairs(x: f64, window: Option<f64>) -> f64 {
    match window {
        Some(w) if x > w => w * (w + 1.0) / 2.0 + (x - w) * w,
        _ => x * (x + 1.0) / 2.0,
    }
}

/// The expected fraction of a layer's experts that `rows` tokens routed to `top_k` of
/// `experts` each touch: `1 - (1 - k/E)^rows` (tokens routed independently and uniformly).
pub fn expert_fraction(top_k: u64, experts: u64, rows: f64) -> f64 {
    if experts == 0 || rows <= 0.0 {
        return 0.0;
    }
    let miss = 1.0 - top_k as f64 / experts as f64;
    1.0 - miss.max(0.0).powf(rows)
}

/// The work of a node costing `p` in a step of shape `shape`.
pub fn work(p: &NodeCost, shape: &StepShape) -> Work {
    let tokens = shape.tokens() as f64;
    let sequences = shape.sequences() as f64;
    let rows = match p.rows {
        Rows::Tokens => tokens,
        Rows::Sequences => sequences,
        Rows::Fixed => 1.0,
    };
    // An expert group's matrices run as grouped GEMMs: one kernel per weight role for the
    // whole layer (vLLM's `fused_moe` launches one for the gate/up and one for the down
    // projections), so a group of `g` of the layer's `E` experts, holding `roles x g`
    // matrices, launches its `g / E` share of the layer's `roles` kernels.
    let kernels = match p.experts {
        Some(e) if e.experts > 0 => p.kernels as f64 / e.experts as f64,
        _ => p.kernels as f64,
    };
    let mut w = Work {
        kernels,
        ..Work::default()
    };
    if rows <= 0.0 {
        return w;
    }
    // Matrices: all of them, or the expected share of an expert group.
    let (matrix_rows, matrix_bytes) = match p.experts {
        Some(e) => (
            rows * e.top_k as f64 / e.experts as f64,
            p.matrix_bytes as f64 * expert_fraction(e.top_k, e.experts, rows),
        ),
        None => (rows, p.matrix_bytes as f64),
    };
    w.flops[p.matrix_compute.index()] += 2.0 * matrix_rows * p.matrix_elements as f64;
    w.bytes += matrix_bytes + p.vector_bytes as f64 + rows * p.gather_bytes_per_row as f64;
    w.bytes += tokens * p.activation_bytes_per_token as f64
        + sequences * p.activation_bytes_per_sequence as f64
        + p.activation_bytes_fixed as f64;
    // Elementwise work of nodes without matrices: one operation per activation byte pair.
    if p.matrix_elements == 0 && p.attention.is_none() && p.gather_bytes_per_row == 0 {
        w.flops[ComputeType::Fp32.index()] += tokens * p.activation_bytes_per_token as f64 / 2.0;
    }
    if let Some(a) = p.attention {
        let window = a.window.map(|x| x as f64);
        for s in &shape.segments {
            let n = s.sequences as f64;
            let cached = s.cached as f64;
            let after = cached + s.new_tokens as f64;
            let pairs = causal_pairs(after, window) - causal_pairs(cached, window);
            w.flops[a.compute.index()] += n * pairs * a.flops_per_pair as f64;
            let held = window.map_or(after, |w| after.min(w));
            // The cache is read once at the context and the new tokens are written.
            w.bytes += n * (held + s.new_tokens as f64) * a.state_bytes_per_token as f64;
        }
    }
    if p.recurrent_state_bytes > 0 {
        w.bytes += 2.0 * sequences * p.recurrent_state_bytes as f64;
        w.flops[ComputeType::Fp32.index()] += tokens * p.recurrent_flops_per_token as f64;
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causal_pairs_count_every_attended_pair() {
        // Brute force: query i (1-based) attends to min(i, w) tokens.
        for x in 0..40u64 {
            for w in [None, Some(1.0), Some(7.0), Some(100.0)] {
                let brute: f64 = (1..=x)
                    .map(|i| w.map_or(i as f64, |w: f64| (i as f64).min(w)))
                    .sum();
                assert_eq!(causal_pairs(x as f64, w), brute, "x {x} w {w:?}");
            }
        }
    }

    #[test]
    fn an_expert_layer_launches_one_grouped_kernel_per_weight_role() {
        use super::super::profile::ExpertGroup;
        // 128 experts in groups of 16, two matrices (gate/up, down) per expert: the 8
        // groups of a layer launch 2 kernels between them, whatever the step.
        let cost = |group: u64| NodeCost {
            kind: "routed_expert_swiglu".to_owned(),
            rows: Rows::Tokens,
            matrix_elements: 1 << 20,
            matrix_bytes: 1 << 21,
            matrix_compute: ComputeType::Bf16,
            matrix_dimensions: None,
            vector_bytes: 0,
            gather_bytes_per_row: 0,
            activation_bytes_per_token: 0,
            activation_bytes_per_sequence: 0,
            activation_bytes_fixed: 0,
            experts: Some(ExpertGroup {
                group,
                experts: 128,
                top_k: 8,
            }),
            attention: None,
            recurrent_state_bytes: 0,
            recurrent_flops_per_token: 0,
            kernels: 2 * group,
        };
        for group in [1u64, 16, 128] {
            for shape in [StepShape::decode(1, 100), StepShape::prefill(512)] {
                let layer = work(&cost(group), &shape).kernels * (128 / group) as f64;
                assert!((layer - 2.0).abs() < 1e-9, "group {group}: {layer}");
            }
        }
    }

    #[test]
    fn expert_fraction_matches_the_closed_form() {
        assert_eq!(expert_fraction(2, 8, 1.0), 0.25);
        assert!((expert_fraction(2, 8, 2.0) - (1.0 - 0.75f64 * 0.75)).abs() < 1e-12);
        assert_eq!(expert_fraction(8, 8, 1.0), 1.0);
        assert_eq!(expert_fraction(2, 8, 0.0), 0.0);
    }
}
