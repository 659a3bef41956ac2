//! Ids grouped by their pattern: ids that differ only in their numbered segments
//! (`node.layer.3.q_proj`, `node.layer.4.q_proj`) share the pattern `node.layer.*.q_proj`,
//! and a group prints as `node.layer.[0-60].q_proj` with a count. This is what lets the
//! text summary of a model with 61 layers of 256 experts read as its structure (one line per
//! repeated node or resource, exceptions listed under it) instead of 15,000 lines.
//!
//! Numbered segments and digests are defined in [`crate::request::id_pattern`], which also
//! reads the printed patterns back (`--pin`, `--forbid`, `explain --node`).
//!
//! How a group's numbers print: one number as itself, a few ranges as `[0-2,5]`, values
//! with one step as `[0-40 step 2]`, up to [`MAXIMUM_LISTED`] scattered values each by
//! name (`[3,17,29]`), more as a count and a span (`[64 values in 0-255]`). A pattern with
//! several numbers prints each position's set; when the members are not every combination
//! of those sets, the line says how many of them they are (`(65 of 133 combinations)`).

use std::collections::{BTreeMap, BTreeSet};

use crate::request::id_pattern::{segment_number, split, SEPARATORS};

/// Most ranges a number set prints before it is summarised as a count and a span.
const MAXIMUM_RANGES: usize = 4;

/// Most scattered values a number set lists by name before it is summarised.
const MAXIMUM_LISTED: usize = 8;

/// A content-addressed id (pool, workspace) for people: its 64-hex digest cut to its first
/// 12 digits.
pub fn short(id: &str) -> &str {
    match id.rfind('/') {
        Some(i) if id.len() - i - 1 == 64 => &id[..i + 13],
        _ => id,
    }
}

/// An id split at its first numbered segment: the text before it (with its separator),
/// the number, and the text after it, without its separator when that is the one before
/// the number (so that no two ids split alike). `node.layer.12.expert.3` is (`node.layer.`,
/// 12, `expert.3`), `node.layer.12-a` is (`node.layer.`, 12, `-a`); `None` for an id
/// without a numbered segment.
pub fn split_first_number(id: &str) -> Option<(&str, u64, &str)> {
    let mut start = 0;
    loop {
        let end = id[start..]
            .find(SEPARATORS)
            .map_or(id.len(), |offset| start + offset);
        if let Some(number) = segment_number(&id[start..end]) {
            // Separators are one byte (ASCII).
            let before = id[..start].bytes().next_back();
            let rest = match id[end..].bytes().next() {
                Some(after) if Some(after) == before => &id[end + 1..],
                _ => &id[end..],
            };
            return Some((&id[..start], number, rest));
        }
        if end == id.len() {
            return None;
        }
        start = end + 1;
    }
}

/// A set of numbers as the summary prints it (see [`PatternGroup`]'s patterns).
pub fn numbers_shown(numbers: impl IntoIterator<Item = u64>) -> String {
    number_set(&numbers.into_iter().collect())
}

/// One member of a group: its numbers (one per `*`), its id and the item.
type Member<'a, T> = (Vec<u64>, &'a str, &'a T);

/// Items whose ids share one pattern, in the order they were given.
#[derive(Debug)]
pub struct PatternGroup<'a, T> {
    /// The pattern, numbered segments as `*`.
    pattern: String,
    /// Each member: its numbers (one per `*`), its id and the item.
    members: Vec<Member<'a, T>>,
}

impl<'a, T> PatternGroup<'a, T> {
    /// The group's pattern, numbered segments as `*` (`expert.*`).
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The group's members split by `key` (the majority first, then by first appearance),
    /// each part with its own printed pattern (a part of one member prints its id).
    pub fn parts<K: Ord>(&self, key: impl Fn(&T) -> K) -> Vec<(String, Vec<&'a T>)> {
        let mut order: BTreeMap<K, usize> = BTreeMap::new();
        let mut parts: Vec<Vec<&Member<'a, T>>> = Vec::new();
        for member in &self.members {
            let index = *order.entry(key(member.2)).or_insert_with(|| {
                parts.push(Vec::new());
                parts.len() - 1
            });
            parts[index].push(member);
        }
        // Majority first; ties keep the order of first appearance (a stable sort).
        parts.sort_by_key(|part| std::cmp::Reverse(part.len()));
        parts
            .into_iter()
            .map(|part| {
                let shown = match part.as_slice() {
                    [(_, id, _)] => (*id).to_owned(),
                    _ => self.shown(part.iter().map(|(numbers, _, _)| numbers)),
                };
                (shown, part.into_iter().map(|(_, _, item)| *item).collect())
            })
            .collect()
    }

