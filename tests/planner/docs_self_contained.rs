//! The repository's documentation stands alone: no file of `src/`, `docs/`, `examples/`,
//! `benches/`, `tests/` or `README.md` cites a document outside the repository. The rules
//! are in `docs/rules.md` and the selection format in `docs/selection-problem.md`; a comment
//! or doc that names an external design document or spec, or links out of the repository
//! through `..`, fails this test with the file, line and text.

use std::path::{Component, Path, PathBuf};

/// Texts that name documents outside the repository. Built with `concat!` so that this file,
/// which is scanned too, does not match itself.
const FORBIDDEN: [&str; 4] = [
    concat!("domain", ".md"),
    concat!("shared/", "domain"),
    concat!("shared/", "spec"),
    concat!("../", "shared"),
];

/// The selection format's file name: outside `docs/` it must be cited by its repository
/// path, `docs/` + this.
const SELECTION_FORMAT: &str = concat!("selection-problem", ".md");

/// Every violation in `text` of the file at `relative` (a path inside the repository, with
/// `/` separators), as `path:line: what`.
fn violations_in(relative: &str, text: &str) -> Vec<String> {
    let in_docs = relative.starts_with("docs/");
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = format!("{relative}:{}", i + 1);
        for needle in FORBIDDEN {
            if line.contains(needle) {
                found.push(format!("{at}: cites `{needle}`: {}", line.trim()));
            }
        }
        if !in_docs {
            for (pos, _) in line.match_indices(SELECTION_FORMAT) {
                if !line[..pos].ends_with("docs/") {
                    found.push(format!(
                        "{at}: cites `{SELECTION_FORMAT}` without its `docs/` path: {}",
                        line.trim()
                    ));
                }
            }
        }
        for target in link_targets(line) {
            if leaves_repository(relative, target) {
                found.push(format!(
                    "{at}: links `{target}` outside the repository: {}",
                    line.trim()
                ));
            }
        }
    }
    found
}

/// The targets of the Markdown links `[text](target)` on `line`.
fn link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(pos, _)| {
            let rest = &line[pos + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .collect()
}

/// Whether the relative link `target`, written in the file at `relative`, resolves above the
/// repository root.
fn leaves_repository(relative: &str, target: &str) -> bool {
    if target.contains("://") || target.starts_with('#') || target.starts_with('/') {
        return false;
    }
    let path = target.split('#').next().unwrap_or(target);
    let mut depth = Path::new(relative).components().count() as i64 - 1;
    for component in Path::new(path).components() {
        match component {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// Every file under `dir`, recursively, in name order.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn no_file_cites_a_document_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for dir in ["src", "docs", "examples", "benches", "tests"] {
        files_under(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 50,
        "only {} files found under {}",
        files.len(),
        root.display()
    );
    let mut found = Vec::new();
    for file in &files {
        let Ok(bytes) = std::fs::read(file) else {
            continue;
        };
        let relative = file
            .strip_prefix(root)
            .unwrap_or(file)
            .to_string_lossy()
            .replace('\\', "/");
        found.extend(violations_in(&relative, &String::from_utf8_lossy(&bytes)));
    }
    assert!(
        found.is_empty(),
        "{} citation(s) of documents outside the repository; describe the rule in docs/ \
         (rules: docs/rules.md, selection format: docs/selection-problem.md) and cite that:\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_scan_flags_external_citations_and_links() {
    let cited = format!("//! Pools ({} 4.5).", FORBIDDEN[0]);
    assert_eq!(violations_in("src/memory/pools.rs", &cited).len(), 1);
    let spec = format!("/// Format: see {SELECTION_FORMAT}.");
    assert_eq!(violations_in("src/cli/solve.rs", &spec).len(), 1);
    let spec_in_repo = format!("/// Format: see docs/{SELECTION_FORMAT}.");
    assert!(violations_in("src/cli/solve.rs", &spec_in_repo).is_empty());
    let relative_in_docs = format!("[the problem]({SELECTION_FORMAT})");
    assert!(violations_in("docs/solver.md", &relative_in_docs).is_empty());
    assert_eq!(
        violations_in("docs/solver.md", "[spec](../../elsewhere/spec.md)").len(),
        1
    );
    assert!(violations_in("docs/solver.md", "[readme](../README.md#layout)").is_empty());
    assert!(violations_in("README.md", "[rules](docs/rules.md)").is_empty());
    assert_eq!(violations_in("README.md", "[up](../x.md)").len(), 1);
}
