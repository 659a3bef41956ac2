//! The memory lines of the plan summary in serving terms: every pool labelled by what it
//! holds, the serving report (weights, KV cache, activations, workspaces, what fits), and
//! one line when fewer sequences fit than the policy admits.

use super::id_pattern::short;
use super::summary::{human_bytes, human_signed_bytes, MemorySummary};
use crate::study::report::sequences;

fn count(value: Option<u64>) -> String {
    value.map_or_else(
        || "any number (no per-sequence state)".to_owned(),
        |v| v.to_string(),
    )
}

/// Writes the pools and the serving report of `memory`.
pub fn write_serving(out: &mut String, memory: &MemorySummary) {
    out.push_str(&format!("  pools ({}):\n", memory.pools.len()));
    let mut maxima = 0u128;
    for p in &memory.pools {
        maxima += u128::from(p.maximum_resident_bytes);
        out.push_str(&format!(
            "    {}  {}  {}  ({:?})  {} resources  resident {} .. {}\n",
            short(&p.pool_id),
            p.holds,
            p.profile,
            p.usage,
            p.members,
            human_bytes(p.minimum_resident_bytes),
            human_bytes(p.maximum_resident_bytes)
        ));
    }
    // The rule of `memory::memory_report` (`pools_share_dynamic_capacity`, docs/rules.md
    // 4.5): every pool's maximum is capped at the dynamic capacity, usable − static.
    let dynamic_capacity = memory
        .usable_capacity_bytes
        .saturating_sub(memory.static_bytes);
    if maxima > u128::from(dynamic_capacity) {
        out.push_str(&format!(
            "    (the pools share the dynamic capacity, usable - static = {dynamic_capacity} bytes \
             (docs/rules.md 4.5): each maximum is what that pool alone could grow to; together \
             they would take {maxima} bytes)\n"
        ));
    }
    let r = &memory.report;
    let l = &memory.limits;
    out.push_str(&format!(
        "  serving (at the policy's ceilings: {}, {} tokens of context; rules in docs/research.md):\n",
        sequences(u64::from(l.maximum_active_sequences)),
        l.context_tokens
    ));
    if let Some(trained) = &l.trained_context {
        out.push_str(&format!(
            "    {:<24}{} tokens ({}); the policy's context is at most this\n",
            "trained context", trained.tokens, trained.rule
        ));
    }
    let lines = [
        ("weights", human_bytes(r.weights_bytes)),
        ("KV cache per token", human_bytes(r.kv_bytes_per_token)),
        (
            "KV cache per sequence",
            format!(
                "{} (at {} tokens, as provisioned)",
                human_bytes(r.kv_bytes_per_sequence),
                l.context_tokens
            ),
        ),
        (
            "activations",
            format!("{} (at the token ceiling)", human_bytes(r.activation_bytes)),
        ),
        (
            "workspaces",
            format!("{} (at the ceilings)", human_bytes(r.workspace_bytes)),
        ),
        ("reserve", human_bytes(r.reserve_bytes)),
        (
            "headroom for sequences",
            human_signed_bytes(r.headroom_bytes),
        ),
        ("tokens that fit", count(r.tokens_that_fit)),
        ("sequences that fit", count(r.sequences_that_fit)),
    ];
    for (label, value) in lines {
        out.push_str(&format!("    {label:<24}{value}\n"));
    }
    if let Some(fit) = r.sequences_that_fit {
        if fit < u64::from(l.maximum_active_sequences) {
            out.push_str(&format!(
                "  only {fit} of the policy's {} {} at the maximum context ({} tokens)\n",
                sequences(u64::from(l.maximum_active_sequences)),
                if fit == 1 { "fits" } else { "fit" },
                l.context_tokens
            ));
        }
    }
}
