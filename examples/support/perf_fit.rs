//! The constants `examples/perf_validation.rs` fits on the fit half: vLLM's host time per
//! step and the devices' memory factors (from each fit row's TPOT decomposition), and the
//! HTTP engines' request overhead. The rules are in `docs/performance-model.md#validation`.

use jointplan::perf::efficiency::MAX_CLASS_MEMORY;
use jointplan::perf::{self, EngineProfile, TimeModel};

use super::{median, predicted, Case, Row};

/// The case's predicted TPOT as `A + s x h + B / m` in the engine's host time per step `h`
/// and the device's memory factor `m`: `A` at `h = 0, m = 1`, `B` from `m = 1/2`, `s`
/// (steps per output token) from `h = 1 ms`. Decode steps are memory-bound and the
/// simulation's step count does not depend on `h` or `m` at a fixed concurrency, so the
/// form is exact up to the nodes that change side of the roofline.
pub fn decomposition(
    case: &Case,
    model: &TimeModel,
    engine: &EngineProfile,
) -> Result<[f64; 3], String> {
    let at = |m: f64, h: f64| {
        let mut scaled = model.clone();
        scaled.memory_factor = m;
        let engine = EngineProfile {
            step_overhead_seconds: h,
            ..*engine
        };
        predicted(case, &scaled, &engine).map(|p| p.1)
    };
    let one = at(1.0, 0.0)?;
    let b = at(0.5, 0.0)? - one;
    let s = (at(1.0, 1e-3)? - one) / 1e-3;
    Ok([one - b, s, b])
}

/// The constants fitted on the fit half.
pub struct Fit {
    /// The HTTP engines' request overhead (seconds): the median TTFT residual of the fit
    /// half's served rows, rounded to 0.1 ms; and the rows it is the median of.
    pub request_overhead: (f64, usize),
    /// vLLM's host time per step (seconds), to 0.1 ms, and the TPOT rows of the fit.
    pub vllm_step: (f64, usize),
    /// Per device (its `name`): the median of its fit rows' implied memory factors at the
    /// fitted host time, rounded to 0.01 and capped at `1 / MAX_CLASS_MEMORY` (no class
    /// above the datasheet bandwidth); and the rows it is the median of.
    pub devices: Vec<(String, f64, usize)>,
}

/// A fit TPOT row: its decomposition, measured TPOT, device, and the host time per step
/// of its engine other than the fitted one (`None` for vLLM).
type FitRow<'a> = ([f64; 3], f64, &'a str, Option<f64>);

/// The devices' memory factors at vLLM host time `h`: per device, the median over its
/// rows of the factor that makes the row exact (`B / (T - A - s h)`), rounded and capped.
fn device_factors<'a>(
    rows: &[FitRow<'a>],
    h: f64,
) -> std::collections::BTreeMap<&'a str, (f64, usize)> {
    let mut by: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for ([a, s, b], t, device, step) in rows {
        let rest = t - a - s * step.unwrap_or(h);
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
/// steps) minimizing the median absolute TPOT error of the fit rows with each device's
/// factor at that `h` (the smallest `h` on a tie); then the request overhead.
pub fn fit(rows: &[Row]) -> Fit {
    let fit_rows: Vec<FitRow> = rows
        .iter()
        .filter(|r| r.fit)
        .filter_map(|r| {
            let step = (r.engine != "vllm")
                .then(|| perf::engine_profile(r.engine).map(|e| e.step_overhead_seconds))
                .flatten();
            Some((r.tpot_parts?, r.tpot_measured?, r.device.as_str(), step))
        })
        .collect();
    let mean_error = |h: f64| {
        let factors = device_factors(&fit_rows, h);
        let errors: Vec<f64> = fit_rows
            .iter()
            .filter_map(|([a, s, b], t, device, step)| {
                let m = factors.get(device)?.0;
                Some(((a + s * step.unwrap_or(h) + b / m - t) / t).abs())
            })
            .collect();
        median(errors)
    };
    let mut best = (f64::INFINITY, 0.0);
    for tenths in 0..=30u32 {
        let h = f64::from(tenths) * 1e-4;
        let e = mean_error(h);
        if e < best.0 - 1e-12 {
            best = (e, h);
        }
    }
    let h = best.1;
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
        devices: device_factors(&fit_rows, h)
            .into_iter()
            .map(|(d, (m, n))| (d.to_owned(), m, n))
            .collect(),
    }
}