    /// The pattern with each `*` replaced by the numbers the given members take there:
    /// one number as itself, several as `[0-2,5]`, many as `[64 values in 0-255]`.
    fn shown<'n>(&self, numbers: impl Iterator<Item = &'n Vec<u64>>) -> String {
        let mut sets: Vec<BTreeSet<u64>> = Vec::new();
        let mut tuples: BTreeSet<&Vec<u64>> = BTreeSet::new();
        for member in numbers {
            tuples.insert(member);
            sets.resize_with(member.len().max(sets.len()), BTreeSet::new);
            for (set, number) in sets.iter_mut().zip(member) {
                set.insert(*number);
            }
        }
        let mut out = String::with_capacity(self.pattern.len() + 8 * sets.len());
        let mut next_set = sets.iter();
        for c in self.pattern.chars() {
            match (c == '*').then(|| next_set.next()).flatten() {
                Some(set) => out.push_str(&number_set(set)),
                None => out.push(c),
            }
        }
        // Several numbered positions print as a grid of their sets: say so when the members'
        // distinct tuples of numbers are fewer than the grid (members that differ only in a
        // digest share a tuple).
        if sets.len() > 1 {
            let grid = sets
                .iter()
                .try_fold(1usize, |product, set| product.checked_mul(set.len()));
            let tuples = tuples.len();
            if grid.is_none_or(|grid| grid > tuples) {
                let grid = grid.map_or_else(
                    || format!("more than {}", usize::MAX),
                    |grid| grid.to_string(),
                );
                out.push_str(&format!(" ({tuples} of {grid} combinations)"));
            }
        }
        out
    }
}

/// A set of numbers for people: `7`, `[0-2,5]`, or `[64 values in 0-255]`.
fn number_set(set: &BTreeSet<u64>) -> String {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for &n in set {
        match ranges.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(n) => *end = n,
            _ => ranges.push((n, n)),
        }
    }
    match ranges.as_slice() {
        [] => "*".to_owned(),
        [(a, b)] if a == b => a.to_string(),
        _ if ranges.len() > MAXIMUM_RANGES => {
            let (first, last) = (ranges[0].0, ranges[ranges.len() - 1].1);
            if let Some(step) = common_step(set) {
                return format!("[{first}-{last} step {step}]");
            }
            if set.len() <= MAXIMUM_LISTED {
                let listed: Vec<String> = set.iter().map(u64::to_string).collect();
                return format!("[{}]", listed.join(","));
            }
            format!("[{} values in {first}-{last}]", set.len())
        }
        _ => {
            let parts: Vec<String> = ranges
                .iter()
                .map(|&(a, b)| {
                    if a == b {
                        a.to_string()
                    } else {
                        format!("{a}-{b}")
                    }
                })
                .collect();
            format!("[{}]", parts.join(","))
        }
    }
}

/// The one difference between consecutive numbers of `set`, when there is one (and at
/// least three numbers, so that the step is a pattern and not a pair).
fn common_step(set: &BTreeSet<u64>) -> Option<u64> {
    let mut numbers = set.iter();
    let (&first, &second) = (numbers.next()?, numbers.next()?);
    let step = second - first;
    let mut previous = second;
    let mut count = 2;
    for &n in numbers {
        if n - previous != step {
            return None;
        }
        previous = n;
        count += 1;
    }
    (count >= 3).then_some(step)
}

