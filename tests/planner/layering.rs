//! The crate's layers, and a check that data flows one way through them.
//!
//! Every top-level module of `src/` has a rank; a module may name only modules of a lower
//! rank (`crate::x` or `jointplan::x` paths anywhere in its files). Modules of equal rank do
//! not know each other. A new module must be given a rank here, which is the moment to
//! decide where it belongs. `docs/architecture.md` draws the same table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bottom to top. Data types and hashing at the bottom, the command line at the top.
const LAYERS: &[(&str, u32)] = &[
    ("canonical", 0),
    ("error_kind", 0),
    ("json_input", 0),
    ("request", 1),
    ("selection", 1),
    ("engine", 1),
    ("plan", 2),
    ("synth", 3),
    ("check", 3),
    ("node", 3),
    ("memory", 4),
    ("candidates", 4),
    ("perf", 4),
    ("builder", 5),
    ("verify", 6),
    ("study", 7),
    ("placement", 8),
    ("render", 9),
    ("error", 10),
    ("cli", 11),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`None` for the crate roots).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative
        .components()
        .next()?
        .as_os_str()
        .to_str()?
        .to_owned();
    match first.strip_suffix(".rs") {
        Some("lib" | "main") => None,
        Some(name) => Some(name.to_owned()),
        None => Some(first),
    }
}

/// Every `crate::name` / `jointplan::name` a file's code (not its comments) names, modules
/// and items of the crate root alike.
fn named_modules(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        for prefix in ["crate::", "jointplan::"] {
            let mut rest = code;
            while let Some(at) = rest.find(prefix) {
                let after = &rest[at + prefix.len()..];
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                // Every name: a module (`crate::study`) or an item of the crate root
                // (`crate::ErrorKind`, a re-export), which only the top may name.
                if !name.is_empty() {
                    names.push(name);
                }
                rest = after;
            }
        }
    }
    names
}

#[test]
fn modules_only_name_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let ranks: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let Some(&rank) = ranks.get(module.as_str()) else {
            violations.push(format!(
                "src/{module}: not in the layer table of tests/planner/layering.rs; give it a rank"
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for named in named_modules(&text) {
            if named == module {
                continue;
            }
            match ranks.get(named.as_str()) {
                Some(&other) if other < rank => {}
                Some(&other) => violations.push(format!(
                    "{} (module {module}, layer {rank}) names crate::{named} (layer {other}): \
                     a module may only name lower layers",
                    file.strip_prefix(&src).unwrap().display()
                )),
                // Items of the crate root (re-exports such as `crate::Error`) are the top.
                None => {
                    if module != "cli" && module != "error" {
                        violations.push(format!(
                            "{} (module {module}) names crate::{named}, an item of the crate \
                             root: name the module that defines it",
                            file.strip_prefix(&src).unwrap().display()
                        ));
                    }
                }
            }
        }
    }
    violations.sort();
    violations.dedup();
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );
}

/// The repository's docs and code stand alone: nothing cites a document that is not in the
/// repository (the reference design notes the project started from live outside it).
#[test]
fn no_file_cites_a_document_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "docs", "examples", "benches", "tests", "python"] {
        if root.join(dir).is_dir() {
            rust_files_and_docs(&root.join(dir), &mut files);
        }
    }
    files.push(root.join("README.md"));
    let forbidden = ["domain.md", "shared/spec", "shared/domain", "../shared"];
    let mut found = Vec::new();
    for file in files {
        if file.ends_with("tests/planner/layering.rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if forbidden.iter().any(|f| line.contains(f)) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "citations of files outside the repository:\n{}",
        found.join("\n")
    );
}

fn rust_files_and_docs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if !path.ends_with("target") && !path.ends_with(".venv") {
                rust_files_and_docs(&path, out);
            }
        } else if path
            .extension()
            .is_some_and(|e| e == "rs" || e == "md" || e == "json" || e == "py" || e == "toml")
        {
            out.push(path);
        }
    }
}
