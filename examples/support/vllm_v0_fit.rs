//! vLLM V0's host time: the time per scheduler step `h0` and per sequence of a step `h1`
//! that the device does not overlap (the V0 engine's Python scheduler, block manager,
//! input preparation and output processing loop over the sequence groups of every step).
//! `examples/placement_validation.rs` fits the pair of several devices on the fit half of
//! the multi-GPU table (each row a [`FitRow`], simulated on its placement),
//! `examples/perf_validation.rs` the pair of one device on the fit half of the
//! single-device table (its own rows). The rule is in
//! `docs/performance-validation.md#multi-gpu-points-placement-across-devices`.
//!
//! The fit rows are the vLLM 0.5.4 points of the fit half with a measured TPOT (the
//! multi-step runs are held out: their host time is spread over the steps of one schedule,
//! which the profile does not model). Each row is simulated again at every pair tried; the
//! pair with the least median absolute TPOT error wins (ties: the smaller `h1`, then the
//! smaller `h0`).

use jointplan::perf::EngineProfile;
use jointplan::placement::Chosen;
use rayon::prelude::*;

use super::median;

/// The host times per step tried (seconds): 0 to 6 ms by 0.25 ms.
pub fn step_overheads() -> Vec<f64> {
    (0..=24u32).map(|k| f64::from(k) * 0.25e-3).collect()
}

/// The host times per sequence tried (seconds): 0 to 200 us by 5 us.
pub fn sequence_overheads() -> Vec<f64> {
    (0..=40u32).map(|k| f64::from(k) * 5e-6).collect()
}

/// A fit row: the measured mean TPOT (seconds), the server's context and the placement
/// the point was timed on.
pub struct FitRow {
    /// The measured mean TPOT.
    pub measured: f64,
    /// The server's `max_model_len`.
    pub context: u64,
    /// The point's placement, simulated again at each pair.
    pub chosen: Chosen,
}

/// A row of a host-time fit: its measured mean TPOT and its simulated one at a pair.
pub trait HostTimeRow: Sync {
    /// The measured mean TPOT (seconds).
    fn measured(&self) -> f64;
    /// The simulated mean TPOT with `engine` (the profile at one pair of host times).
    fn at(&self, engine: &EngineProfile) -> Result<f64, String>;
}

impl HostTimeRow for FitRow {
    fn measured(&self) -> f64 {
        self.measured
    }

    fn at(&self, engine: &EngineProfile) -> Result<f64, String> {
        let engine = engine.at_context(Some(self.context));
        Ok(self
            .chosen
            .simulate_with(&engine)
            .map_err(|e| e.to_string())?
            .ok_or("no serving point")?
            .tpot_seconds)
    }
}

/// The fitted constants and how well they fit.
#[derive(Clone, Debug, PartialEq)]
pub struct V0Fit {
    /// vLLM V0's host time per step (seconds).
    pub step_overhead: f64,
    /// vLLM V0's host time per sequence of a step (seconds).
    pub sequence_overhead: f64,
    /// The median absolute TPOT error of the fit rows at the fitted constants.
    pub median_error: f64,
    /// The fit rows.
    pub rows: usize,
}

/// The pair of the grids that minimizes the median absolute TPOT error of `rows`; `None`
/// without rows.
pub fn fit<R: HostTimeRow>(rows: &[&R], profile: &EngineProfile) -> Result<Option<V0Fit>, String> {
    if rows.is_empty() {
        return Ok(None);
    }
    let pairs: Vec<(f64, f64)> = sequence_overheads()
        .into_iter()
        .flat_map(|h1| step_overheads().into_iter().map(move |h0| (h0, h1)))
        .collect();
    let scored: Vec<Result<(f64, f64, f64), String>> = pairs
        .par_iter()
        .map(|&(h0, h1)| {
            let mut errors = Vec::with_capacity(rows.len());
            let engine = EngineProfile {
                step_overhead_seconds: h0,
                sequence_overhead_seconds: h1,
                several_devices_host: None,
                ..*profile
            };
            for row in rows {
                let predicted = row.at(&engine)?;
                let measured = row.measured();
                errors.push(((predicted - measured) / measured).abs());
            }
            Ok((median(errors), h0, h1))
        })
        .collect();
    let mut best: Option<(f64, f64, f64)> = None;
    // In grid order (h1, then h0): a strictly smaller error replaces the best, so ties
    // keep the smaller h1, then the smaller h0.
    for s in scored {
        let s = s?;
        if best.is_none_or(|b| s.0 < b.0) {
            best = Some(s);
        }
    }
    Ok(best.map(|(median_error, h0, h1)| V0Fit {
        step_overhead: h0,
        sequence_overhead: h1,
        median_error,
        rows: rows.len(),
    }))
}

impl V0Fit {
    /// The fit's two rows of a fitted-constants table (no final newline): `devices` names
    /// the pair (`one device`, `several devices`), `rows` says which points it is fitted
    /// on and `at` follows its median error.
    pub fn table_rows(&self, devices: &str, rows: &str, at: &str) -> String {
        let (steps, sequences) = (step_overheads(), sequence_overheads());
        format!(
            "| vllm@0.6 host time per step, {devices} | {:.2} ms | with the host time per sequence, the pair (per step in {:.0}-{:.0} ms by {:.2} ms, per sequence in {:.0}-{:.0} us by {:.0} us) that minimizes the median absolute TPOT error of {rows}; {:.0}% {at} | {} |\n| vllm@0.6 host time per sequence, {devices} | {:.0} us | fitted with the host time per step (above) | {} |",
            self.step_overhead * 1e3,
            steps[0] * 1e3,
            steps[steps.len() - 1] * 1e3,
            (steps[1] - steps[0]) * 1e3,
            sequences[0] * 1e6,
            sequences[sequences.len() - 1] * 1e6,
            (sequences[1] - sequences[0]) * 1e6,
            self.median_error * 100.0,
            self.rows,
            self.sequence_overhead * 1e6,
            self.rows,
        )
    }
}
