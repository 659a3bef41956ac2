//! The greedy elimination order (min-fill, then fewest combinations, then
//! node order) and its cost, counted before any table is built.

use std::collections::BTreeSet;
use std::time::Instant;

use super::BUCKET_SHARE;

/// Why no elimination order was returned.
pub(super) enum Stop {
    /// The combinations it visits add up to more than the budget.
    OverBudget,
    /// The deadline passed (on parts of thousands of nodes the order
    /// itself takes a while).
    Deadline,
}

/// A greedy elimination order of every node, within `budget` and
/// `deadline`.
pub(super) fn elimination_order(
    domain: &[usize],
    scopes: &[&[usize]],
    budget: u64,
    deadline: Option<Instant>,
) -> Result<Vec<usize>, Stop> {
    let n = domain.len();
    let mut adj: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for scope in scopes {
        for &a in *scope {
            for &b in *scope {
                if a != b {
                    adj[a].insert(b);
                }
            }
        }
    }
    let weight = |v: usize, adj: &[BTreeSet<usize>]| -> u64 {
        adj[v]
            .iter()
            .fold(domain[v] as u64, |p, &u| p.saturating_mul(domain[u] as u64))
    };
    // Each vertex's key (fill edges, combinations, index), recomputed only
    // when its neighbourhood changed.
    let key = |v: usize, adj: &[BTreeSet<usize>]| (fill_in(v, adj), weight(v, adj), v);
    let mut keys: Vec<Option<(usize, u64, usize)>> = (0..n).map(|v| Some(key(v, &adj))).collect();
    // The same keys, ordered: the next node is the first.
    let mut queue: BTreeSet<(usize, u64, usize)> = keys.iter().flatten().copied().collect();
    let mut order = Vec::with_capacity(n);
    let mut total = 0u64;
    for step in 0..n {
        if step % 256 == 255 && deadline.is_some_and(|t| Instant::now() >= t) {
            return Err(Stop::Deadline);
        }
        let Some((_, wv, v)) = queue.pop_first() else {
            break;
        };
        total = total.saturating_add(wv);
        if total > budget || wv > budget / BUCKET_SHARE {
            return Err(Stop::OverBudget);
        }
        let nb: Vec<usize> = adj[v].iter().copied().collect();
        for &a in &nb {
            adj[a].remove(&v);
            for &b in &nb {
                if a != b {
                    adj[a].insert(b);
                }
            }
        }
        adj[v].clear();
        keys[v] = None;
        let mut dirty: BTreeSet<usize> = BTreeSet::new();
        for &a in &nb {
            dirty.insert(a);
            dirty.extend(adj[a].iter().copied());
        }
        for u in dirty {
            if let Some(old) = keys[u] {
                let new = key(u, &adj);
                if new != old {
                    queue.remove(&old);
                    queue.insert(new);
                    keys[u] = Some(new);
                }
            }
        }
        order.push(v);
    }
    Ok(order)
}

/// Edges eliminating `v` would add between its neighbours.
fn fill_in(v: usize, adj: &[BTreeSet<usize>]) -> usize {
    let nb: Vec<usize> = adj[v].iter().copied().collect();
    let mut fill = 0;
    for (j, &a) in nb.iter().enumerate() {
        fill += nb[j + 1..]
            .iter()
            .filter(|&&b| !adj[a].contains(&b))
            .count();
    }
    fill
}