/// Groups `items` by the pattern of their ids, groups in the order of their first member.
pub fn group_by_pattern<'a, T>(
    items: &'a [T],
    id: impl Fn(&'a T) -> &'a str,
) -> Vec<PatternGroup<'a, T>> {
    let mut index_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut groups: Vec<PatternGroup<'a, T>> = Vec::new();
    for item in items {
        let item_id = id(item);
        let (pattern, numbers) = split(item_id);
        let index = match index_of.get(&pattern) {
            Some(&index) => index,
            None => {
                index_of.insert(pattern.clone(), groups.len());
                groups.push(PatternGroup {
                    pattern,
                    members: Vec::new(),
                });
                groups.len() - 1
            }
        };
        groups[index].members.push((numbers, item_id, item));
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_segments_become_the_pattern() {
        assert_eq!(
            split("node.layer.12.expert.7.gate"),
            ("node.layer.*.expert.*.gate".to_owned(), vec![12, 7])
        );
        assert_eq!(
            split("resource/state/layer.3.kv"),
            ("resource/state/layer.*.kv".to_owned(), vec![3])
        );
        // Digits inside a segment, and digests, are literal.
        assert_eq!(split("layer.3a.x").1, Vec::<u64>::new());
        let digest = format!("resource/scratch/sha256/{}", "a1".repeat(32));
        assert_eq!(
            split(&digest),
            ("resource/scratch/sha256/<digest>".to_owned(), vec![])
        );
        assert_eq!(split("a..b").0, "a..b");
    }

    #[test]
    fn groups_print_their_number_sets_and_split_by_key() {
        let ids: Vec<(String, &str)> = (0..8)
            .map(|l| {
                let provider = if l == 5 { "flash" } else { "paged" };
                (format!("node.layer.{l}.attention"), provider)
            })
            .chain([("node.embedding".to_owned(), "gather")])
            .collect();
        let groups = group_by_pattern(&ids, |(id, _)| id.as_str());
        assert_eq!(groups.len(), 2);
        let parts = groups[0].parts(|(_, provider)| *provider);
        assert_eq!(parts[0].0, "node.layer.[0-4,6-7].attention");
        assert_eq!(parts[0].1.len(), 7);
        assert_eq!(parts[1].0, "node.layer.5.attention");
        assert_eq!(groups[1].parts(|_| ())[0].0, "node.embedding");
    }

    #[test]
    fn scattered_numbers_are_stepped_listed_or_counted() {
        let set: BTreeSet<u64> = (0..20).map(|n| n * 3).collect();
        assert_eq!(number_set(&set), "[0-57 step 3]");
        let set: BTreeSet<u64> = [0, 1, 2, 9].into_iter().collect();
        assert_eq!(number_set(&set), "[0-2,9]");
        // A few exceptions are named, so that a reader can find them.
        let set: BTreeSet<u64> = [7, 12, 19, 33, 50].into_iter().collect();
        assert_eq!(number_set(&set), "[7,12,19,33,50]");
        // Many with no common step are a count and a span.
        let set: BTreeSet<u64> = (0..20).map(|n| n * n).collect();
        assert_eq!(number_set(&set), "[20 values in 0-361]");
        // Two values are two ranges, not a step.
        let set: BTreeSet<u64> = [3, 9].into_iter().collect();
        assert_eq!(number_set(&set), "[3,9]");
        assert_eq!(common_step(&set), None);
    }

    #[test]
    fn an_id_splits_at_its_first_number() {
        assert_eq!(
            split_first_number("node.layer.12.expert.3"),
            Some(("node.layer.", 12, "expert.3"))
        );
        assert_eq!(split_first_number("blk_7"), Some(("blk_", 7, "")));
        assert_eq!(split_first_number("node.embedding"), None);
        assert_eq!(split_first_number("e.007.x"), None);
        assert_eq!(numbers_shown([3, 1, 2, 9]), "[1-3,9]");
        // Another separator after the number, or one at the end, stays: no two ids of one
        // layer split alike.
        assert_eq!(split_first_number("L.1-x"), Some(("L.", 1, "-x")));
        assert_eq!(split_first_number("L.1.x"), Some(("L.", 1, "x")));
        assert_eq!(split_first_number("L.0_"), Some(("L.", 0, "_")));
        assert_eq!(split_first_number("L.0"), Some(("L.", 0, "")));
        assert_eq!(split_first_number("b/3/x"), Some(("b/", 3, "x")));
    }

    #[test]
    fn combinations_are_counted_as_distinct_tuples_of_numbers() {
        // Four ids that differ in a digest but take only two tuples of numbers: 2 of 4.
        let digest = |c: char| c.to_string().repeat(64);
        let ids = [
            format!("r/{}/0/0", digest('a')),
            format!("r/{}/0/0", digest('b')),
            format!("r/{}/1/1", digest('c')),
            format!("r/{}/1/1", digest('e')),
        ];
        let groups = group_by_pattern(&ids, |id| id.as_str());
        assert_eq!(groups.len(), 1);
        assert_eq!(
            groups[0].parts(|_| ())[0].0,
            "r/<digest>/[0-1]/[0-1] (2 of 4 combinations)"
        );
    }

    #[test]
    fn zero_padded_numbers_are_literal_and_every_id_punctuation_separates() {
        assert_eq!(split("expert.007.w").1, Vec::<u64>::new());
        assert_eq!(split("expert.0.w").1, vec![0]);
        assert_eq!(
            split("blk_3_attn-2:x"),
            ("blk_*_attn-*:x".to_owned(), vec![3, 2])
        );
        // `007` and `7` are different ids and never one group.
        let ids = ["e.007", "e.7", "e.8"];
        let groups = group_by_pattern(&ids, |id| id);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].parts(|_| ())[0].0, "e.007");
        assert_eq!(groups[1].parts(|_| ())[0].0, "e.[7-8]");
    }

    #[test]
    fn a_grid_the_members_do_not_fill_says_how_many_they_are() {
        let mut ids: Vec<String> = Vec::new();
        for layer in 0..3 {
            for expert in 0..4 {
                ids.push(format!("l.{layer}.e.{expert}"));
            }
        }
        let groups = group_by_pattern(&ids, |id| id.as_str());
        assert_eq!(groups[0].parts(|_| ())[0].0, "l.[0-2].e.[0-3]");
        // Layer 0 has one expert fewer: 11 of the 12 combinations.
        let partial: Vec<&String> = ids.iter().filter(|id| *id != "l.0.e.3").collect();
        let groups = group_by_pattern(&partial, |id| id.as_str());
        assert_eq!(
            groups[0].parts(|_| ())[0].0,
            "l.[0-2].e.[0-3] (11 of 12 combinations)"
        );
    }
}
