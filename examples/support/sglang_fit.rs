//! The SGLang constants `examples/placement_validation.rs` fits on the fit half of the
//! multi-GPU table: SGLang's request overhead `o` (the time from a request's arrival until
//! its scheduler can run it, counted in its TTFT) and its prefill launch factor `f` (the
//! share of the device's per-kernel launch time a kernel of a step with prompt tokens
//! costs: SGLang runs those steps eagerly, without CUDA graphs). The rule is in
//! `docs/performance-validation.md#multi-gpu-points-placement-across-devices`.
//!
//! The fit rows are the SGLang points of the fit half with one client: there a request's
//! TTFT is its own path, `TTFT(o, f) = A + o + f K` exactly (one request at a time, its
//! prompt's steps fixed by its length; `A` the simulated TTFT at `o = 0, f = 0`, `K` the
//! prompt's launches at `f = 1`). With more clients the TTFT is mostly queueing under the
//! engine's scheduling policy, which the simulation does not reproduce (SGLang runs a
//! batch of prompts apart from the decodes); those points are held out.

use super::median;

/// The request overheads tried (seconds): 0 to 200 ms by 0.5 ms.
pub fn overheads() -> Vec<f64> {
    (0..=400u32).map(|k| f64::from(k) * 0.5e-3).collect()
}

/// The prefill launch factors tried: 0 to 10 by 0.1.
pub fn prefill_launch_factors() -> Vec<f64> {
    (0..=100u32).map(|k| f64::from(k) * 0.1).collect()
}

/// A fit row: the measured TTFT and the simulated TTFT's parts `A` and `K` (seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FitRow {
    /// The measured mean TTFT.
    pub measured: f64,
    /// The simulated TTFT at `o = 0, f = 0`.
    pub base: f64,
    /// The simulated TTFT's growth per unit of the prefill launch factor.
    pub launches: f64,
}

impl FitRow {
    /// The simulated TTFT at request overhead `o` and prefill launch factor `f`.
    pub fn at(&self, o: f64, f: f64) -> f64 {
        self.base + o + f * self.launches
    }
}

/// The fitted constants and how well they fit.
#[derive(Clone, Debug, PartialEq)]
pub struct SglangFit {
    /// SGLang's request overhead (seconds).
    pub request_overhead: f64,
    /// SGLang's prefill launch factor: fitted with the overhead when the rows determine it
    /// ([`SglangFit::determined`]), else the prior.
    pub prefill_launch: f64,
    /// Whether the rows determine the prefill launch factor: they hold more than two
    /// distinct simulated prompts (two constants solve any two of them exactly).
    pub determined: bool,
    /// The launch terms `K` of the rows' distinct simulated prompts (seconds), in order.
    pub distinct_launches: Vec<f64>,
    /// The median absolute TTFT error of the fit rows at the fitted constants.
    pub median_error: f64,
    /// The fit rows.
    pub rows: usize,
}

/// The pair among `overheads` x `factors` minimizing the median absolute TTFT error over
/// `rows` (the smallest overhead, then the smallest factor, on a tie): `(o, f, error)`.
/// `FIT_TRACE=1` prints the error of every pair.
fn best(rows: &[FitRow], overheads: &[f64], factors: &[f64]) -> (f64, f64, f64) {
    let trace = std::env::var_os("FIT_TRACE").is_some();
    let mut best = (f64::NAN, f64::NAN, f64::INFINITY);
    for &o in overheads {
        for &f in factors {
            let e = median(
                rows.iter()
                    .map(|r| ((r.at(o, f) - r.measured) / r.measured).abs())
                    .collect(),
            );
            if trace {
                println!(
                    "sglang fit overhead {:.1} ms prefill launch factor {f:.1}: {:.2}%",
                    o * 1e3,
                    e * 100.0
                );
            }
            if e < best.2 - 1e-12 {
                best = (o, f, e);
            }
        }
    }
    best
}

/// The fit: when the rows hold more than two distinct simulated prompts (rows of the same
/// `A` and `K` are one simulated prompt measured in several runs), both constants jointly
/// on the grid ([`overheads`] x [`prefill_launch_factors`]), minimizing the median
/// absolute TTFT error over `rows`; otherwise two constants solve any two prompts exactly
/// whatever they are, the rows do not determine the factor, and the overhead is fitted
/// alone at the factor's `prior`.
pub fn fit(rows: &[FitRow], prior: f64) -> Option<SglangFit> {
    if rows.is_empty() {
        return None;
    }
    let mut distinct: Vec<(f64, f64)> = Vec::new();
    for r in rows {
        if !distinct
            .iter()
            .any(|(a, k)| (a - r.base).abs() < 1e-9 && (k - r.launches).abs() < 1e-9)
        {
            distinct.push((r.base, r.launches));
        }
    }
    let determined = distinct.len() > 2;
    let factors = if determined {
        prefill_launch_factors()
    } else {
        vec![prior]
    };
    let (o, f, e) = best(rows, &overheads(), &factors);
    Some(SglangFit {
        request_overhead: o,
        prefill_launch: f,
        determined,
        distinct_launches: distinct.iter().map(|d| d.1).collect(),
        median_error: e,
        rows: rows.len(),
    })
}
