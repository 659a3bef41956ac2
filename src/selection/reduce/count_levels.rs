//! Which levels of an objective can decide anything on a part, and how a
//! leading run of count levels becomes one integer objective.
//!
//! * A level that takes the same value on every solution of a part never
//!   decides a comparison (lexicographic order skips equal levels), so it is
//!   dropped for that part ([`live_levels`]): the preference levels when no
//!   candidate of the part is preferred, a rank-count level when no
//!   candidate accepts that rank for any resource. Without preferences,
//!   `max-preferred` and `min-penalty` thus reduce to the penalty levels and
//!   the provider ids, the shape the fast path of `strategy` handles.
//! * A run of count levels (the preferred count, then rank counts worst
//!   first) is ordered exactly by one weighted sum with mixed-radix weights
//!   ([`grouped_counts`]), as long as the total weight stays within the
//!   exact range of one level solve ([`ilp::MAX_MAGNITUDE`]); what does not
//!   fit stays one level per solve.

use crate::selection::exact::ilp;
use crate::selection::model::objective::{Level, Weights};
use crate::selection::reduce::components::Comp;

/// Per rank, the number of resources of `comp` that some candidate accepts
/// at that rank (an upper bound on that rank's count in any solution).
fn can_be_at_rank(comp: &Comp) -> Vec<u64> {
    let mut can = vec![0u64; comp.profiles];
    let mut union = vec![0u64; comp.nres()];
    for n in &comp.nodes {
        for c in &n.cands {
            for &(r, m) in &c.res {
                union[r as usize] |= m;
            }
        }
    }
    for m in union {
        for (k, slot) in can.iter_mut().enumerate() {
            *slot += m >> k & 1;
        }
    }
    can
}

/// `levels` without the levels that are constant on `comp`: preference
/// levels when no candidate is preferred, rank-count levels of ranks no
/// candidate accepts. The weighted level is kept when it has a non-zero
/// weight.
pub(crate) fn live_levels(comp: &Comp, levels: &[Level], weights: Option<&Weights>) -> Vec<Level> {
    let any_preferred = comp
        .nodes
        .iter()
        .any(|n| n.cands.iter().any(|c| c.preferred));
    let can = can_be_at_rank(comp);
    levels
        .iter()
        .copied()
        .filter(|l| match *l {
            Level::PreferredLex | Level::PreferredCount => any_preferred,
            Level::RankCount(k) => can.get(k).is_some_and(|&c| c > 0),
            Level::Weighted => weights.is_some_and(|w| {
                (any_preferred && w.preferred != 0)
                    || w.ranks.iter().zip(&can).any(|(&wk, &c)| wk != 0 && c > 0)
                    || (w.has_time() && comp.has_time())
            }),
            Level::ProviderLex => true,
        })
        .collect()
}

