//! The memory budget a plan is held to, and one plan's report re-evaluated at another budget.
//!
//! A budget is the policy's capacity and reserve (usable = capacity − reserve). A preset
//! takes its budget from the device by its own rule (a per-mille share less a reserve,
//! `synth::policy`); when a serving engine is named, the budget follows that engine's rule
//! instead ([`engine_budget`], from the engine's accounting in `crate::engine`), and jointplan
//! plans its own weights, activations and KV cache inside it.
//!
//! [`ServingReport::at_budget`] moves a plan's report to another budget: the plan's bytes
//! (weights, activations, workspaces, per-sequence state) do not depend on the capacity as
//! long as the same selection is feasible there, which the planner's own check says
//! ([`fits_same_selection`]: static + minimum runnable bytes within the usable capacity). It
//! is the cheap query behind "does this model fit that device": one build per device kind,
//! not one per device.

use serde::{Deserialize, Serialize};

use crate::engine::{Engine, EngineReport};
use crate::plan::ExecutionPlan;

use super::report::{ServingLimits, ServingReport};

/// The capacity and reserve a plan is held to, and the rule they follow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// The policy's capacity (bytes).
    pub capacity_bytes: u64,
    /// Bytes held back from planning.
    pub reserve_bytes: u64,
    /// The rule, with its source.
    pub rule: String,
}

impl Budget {
    /// `capacity − reserve` (0 when the reserve is not below the capacity).
    pub fn usable_bytes(&self) -> u64 {
        self.capacity_bytes.saturating_sub(self.reserve_bytes)
    }
}

fn term(report: &EngineReport, name: &str) -> u64 {
    report
        .budget
        .iter()
        .filter(|t| t.name == name)
        .map(|t| t.bytes)
        .sum()
}

/// The budget an engine's rule gives jointplan's plan on a device of `total_bytes` (the
/// total the engine budgets from), read from the engine's accounting:
///
/// * vLLM: capacity = `gpu_memory_utilization` x total (the `requested` term), reserve = the
///   non-torch and CUDA-graph terms (what vLLM subtracts besides weights, activations and
///   KV cache, which jointplan plans itself);
/// * SGLang: capacity = the total, reserve = what is not free at start (the CUDA context)
///   plus the `(1 − mem_fraction_static)` share SGLang keeps out of its static pool
///   (`reserved`): jointplan's own activations then come out of the static share too, so the
///   budget is conservative by jointplan's activation bytes;
/// * TensorRT-LLM: capacity = the total, reserve = the CUDA context plus the
///   `(1 − free_gpu_memory_fraction)` of the memory left after weights and runtime buffers
///   that the KV cache manager leaves unused;
/// * llama.cpp: capacity = the total, no reserve (it allocates the buffers it is told to).
pub fn engine_budget(report: &EngineReport, total_bytes: u64) -> Budget {
    let engine = report.name.parse::<Engine>();
    let (reserve, rule) = match engine {
        Ok(Engine::Vllm) => {
            let requested = term(report, "requested");
            let reserve = term(report, "non_torch").saturating_add(term(report, "cuda_graph"));
            return Budget {
                capacity_bytes: requested.min(total_bytes),
                reserve_bytes: reserve,
                rule: format!(
                    "vLLM {}: gpu_memory_utilization {} x total {total_bytes}, less non-torch and CUDA-graph memory",
                    report.version,
                    report
                        .args
                        .get("gpu_memory_utilization")
                        .map_or("0.9", String::as_str)
                ),
            };
        }
        Ok(Engine::Sglang) => {
            let free = term(report, "free_at_start");
            (
                total_bytes
                    .saturating_sub(free)
                    .saturating_add(term(report, "reserved")),
                format!(
                    "SGLang {}: the total less the CUDA context and the (1 - mem_fraction_static) share of free memory",
                    report.version
                ),
            )
        }
        Ok(Engine::Trtllm) => {
            let context = term(report, "cuda_context");
            let free = total_bytes
                .saturating_sub(context)
                .saturating_sub(term(report, "weights"))
                .saturating_sub(term(report, "runtime_buffers"));
            (
                context.saturating_add(free.saturating_sub(term(report, "kv_cache"))),
                format!(
                    "TensorRT-LLM {}: the total less the CUDA context and the (1 - free_gpu_memory_fraction) share of the memory after weights and runtime buffers",
                    report.version
                ),
            )
        }
        Ok(Engine::LlamaCpp) | Err(_) => (
            0,
            format!(
                "{} {}: the whole device (the buffers it is told to allocate)",
                report.name, report.version
            ),
        ),
    };
    Budget {
        capacity_bytes: total_bytes,
        reserve_bytes: reserve,
        rule,
    }
}

/// Whether `plan`'s selection is feasible under `budget`: the planner's capacity check,
/// static bytes + minimum runnable request bytes within the usable capacity. When it holds,
/// a plan built under `budget` selects as `plan` did (its objective does not weigh memory),
/// so the report moved by [`ServingReport::at_budget`] is that plan's report.
pub fn fits_same_selection(plan: &ExecutionPlan, budget: &Budget) -> bool {
    let memory = &plan.payload.memory;
    memory
        .static_bytes
        .checked_add(memory.minimum_runnable_request_bytes)
        .is_some_and(|needed| needed <= budget.usable_bytes())
}

impl ServingReport {
    /// This report (of a plan whose limits are `limits`) under `budget`: the same bytes of
    /// weights, activations, workspaces and per-sequence state, the headroom moved by the
    /// change of usable capacity, and what fits recomputed by the rules of
    /// `crate::study::report`.
    pub fn at_budget(
        &self,
        limits: &ServingLimits,
        budget: &Budget,
    ) -> (ServingReport, ServingLimits) {
        let usable = budget.usable_bytes();
        let headroom =
            self.headroom_bytes + i128::from(usable) - i128::from(limits.usable_capacity_bytes);
        let room = u64::try_from(headroom.max(0)).unwrap_or(u64::MAX);
        let per_sequence = self.kv_bytes_per_sequence;
        let sequences_that_fit = (per_sequence > 0).then(|| room / per_sequence);
        let tokens_that_fit = match (self.kv_bytes_per_token, sequences_that_fit) {
            (0, _) => None,
            (_, Some(sequences)) if limits.reserves_context => {
                Some(sequences.saturating_mul(limits.context_tokens))
            }
            (per_token, _) => Some(room / per_token),
        };
        let ceiling = u64::from(limits.maximum_active_sequences);
        let report = ServingReport {
            reserve_bytes: budget.reserve_bytes,
            headroom_bytes: headroom,
            tokens_that_fit,
            sequences_that_fit,
            worst_case_fits: headroom >= 0 && sequences_that_fit.is_none_or(|f| f >= ceiling),
            ..self.clone()
        };
        let limits = ServingLimits {
            usable_capacity_bytes: usable,
            ..limits.clone()
        };
        (report, limits)
    }
}
