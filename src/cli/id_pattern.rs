//! Ids grouped by their pattern: ids that differ only in their numbered segments
//! (`node.layer.3.q_proj`, `node.layer.4.q_proj`) share the pattern `node.layer.*.q_proj`,
//! and a group prints as `node.layer.[0-60].q_proj` with a count. This is what lets the
//! text summary of a model with 61 layers of 256 experts read as its structure (one line per
//! repeated node or resource, exceptions listed under it) instead of 15,000 lines.
//!
//! A numbered segment is a segment of ASCII digits (at most 18, so that it fits a `u64`)
//! between separators (`.` or `/`) or at either end; a segment of 64 hex digits is a
//! content digest and groups as `<digest>`. Everything else is literal (`layer.3a`).

use std::collections::{BTreeMap, BTreeSet};

/// The separators between segments of an id.
const SEPARATORS: [char; 2] = ['.', '/'];

/// What a content digest (64 hex digits) stands as in a pattern: content-addressed ids
/// (scratch and binding resources, pools) group by what precedes their digest.
const DIGEST: &str = "<digest>";

/// Most ranges a number set prints before it is summarised as a count and a span.
const MAXIMUM_RANGES: usize = 4;

/// An id split into its pattern (numbered segments replaced by `*`) and its numbers.
fn split(id: &str) -> (String, Vec<u64>) {
    let mut pattern = String::with_capacity(id.len());
    let mut numbers = Vec::new();
    let mut rest = id;
    loop {
        let end = rest.find(SEPARATORS).unwrap_or(rest.len());
        let segment = &rest[..end];
        let numbered = !segment.is_empty()
            && segment.len() <= 18
            && segment.bytes().all(|b| b.is_ascii_digit());
        let digest = segment.len() == 64 && segment.bytes().all(|b| b.is_ascii_hexdigit());
        match segment.parse::<u64>() {
            Ok(number) if numbered => {
                pattern.push('*');
                numbers.push(number);
            }
            _ if digest => pattern.push_str(DIGEST),
            _ => pattern.push_str(segment),
        }
        if end == rest.len() {
            break;
        }
        // Separators are one byte (ASCII).
        pattern.push_str(&rest[end..=end]);
        rest = &rest[end + 1..];
    }
    (pattern, numbers)
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
        for member in numbers {
            sets.resize_with(member.len().max(sets.len()), BTreeSet::new);
            for (set, number) in sets.iter_mut().zip(member) {
                set.insert(*number);
            }
        }
        let mut out = String::with_capacity(self.pattern.len() + 8 * sets.len());
        let mut sets = sets.iter();
        for c in self.pattern.chars() {
            match (c == '*').then(|| sets.next()).flatten() {
                Some(set) => out.push_str(&number_set(set)),
                None => out.push(c),
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
    fn scattered_numbers_are_counted() {
        let set: BTreeSet<u64> = (0..20).map(|n| n * 3).collect();
        assert_eq!(number_set(&set), "[20 values in 0-57]");
        let set: BTreeSet<u64> = [0, 1, 2, 9].into_iter().collect();
        assert_eq!(number_set(&set), "[0-2,9]");
    }
}