/// A leading run of count levels as few solves as exactness allows.
///
/// `prefix` must be a preferred-count level (optional) followed by rank
/// counts, worst rank first, or this returns `None`. With `R_k` the number
/// of resources that can be at rank `k`, the weights `W_1 = 1`,
/// `W_{k+1} = 1 + Σ_{j≤k} R_j W_j` make one resource at rank `k + 1`
/// outweigh every possible count below it, so `Σ_k W_k · count_k` orders
/// solutions exactly like the rank-count levels; likewise a preference
/// weight `1 + Σ_k R_k W_k` makes one more preference met outweigh every
/// possible penalty. The weights stop at the largest rank `g` whose total
/// stays within [`ilp::MAX_MAGNITUDE`]: the result is the rank counts above
/// `g` as levels of their own, then one weighted level for ranks `g … 1`
/// (and the preference count, when it still fits in front of them; else it
/// stays a level of its own, first).
pub(crate) fn grouped_counts(comp: &Comp, prefix: &[Level]) -> Option<(Vec<Level>, Weights)> {
    let (count_first, ranks_part) = match prefix.split_first() {
        Some((Level::PreferredCount, rest)) => (true, rest),
        _ => (false, prefix),
    };
    if ranks_part.is_empty() || !ranks_part.iter().all(|l| matches!(l, Level::RankCount(_))) {
        return None;
    }
    // Worst rank first, no rank twice.
    let listed: Vec<usize> = ranks_part
        .iter()
        .filter_map(|l| match *l {
            Level::RankCount(k) => Some(k),
            _ => None,
        })
        .collect();
    if listed.windows(2).any(|w| w[0] <= w[1]) {
        return None;
    }
    let can = can_be_at_rank(comp);
    let mut ranks = vec![0u32; comp.profiles];
    let mut total = 0u64;
    let mut top = 0usize;
    for k in 1..comp.profiles {
        if !listed.contains(&k) {
            // Constant on this part (no resource can be at rank k).
            if can[k] == 0 {
                continue;
            }
            // A charged rank outside the run: grouping would mix it in.
            return None;
        }
        let next = total.checked_add(1).and_then(|w| {
            let t = total.checked_add(w.checked_mul(can[k])?)?;
            Some((u32::try_from(w).ok()?, t))
        });
        match next {
            Some((w, t)) if t as f64 <= ilp::MAX_MAGNITUDE => {
                ranks[k] = w;
                total = t;
                top = k;
            }
            _ => break,
        }
    }
    if top == 0 {
        return None;
    }
    let above: Vec<Level> = listed
        .iter()
        .filter(|&&k| k > top)
        .map(|&k| Level::RankCount(k))
        .collect();
    let npref = comp
        .nodes
        .iter()
        .filter(|n| n.cands.iter().any(|c| c.preferred))
        .count() as u64;
    // The preference count joins the weighted level only when nothing sits
    // between them and the whole sum still fits.
    let pref_weight = total.checked_add(1);
    let joined = count_first
        && above.is_empty()
        && pref_weight
            .and_then(|p| p.checked_mul(npref))
            .and_then(|t| t.checked_add(total))
            .is_some_and(|t| t as f64 <= ilp::MAX_MAGNITUDE)
        && pref_weight.is_some_and(|p| u32::try_from(p).is_ok());
    let mut levels = Vec::new();
    if count_first && !joined {
        levels.push(Level::PreferredCount);
    }
    levels.extend(above);
    levels.push(Level::Weighted);
    let preferred = if joined {
        pref_weight.and_then(|p| u32::try_from(p).ok()).unwrap_or(0)
    } else {
        0
    };
    Some((
        levels,
        Weights {
            preferred,
            ranks,
            time: None,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::reduce::components::{CCand, CNode};

    fn comp() -> Comp {
        // Two nodes on r0 (profiles p0 < p1 < p2); node 1 is preferred-able.
        let c = |orig: u16, preferred: bool, m: u64| CCand {
            orig,
            preferred,
            res: vec![(0, m)],
            time: 0,
        };
        Comp {
            nodes: vec![
                CNode {
                    global: 0,
                    cands: vec![c(0, false, 0b010), c(1, false, 0b110)],
                },
                CNode {
                    global: 1,
                    cands: vec![c(0, true, 0b010), c(1, false, 0b011)],
                },
            ],
            res_global: vec![0],
            profiles: 3,
            res_time: Default::default(),
        }
    }

    #[test]
    fn constant_levels_are_dropped() {
        let mut c = comp();
        let all = [
            Level::PreferredCount,
            Level::RankCount(2),
            Level::RankCount(1),
            Level::ProviderLex,
        ];
        assert_eq!(live_levels(&c, &all, None), all.to_vec());
        for n in &mut c.nodes {
            for cand in &mut n.cands {
                cand.preferred = false;
                cand.res[0].1 &= 0b011;
            }
        }
        assert_eq!(
            live_levels(&c, &all, None),
            vec![Level::RankCount(1), Level::ProviderLex]
        );
    }

    #[test]
    fn preference_count_outweighs_every_penalty() {
        let c = comp();
        let (levels, w) = grouped_counts(
            &c,
            &[
                Level::PreferredCount,
                Level::RankCount(2),
                Level::RankCount(1),
            ],
        )
        .expect("groupable");
        assert_eq!(levels, vec![Level::Weighted]);
        // One resource: R_1 = R_2 = 1, W_1 = 1, W_2 = 2, preference 1 + 3.
        assert_eq!(w.ranks, vec![0, 1, 2]);
        assert_eq!(w.preferred, 4);
        // A rank-count run out of order is not grouped.
        assert!(grouped_counts(&c, &[Level::RankCount(1), Level::RankCount(2)]).is_none());
        assert!(grouped_counts(&c, &[Level::PreferredLex, Level::RankCount(1)]).is_none());
    }
}
