//! `plan` and `fit` agree on every preset: the sequence and token fields are ceilings, the
//! context and `minimum_sequences` (1 when absent) requirements (docs/synth.md, "Policy
//! presets: ceilings and requirements").
//!
//! For each built-in preset, llama-3.2-1b (2 layers) is planned on a device sized so that
//! three and a half sequences' KV cache fit after everything else: the plan's "sequences
//! that fit" is below the preset's ceiling, `fit --maximize sequences` answers the same
//! count (a ceiling below a reusable bucket drops the bucket: the search starts at 1), and
//! `fit --maximize context` reaches at least the preset's context (one sequence is the
//! requirement, not the ceiling of 4 or 64).

use std::path::PathBuf;

use jointplan::plan::ExecutionPlan;
use jointplan::study::fit::{fit, FitSubject, Knob};
use jointplan::study::ServingReport;
use jointplan::synth::{DeviceDescription, ModelSource, PolicyPreset};
use jointplan::BuildOptions;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn source(preset: &str, device: Option<PathBuf>) -> ModelSource {
    let mut source = ModelSource::folder(root().join("models/llama-3.2-1b"));
    source.layers = Some(2);
    source.policy = Some(preset.to_owned());
    source.device = device;
    source
}

#[test]
fn plan_and_fit_agree_on_every_preset() {
    let options = BuildOptions::default();
    let dir = tempfile::tempdir().unwrap();
    let base_file = root().join("models/devices/rtx-4090-24gb.json");
    for name in ["interactive", "server"] {
        let preset = PolicyPreset::resolve(name).unwrap();
        // The bytes outside sequences and one sequence's state, on the real device.
        let roomy = source(name, Some(base_file.clone())).synthesize().unwrap();
        let plan = ExecutionPlan::build(&roomy.request, &options).unwrap();
        let (report, _) = ServingReport::with_limits(&roomy.request, &plan).unwrap();
        let outside = u64::try_from(
            i128::from(plan.payload.memory.usable_capacity_bytes) - report.headroom_bytes,
        )
        .unwrap();
        let usable = outside + report.kv_bytes_per_sequence * 7 / 2;
        let total = (usable + preset.memory_reserve_bytes) * 1000
            / u64::from(preset.memory_capacity_per_mille)
            + 1000;
        let mut device = DeviceDescription::read(&base_file).unwrap();
        device.total_memory_bytes = total;
        device.driver_memory_bytes = None;
        let file = dir.path().join(format!("{name}-device.json"));
        std::fs::write(&file, serde_json::to_vec(&device).unwrap()).unwrap();

        let tight = source(name, Some(file.clone()));
        let request = tight.synthesize().unwrap().request;
        let plan = ExecutionPlan::build(&request, &options).unwrap();
        let (report, limits) = ServingReport::with_limits(&request, &plan).unwrap();
        let fit_now = report.sequences_that_fit.unwrap();
        assert_eq!(fit_now, 3, "{name}: {report:?}");
        assert!(fit_now < u64::from(limits.maximum_active_sequences));
        // The requirement (1 sequence) fits: `plan` does not refuse.
        assert!(report.refusal(&request, &limits, 1).is_none(), "{name}");

        let sequences = fit(
            &FitSubject::Model(Box::new(tight.clone())),
            Knob::Sequences,
            &options,
        )
        .unwrap();
        assert_eq!(sequences.largest, Some(fit_now), "{name}: {sequences:?}");

        let context = fit(
            &FitSubject::Model(Box::new(tight.clone())),
            Knob::Context,
            &options,
        )
        .unwrap();
        let largest = context.largest.unwrap();
        assert!(
            largest >= limits.context_tokens,
            "{name}: fit --maximize context {largest} below the plan's {}",
            limits.context_tokens
        );
        let trained = limits.trained_context.as_ref().unwrap().tokens;
        if largest == trained {
            assert!(context.next.unwrap().reason.contains("trained context"));
        } else {
            // One sequence at the next context needs more than the headroom.
            assert!(context
                .next
                .unwrap()
                .reason
                .contains("requirement does not fit"));
        }
    }
}
