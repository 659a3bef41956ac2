//! The preferred count of a part split into independent groups.
//!
//! After the preferred-count level is proved at `v*`, the integer program
//! keeps the row "at least `v*` preferences met" for every later level. That
//! row links every node of the part, and it is what makes the rank levels
//! after it slow: its LP relaxation lets preferences be met fractionally
//! anywhere. Usually the row can be replaced by much tighter local facts.
//!
//! **Groups.** Take the preferred candidates still allowed. Two of them are
//! linked when they touch a common resource and the preferred candidates
//! touching it have no profile in common there (so not all of them can be
//! chosen); groups are the classes of the transitive closure. Let `M_g` be
//! the most preferences group `g` can meet when it is solved alone (its
//! nodes with all their candidates, the other nodes dropped).
//!
//! **Bound.** Any solution of the part, restricted to a group's nodes, is a
//! solution of the group alone (dropping nodes only removes constraints),
//! so it meets at most `M_g` preferences in `g`, and the part meets at most
//! `Σ_g M_g` in total.
//!
//! **Exactness.** When the proved optimum `v*` equals `Σ_g M_g`, every
//! optimal solution meets exactly `M_g` preferences in every group (any
//! group below its `M_g` would need another above its own to reach the
//! sum). So the global row is equivalent, on the optimal solutions, to one
//! row "at least `M_g`" per group, and a group with `M_g = |g|` becomes a
//! fixing of each of its preferred candidates. When the sum exceeds `v*`
//! (preferences lost to non-preferred choices, or to a conflict the groups
//! do not see) or a group solve does not finish, nothing is replaced.

use std::collections::BTreeMap;

use petgraph::unionfind::UnionFind;

use crate::selection::exact::ilp::{solve_ilp, IlpLimits, IlpOutcome};
use crate::selection::model::objective::Level;
use crate::selection::reduce::components::Comp;

/// One group: its nodes (local indices, ascending) and `M_g`.
pub(crate) type PreferenceGroup = (Vec<usize>, usize);

/// The groups of the preferred candidates of the `live` nodes (their
/// preferred candidate `pref_cand[i]` is still allowed), when their own
/// optima add up to `met`, the optimum proved by `optimum` (a solution of
/// `comp`, which also starts each group's solve); `None` otherwise, or when
/// there is one group only (its row is the global row).
pub(crate) fn preference_groups(
    comp: &Comp,
    pref_cand: &[Option<usize>],
    live: &[usize],
    optimum: &[usize],
    met: usize,
    limits: &IlpLimits,
) -> Result<Option<Vec<PreferenceGroup>>, String> {
    let mut uf = UnionFind::<usize>::new(live.len());
    let mut by_res: Vec<Vec<(usize, u64)>> = vec![Vec::new(); comp.nres()];
    for (j, &i) in live.iter().enumerate() {
        let Some(p) = pref_cand[i] else { continue };
        for &(r, m) in &comp.nodes[i].cands[p].res {
            by_res[r as usize].push((j, m));
        }
    }
    for touch in &by_res {
        let common = touch.iter().fold(u64::MAX, |acc, &(_, m)| acc & m);
        if common == 0 {
            for w in touch.windows(2) {
                uf.union(w[0].0, w[1].0);
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (j, &i) in live.iter().enumerate() {
        groups.entry(uf.find(j)).or_default().push(i);
    }
    if groups.len() < 2 {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(groups.len());
    let mut total = 0usize;
    for nodes in groups.into_values() {
        let best = if nodes.len() == 1 {
            // A lone preferred candidate conflicts with no other: the
            // group alone meets it (its resources accept its own masks).
            1
        } else {
            let alone = Comp {
                nodes: nodes.iter().map(|&i| comp.nodes[i].clone()).collect(),
                res_global: comp.res_global.clone(),
                profiles: comp.profiles,
                res_time: comp.res_time.clone(),
            };
            // The optimum restricted to the group is a solution of the
            // group alone: a start, so a limit leaves an answer.
            let start: Vec<usize> = nodes.iter().map(|&i| optimum[i]).collect();
            match solve_ilp(&alone, &[Level::PreferredCount], None, limits, Some(&start))? {
                IlpOutcome::Solved {
                    choice,
                    stopped: None,
                    ..
                } => alone
                    .evaluate_local(&choice)
                    .map_or(0, |s| s.pref.iter().filter(|&&p| p).count()),
                _ => return Ok(None),
            }
        };
        total += best;
        out.push((nodes, best));
    }
    Ok((total == met).then_some(out))
}
