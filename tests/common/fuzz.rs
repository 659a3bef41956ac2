//! A structure-aware mutator of JSON documents for the fuzzing harness
//! (`tests/planner/fuzz.rs`, `tests/cli/fuzz_exit_codes.rs`).
//!
//! A case is a document with one to three mutations, chosen by a seeded SplitMix64, so
//! every case is reproducible from `(seed, case index)`. Tree mutations: delete a key,
//! change a value's type, put a boundary number, copy an id-like string from elsewhere
//! (duplicate or cross-wired ids), swap two strings, put a huge string or one with control
//! or bidirectional-override characters, duplicate or drop an array element. Text
//! mutations: trailing bytes, a forged duplicate key, a cut at a random byte.

use serde_json::Value;

/// SplitMix64: small, fast and good enough to drive mutations deterministically.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// The generator of case `index` under `seed`.
    pub fn for_case(seed: u64, index: u64) -> Rng {
        let mut rng = Rng(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        rng.next();
        rng
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One step of a path into a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// An object member.
    Key(String),
    /// An array element.
    Index(usize),
}

/// Every path of `value` (the root included), in document order.
pub fn paths(value: &Value) -> Vec<Vec<Step>> {
    let mut out = Vec::new();
    let mut here = Vec::new();
    walk(value, &mut here, &mut out);
    out
}

fn walk(value: &Value, here: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(here.clone());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                here.push(Step::Key(key.clone()));
                walk(child, here, out);
                here.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                here.push(Step::Index(i));
                walk(child, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn at<'v>(value: &'v Value, path: &[Step]) -> Option<&'v Value> {
    let mut node = value;
    for step in path {
        node = match (step, node) {
            (Step::Key(k), Value::Object(map)) => map.get(k)?,
            (Step::Index(i), Value::Array(items)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(node)
}

fn at_mut<'v>(value: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    let mut node = value;
    for step in path {
        node = match (step, node) {
            (Step::Key(k), Value::Object(map)) => map.get_mut(k)?,
            (Step::Index(i), Value::Array(items)) => items.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(node)
}

/// What one case did to its document, for the report.
#[derive(Clone, Debug, Default)]
pub struct Case {
    /// The mutations, in order (`kind@path`).
    pub mutations: Vec<String>,
    /// The mutated text.
    pub text: String,
}

const BOUNDARY_NUMBERS: [&str; 10] = [
    "0",
    "1",
    "-1",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "9007199254740993",
    "1e308",
    "-0.0",
    "0.5",
];

fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if out.is_empty() {
        ".".to_owned()
    } else {
        out
    }
}

/// Applies one to three mutations to `document` and returns the case.
pub fn mutate(document: &Value, rng: &mut Rng) -> Case {
    let mut value = document.clone();
    let mut case = Case::default();
    let count = 1 + rng.below(3);
    let mut text_mutation = None;
    for _ in 0..count {
        let all = paths(&value);
        let path = all[rng.below(all.len())].clone();
        let string_paths: Vec<Vec<Step>> = all
            .iter()
            .filter(|p| matches!(at(&value, p), Some(Value::String(_))))
            .cloned()
            .collect();
        let strings: Vec<String> = string_paths
            .iter()
            .filter_map(|p| at(&value, p).and_then(Value::as_str).map(str::to_owned))
            .collect();
        let kind = rng.below(12);
        let label = match kind {
            0 => {
                // Delete a key of the object at `path` (or of its parent).
                let mut target = path.clone();
                if !matches!(at_mut(&mut value, &target), Some(Value::Object(_))) {
                    target.pop();
                }
                if let Some(Value::Object(map)) = at_mut(&mut value, &target) {
                    if !map.is_empty() {
                        let key = map.keys().nth(rng.below(map.len())).cloned().unwrap();
                        map.remove(&key);
                        target.push(Step::Key(key));
                    }
                }
                format!("delete@{}", render(&target))
            }
            1 => {
                let replacement = match rng.below(7) {
                    0 => Value::Null,
                    1 => Value::Bool(true),
                    2 => Value::from(0),
                    3 => Value::from(-1),
                    4 => Value::from("x"),
                    5 => Value::Array(Vec::new()),
                    _ => Value::Object(Default::default()),
                };
                if let Some(slot) = at_mut(&mut value, &path) {
                    *slot = replacement;
                }
                format!("retype@{}", render(&path))
            }
            2 | 3 => {
                let number = BOUNDARY_NUMBERS[rng.below(BOUNDARY_NUMBERS.len())];
                let replacement: Value = serde_json::from_str(number).unwrap();
                let numeric: Vec<&Vec<Step>> = all
                    .iter()
                    .filter(|p| matches!(at(&value, p), Some(Value::Number(_))))
                    .collect();
                let target = if numeric.is_empty() {
                    path.clone()
                } else {
                    numeric[rng.below(numeric.len())].clone()
                };
                if let Some(slot) = at_mut(&mut value, &target) {
                    *slot = replacement;
                }
                format!("number({number})@{}", render(&target))
            }
            4 | 5 if !strings.is_empty() => {
                // Copy an id-like string over another string: a duplicate or cross-wired id.
                let target = string_paths[rng.below(string_paths.len())].clone();
                let source = strings[rng.below(strings.len())].clone();
                if let Some(slot) = at_mut(&mut value, &target) {
                    *slot = Value::String(source);
                }
                format!("copy-id@{}", render(&target))
            }
            6 if strings.len() >= 2 => {
                let a = string_paths[rng.below(string_paths.len())].clone();
                let b = string_paths[rng.below(string_paths.len())].clone();
                let va = at_mut(&mut value, &a).cloned();
                let vb = at_mut(&mut value, &b).cloned();
                if let (Some(va), Some(vb)) = (va, vb) {
                    *at_mut(&mut value, &a).unwrap() = vb;
                    *at_mut(&mut value, &b).unwrap() = va;
                }
                format!("swap@{}&{}", render(&a), render(&b))
            }
            7 => {
                let text = match rng.below(3) {
                    0 => "a".repeat(100_000),
                    1 => "id\u{202E}evil".to_owned(),
                    _ => "line\nbreak\u{0}".to_owned(),
                };
                let target = if string_paths.is_empty() {
                    path.clone()
                } else {
                    string_paths[rng.below(string_paths.len())].clone()
                };
                if let Some(slot) = at_mut(&mut value, &target) {
                    *slot = Value::String(text);
                }
                format!("odd-string@{}", render(&target))
            }
            8 | 9 => {
                let arrays: Vec<&Vec<Step>> = all
                    .iter()
                    .filter(|p| matches!(at(&value, p), Some(Value::Array(a)) if !a.is_empty()))
                    .collect();
                if arrays.is_empty() {
                    "no-array".to_owned()
                } else {
                    let target = arrays[rng.below(arrays.len())].clone();
                    let duplicate = kind == 8;
                    if let Some(Value::Array(items)) = at_mut(&mut value, &target) {
                        let i = rng.below(items.len());
                        if duplicate {
                            let copy = items[i].clone();
                            items.insert(i, copy);
                        } else {
                            items.remove(i);
                        }
                    }
                    format!(
                        "{}@{}",
                        if duplicate {
                            "dup-element"
                        } else {
                            "drop-element"
                        },
                        render(&target)
                    )
                }
            }
            _ => {
                text_mutation = Some(rng.below(3));
                "text".to_owned()
            }
        };
        case.mutations.push(label);
    }
    let mut text = serde_json::to_string_pretty(&value).unwrap();
    match text_mutation {
        Some(0) => {
            text.push_str(["\n{}", " garbage", "\u{0}", "]"][rng.below(4)]);
            case.mutations.push("trailing-bytes".to_owned());
        }
        Some(1) => {
            // A forged first copy of a key: `"k": <value of another key>,` right after a `{`.
            let opens: Vec<usize> = text.match_indices("{\n").map(|(i, _)| i + 1).collect();
            if let Some(&at) = opens.get(rng.below(opens.len().max(1))) {
                let rest = &text[at..];
                if let Some(q) = rest.find('"') {
                    let key_end = rest[q + 1..].find('"').map(|e| q + 1 + e);
                    if let Some(key_end) = key_end {
                        let key = rest[q..=key_end].to_owned();
                        text.insert_str(at, &format!("{key}: null,"));
                        case.mutations.push(format!("duplicate-key({key})"));
                    }
                }
            }
        }
        Some(_) => {
            let cut = rng.below(text.len().max(1));
            let mut cut = cut;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            case.mutations.push(format!("cut@{cut}"));
        }
        None => {}
    }
    case.text = text;
    case
}

/// The number of cases to run: `JOINTPLAN_FUZZ_CASES`, or `default`.
pub fn cases(default: u64) -> u64 {
    std::env::var("JOINTPLAN_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The seed: `JOINTPLAN_FUZZ_SEED`, or 1.
pub fn seed() -> u64 {
    std::env::var("JOINTPLAN_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}
