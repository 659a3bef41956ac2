//! The constants `examples/perf_validation.rs` fits on the fit half: vLLM's host time per
//! step and the devices' memory factors (from each fit row's TPOT decomposition), and
//! vLLM's request overhead. The rules are in `docs/performance-validation.md#validation`.

use jointplan::perf::efficiency::MAX_CLASS_MEMORY;
use jointplan::perf::{self, EngineProfile, TimeModel};

use super::{median, predicted, Case, Row};

/// The case's predicted TPOT as `A + s x h + K x f + B / m` in the engine's host time per
/// step `h`, its decode launch factor `f` (the share of the device's per-kernel launch time
/// a kernel of a decode step costs) and the device's memory factor `m`: `A` at
/// `h = 0, f = 0, m = 1`, `B` from `m = 1/2`, `s` (steps per output token) from `h = 1 ms`,
/// `K` (launch time per output token at `f = 1`) from `f = 1`. Decode steps are
/// memory-bound and the simulation's step count does not depend on `h`, `f` or `m` at a
/// fixed concurrency, so the form is exact up to the nodes that change side of the
/// roofline.
pub fn decomposition(
    case: &Case,
    model: &TimeModel,
    engine: &EngineProfile,
) -> Result<[f64; 4], String> {
    let at = |m: f64, h: f64, f: f64| {
        let mut scaled = model.clone();
        scaled.memory_factor = m;
        let engine = EngineProfile {
            step_overhead_seconds: h,
            decode_launch_factor: f,
            ..*engine
        };
        predicted(case, &scaled, &engine).map(|p| p.1)
    };
    let one = at(1.0, 0.0, 0.0)?;
    let b = at(0.5, 0.0, 0.0)? - one;
    let s = (at(1.0, 1e-3, 0.0)? - one) / 1e-3;
    let k = at(1.0, 0.0, 1.0)? - one;
    Ok([one - b, s, k, b])
}

/// The constants fitted on the fit half.
pub struct Fit {
    /// vLLM's request overhead (seconds): the median TTFT residual of the fit half's rows
    /// served by vLLM, rounded to 0.1 ms; and the rows it is the median of.
    pub request_overhead: (f64, usize),
    /// vLLM's host time per step (seconds), to 0.1 ms, and the TPOT rows of the fit.
    pub vllm_step: (f64, usize),
    /// vLLM's decode launch factor (the share of the device's per-kernel launch time a
    /// kernel of a CUDA-graph decode step costs), to 0.05.
    pub decode_launch: f64,
    /// Per device (its `name`): the median of its fit rows' implied memory factors at the
    /// fitted host time and launch factor, rounded to 0.01 and capped at
    /// `1 / MAX_CLASS_MEMORY` (no class above the datasheet bandwidth); and the rows it is
    /// the median of.
    pub devices: Vec<(String, f64, usize)>,
    /// vLLM V0's host times on one device (`examples/support/vllm_v0_fit.rs`), fitted on
    /// the V0 points of the fit half at the constants above; `None` without such points.
    pub vllm_v0_one_device: Option<super::vllm_v0_fit::V0Fit>,
}

/// A fit TPOT row: its decomposition, measured TPOT, device, and the host time per step
/// and decode launch factor of its engine when it is not the fitted one (`None` for vLLM).
type FitRow<'a> = ([f64; 4], f64, &'a str, Option<(f64, f64)>);

/// The devices' memory factors at vLLM host time `h` and decode launch factor `f`: per
/// device, the median over its rows of the factor that makes the row exact
/// (`B / (T - A - s h - K f)`), rounded and capped.
fn device_factors<'a>(
    rows: &[FitRow<'a>],
    h: f64,
    f: f64,
) -> std::collections::BTreeMap<&'a str, (f64, usize)> {
    let mut by: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for ([a, s, k, b], t, device, own) in rows {
        let (h, f) = own.unwrap_or((h, f));
        let rest = t - a - s * h - k * f;
        if *b > 0.0 && rest > 0.0 {
            by.entry(device).or_default().push(b / rest);
        }
    }
    by.into_iter()
        .map(|(d, v)| {
            let factor = ((median(v.clone()) * 100.0).round() / 100.0).min(1.0 / MAX_CLASS_MEMORY);
            (d, (factor, v.len()))
        })
        .collect()
}

/// The fit of the fit half's rows: vLLM's host time per step `h` (0 to 3 ms in 0.1 ms
/// steps) and decode launch factor `f` (0 to 3 in steps of 0.05) minimizing the median
/// absolute TPOT error of the fit rows with each device's factor at that `h` and `f` (the
/// smallest `h`, then the smallest `f`, on a tie); then the request overhead.
pub fn fit(rows: &[Row]) -> Fit {
    // vLLM V0's rows are not fit rows here: V0's host times are fitted with this fit's
    // constants (one device on this table, `vllm_v0_fit`; several on the multi-GPU
    // table), so no fit depends on its own result.
    let fit_rows: Vec<FitRow> = rows
        .iter()
        .filter(|r| r.fit && r.engine != "vllm@0.6")
        .filter_map(|r| {
            let own = (r.engine != "vllm")
                .then(|| {
                    perf::engine_profile(r.engine)
                        .map(|e| (e.step_overhead_seconds, e.decode_launch_factor))
                })
                .flatten();
            Some((r.tpot_parts?, r.tpot_measured?, r.device.as_str(), own))
        })
        .collect();
    let median_error = |h: f64, f: f64| {
        let factors = device_factors(&fit_rows, h, f);
        let errors: Vec<f64> = fit_rows
            .iter()
            .filter_map(|([a, s, k, b], t, device, own)| {
                let m = factors.get(device)?.0;
                let (h, f) = own.unwrap_or((h, f));
                Some(((a + s * h + k * f + b / m - t) / t).abs())
            })
            .collect();
        median(errors)
    };
    let mut best = (f64::INFINITY, 0.0, 0.0);
    for tenths in 0..=30u32 {
        let h = f64::from(tenths) * 1e-4;
        for twentieths in 0..=60u32 {
            let f = f64::from(twentieths) * 0.05;
            let e = median_error(h, f);
            if std::env::var_os("FIT_TRACE").is_some() {
                println!("fit h {:.1} ms f {f:.2}: {:.2}%", h * 1e3, e * 100.0);
            }
            if e < best.0 - 1e-12 {
                best = (e, h, f);
            }
        }
    }
    let (_, h, f) = best;
    let residuals: Vec<f64> = rows
        .iter()
        .filter(|r| r.fit)
        .filter_map(|r| r.ttft_residual)
        .collect();
    Fit {
        request_overhead: (
            (median(residuals.clone()) * 1e4).round() / 1e4,
            residuals.len(),
        ),
        vllm_step: (h, fit_rows.len()),
        decode_launch: f,
        devices: device_factors(&fit_rows, h, f)
            .into_iter()
            .map(|(d, (m, n))| (d.to_owned(), m, n))
            .collect(),
        vllm_v0_one_device: None,
    }
}
