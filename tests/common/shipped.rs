//! The shipped model folders' configurations and devices, read as the synthesizer reads
//! them (shared by the synthesis tests).
#![allow(dead_code)]

use std::path::Path;

use jointplan::synth::{DeviceDescription, ModelConfig};

/// `models/MODEL/config.json`.
pub fn config(model: &str) -> ModelConfig {
    ModelConfig::read(&Path::new("models").join(model).join("config.json")).unwrap()
}

/// The shipped A100 80 GB device.
pub fn a100() -> DeviceDescription {
    DeviceDescription::read(Path::new("models/devices/a100-80gb.json")).unwrap()
}
