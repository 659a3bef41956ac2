//! Golden hash files: `{name: plan hash}` in a JSON file, rewritten after an intended change
//! when `JOINTPLAN_BLESS` is set (shared by the golden tests of `tests/planner` and
//! `tests/cli`).

use std::collections::BTreeMap;
use std::path::Path;

/// Whether this run rewrites the golden files (`JOINTPLAN_BLESS=1`).
pub fn blessing() -> bool {
    std::env::var_os("JOINTPLAN_BLESS").is_some()
}

/// Writes `hashes` to `file` when blessing (and returns `None`); else reads the golden
/// hashes from `file`, naming the file and how to bless when it cannot be read.
pub fn bless_or_read(
    file: &Path,
    hashes: &BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    if blessing() {
        let mut text = serde_json::to_string_pretty(hashes).unwrap();
        text.push('\n');
        std::fs::write(file, text).unwrap();
        return None;
    }
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e} (bless with JOINTPLAN_BLESS=1)", file.display()));
    Some(serde_json::from_str(&text).unwrap())
}
