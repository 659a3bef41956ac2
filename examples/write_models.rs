//! Writes the shipped example requests `models/*/request.json`.
//!
//! Plan requests quote fingerprints of themselves, so they are built in Rust
//! (`tests/common/models.rs`) and sealed rather than written by hand. Run from the crate
//! root after changing a model:
//!
//! ```text
//! cargo run --example write_models
//! JOINTPLAN_BLESS=1 cargo test --test planner golden_models
//! ```

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    for (name, request) in common::models::shipped_models() {
        let folder = root.join(name);
        std::fs::create_dir_all(&folder)?;
        let mut text = serde_json::to_string_pretty(&request)?;
        text.push('\n');
        let file = folder.join("request.json");
        std::fs::write(&file, text)?;
        println!("wrote {}", file.display());
    }
    Ok(())
}
