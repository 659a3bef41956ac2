//! The model's facts gathered once and reused across placements that share them.
//!
//! Gathering ([`ModelFacts::gather`]: the model synthesized and planned on one device) is
//! the costly part of a placement, and it depends on the model source, the set's first
//! device and the policy only, not on how many devices the set has, its links, the
//! objective or the serving point. `fit --devices DIR --max-count N` places each count `n`
//! of one device file, and a serving engine's accounting synthesizes the model for the
//! same device again ([`super::serving_engine`]): with a [`Gathered`] kept across those
//! calls, each (source, device, policy) is gathered and synthesized once. The facts are
//! the same value either way, so every answer is the one [`super::place`] gives.

use std::path::{Path, PathBuf};

use crate::builder::BuildOptions;
use crate::synth::{DeviceDescription, ModelSource, PolicyPreset, Synthesized};

use super::model::ModelFacts;
use super::PlacementError;

/// What the facts were gathered from.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    source: ModelSource,
    device: DeviceDescription,
    file: PathBuf,
    policy: PolicyPreset,
}

impl Key {
    fn new(
        source: &ModelSource,
        device: &DeviceDescription,
        file: &Path,
        policy: &PolicyPreset,
    ) -> Key {
        Key {
            source: source.clone(),
            device: device.clone(),
            file: file.to_path_buf(),
            policy: policy.clone(),
        }
    }
}

/// Facts and syntheses gathered so far, by what they were gathered from. One `Gathered`
/// serves one [`BuildOptions`] (the options a plan is built with are not part of the key:
/// give every call the same).
#[derive(Debug)]
pub struct Gathered {
    keep: bool,
    facts: Vec<(Key, ModelFacts)>,
    synthesized: Vec<(Key, Synthesized)>,
}

impl Default for Gathered {
    fn default() -> Self {
        Gathered::kept()
    }
}

impl Gathered {
    /// A store that keeps what it gathers for the next call.
    pub fn kept() -> Gathered {
        Gathered {
            keep: true,
            facts: Vec::new(),
            synthesized: Vec::new(),
        }
    }

    /// A store that keeps nothing: one placement's own gathering (what [`super::place`]
    /// does), without a copy kept.
    pub fn once() -> Gathered {
        Gathered {
            keep: false,
            facts: Vec::new(),
            synthesized: Vec::new(),
        }
    }

    /// The facts of `source` on `device` (read from `file`) under `policy`: gathered
    /// ([`ModelFacts::gather`]) the first time, a copy of the kept ones after.
    pub fn facts(
        &mut self,
        source: &ModelSource,
        device: &DeviceDescription,
        file: &Path,
        options: &BuildOptions,
        policy: &PolicyPreset,
    ) -> Result<ModelFacts, PlacementError> {
        let key = Key::new(source, device, file, policy);
        if let Some((_, facts)) = self.facts.iter().find(|(k, _)| *k == key) {
            return Ok(facts.clone());
        }
        let facts = ModelFacts::gather(source, device, file, options, policy)?;
        if self.keep {
            self.facts.push((key, facts.clone()));
        }
        Ok(facts)
    }

    /// `source` synthesized for `device` (read from `file`) under `policy`
    /// ([`ModelSource::synthesize_on_with_policy`]): once, then the kept synthesis.
    pub fn synthesized(
        &mut self,
        source: &ModelSource,
        device: &DeviceDescription,
        file: &Path,
        policy: &PolicyPreset,
    ) -> Result<Synthesized, PlacementError> {
        let key = Key::new(source, device, file, policy);
        if let Some((_, synthesized)) = self.synthesized.iter().find(|(k, _)| *k == key) {
            return Ok(synthesized.clone());
        }
        let synthesized = source
            .synthesize_on_with_policy(device, file, policy)
            .map_err(|e| PlacementError::Synth(Box::new(e)))?;
        if self.keep {
            self.synthesized.push((key, synthesized.clone()));
        }
        Ok(synthesized)
    }

    /// Gatherings done and kept so far: `(facts, syntheses)`.
    pub fn counts(&self) -> (usize, usize) {
        (self.facts.len(), self.synthesized.len())
    }
}
