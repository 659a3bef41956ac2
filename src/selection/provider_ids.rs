//! The provider-id level after the penalty levels, by depth-first search.
//!
//! Given the optimal rank counts `opt` of the penalty levels (proved by the
//! integer program), the answer is the solution whose provider sequence in
//! node order is smallest among those whose rank counts equal `opt`.
//!
//! **Claim.** A depth-first search that visits the nodes in order, tries
//! each node's live candidates in provider order, propagates after every
//! choice ([`Domains`]) and backtracks on a wipe-out or when the penalty
//! lower bound is worse than `opt`, returns that solution first.
//!
//! *Proof.* Without pruning, the search enumerates complete choices in
//! lexicographic order of their provider sequences. Propagation removes only
//! candidates that no solution consistent with the choices so far can use,
//! and a branch whose lower bound is worse than `opt` holds no solution with
//! counts `opt`; so pruning skips no solution with counts `opt`, and the
//! first complete choice reached with counts not worse than `opt` (hence
//! equal, `opt` being optimal) is the smallest one. ∎
//!
//! The search is bounded by a number of steps; when the bound is reached the
//! caller falls back to the integer program.

use super::components::Comp;
use super::propagation::Domains;

/// The outcome of [`smallest_optimal`].
pub(crate) enum Search {
    /// The smallest provider sequence with counts `opt` (local indices).
    Found(Vec<usize>),
    /// The step bound was reached first.
    OutOfSteps,
    /// No solution has counts `opt` (impossible when `opt` is the proved
    /// optimum; reported as an internal error by the caller).
    Exhausted,
}

/// Whether `lb` is worse than `opt` on the penalty comparison (worst rank
/// first; rank 0 is free).
fn worse(lb: &[u64], opt: &[u64]) -> bool {
    for k in (1..opt.len()).rev() {
        if lb[k] != opt[k] {
            return lb[k] > opt[k];
        }
    }
    false
}

struct Frame {
    node: usize,
    live: Vec<usize>,
    next: usize,
    checkpoint: usize,
}

/// Depth-first search for the smallest provider sequence with rank counts
/// `opt`, within `max_steps` candidate trials.
pub(crate) fn smallest_optimal(comp: &Comp, opt: &[u64], max_steps: u64) -> Search {
    let Ok(mut d) = Domains::new(comp) else {
        return Search::Exhausted;
    };
    if worse(d.penalty_lower_bound(), opt) {
        return Search::Exhausted;
    }
    let n = comp.nodes.len();
    let next_open =
        |d: &Domains, from: usize| (from..n).find(|&v| d.live_count(v) > 1).unwrap_or(n);
    let mut steps = 0u64;
    let mut stack: Vec<Frame> = Vec::new();
    let mut at = next_open(&d, 0);
    loop {
        if at == n {
            let choice: Vec<usize> = (0..n).map(|v| d.live(v).next().unwrap_or(0)).collect();
            match comp.evaluate_local(&choice) {
                Some(score) if !worse(&score.counts, opt) => return Search::Found(choice),
                // Cannot happen (all nodes decided: the bound is exact);
                // treat as a dead end.
                _ => {}
            }
        } else {
            stack.push(Frame {
                node: at,
                live: d.live(at).collect(),
                next: 0,
                checkpoint: d.checkpoint(),
            });
        }
        // Advance to the next viable branch.
        loop {
            let Some(f) = stack.last_mut() else {
                return Search::Exhausted;
            };
            d.rollback(f.checkpoint);
            if f.next >= f.live.len() {
                stack.pop();
                continue;
            }
            let (u, c) = (f.node, f.live[f.next]);
            f.next += 1;
            steps += 1;
            if steps > max_steps {
                return Search::OutOfSteps;
            }
            if d.fix(u, c).is_ok() && !worse(d.penalty_lower_bound(), opt) {
                at = next_open(&d, u + 1);
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::components::{CCand, CNode};

    fn cand(orig: u16, res: &[(u32, u64)]) -> CCand {
        CCand {
            orig,
            preferred: false,
            res: res.to_vec(),
        }
    }

    #[test]
    fn finds_the_smallest_sequence_at_the_optimal_penalty() {
        // Two nodes share r0 (profiles p0 < p1). Node 0: a accepts p1,
        // b accepts p0/p1. Node 1: a accepts p0, b accepts p1.
        // Penalty optimum: r0 at p0 (0 resources at rank 1) needs 0=b, 1=a.
        let comp = Comp {
            nodes: vec![
                CNode {
                    global: 0,
                    cands: vec![cand(0, &[(0, 0b10)]), cand(1, &[(0, 0b11)])],
                },
                CNode {
                    global: 1,
                    cands: vec![cand(0, &[(0, 0b01)]), cand(1, &[(0, 0b10)])],
                },
            ],
            res_global: vec![0],
            profiles: 2,
        };
        match smallest_optimal(&comp, &[1, 0], 100) {
            Search::Found(c) => assert_eq!(c, vec![1, 0]),
            _ => panic!("expected a solution"),
        }
        // With one resource allowed at rank 1, the smallest sequence is (a, b).
        match smallest_optimal(&comp, &[0, 1], 100) {
            Search::Found(c) => assert_eq!(c, vec![0, 1]),
            _ => panic!("expected a solution"),
        }
        assert!(matches!(
            smallest_optimal(&comp, &[1, 0], 0),
            Search::OutOfSteps
        ));
    }
}
