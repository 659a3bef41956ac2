//! Prints the validation table of `docs/engines-validation.md`: jointplan's engine accounting for every
//! published startup log of `docs/data/engine-logs.json` whose settings are complete,
//! against what the engine logged. `tests/planner/engine_rules.rs` recomputes it and
//! compares it with the committed table.
//!
//! `cargo run --example engine_table`

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read_to_string(root.join("docs/data/engine-logs.json"))?;
    let table = jointplan::study::engine_validation::validation_table(&data, root)?;
    print!("{}", table.markdown());
    Ok(())
}
