//! Where each level's value lives in the cost vector of variable elimination: one or more
//! 62-bit words per level, and each node's bit or field in the node-order levels.

use super::{INF, LEX_BITS};
use crate::selection::model::objective::{Level, Weights};
use crate::selection::reduce::components::Comp;

/// Where each level's value lives in a cost vector.
pub(super) struct Layout {
    /// Words per cost.
    pub(super) width: usize,
    /// First word of the preferred count, if that level is present.
    pref_count: Option<usize>,
    /// First word of each rank count, by rank.
    rank: Vec<Option<usize>>,
    /// The weighted level's word and its weights.
    weighted: Option<(usize, Weights)>,
    /// First word of the node-order preference level.
    pref_lex: Option<usize>,
    /// Each node's bit position in that level: only the nodes whose
    /// candidates differ in preference get one, in node order (a node whose
    /// flag is the same in every choice never decides a comparison), which
    /// keeps the words few once most nodes are fixed.
    lex_bit: Vec<Option<usize>>,
    /// First word of the provider-id level.
    ids: Option<usize>,
    /// Each node's field in that level: its first bit position and its
    /// width in bits. Only the nodes with more than one candidate get one,
    /// in node order, wide enough for their largest candidate index.
    id_field: Vec<Option<(usize, u32)>>,
}

impl Layout {
    /// `None` when the weighted level's sums could come near overflow.
    pub(super) fn new(comp: &Comp, levels: &[Level], weights: Option<&Weights>) -> Option<Layout> {
        let mut out = Layout {
            width: 0,
            pref_count: None,
            rank: vec![None; comp.profiles],
            weighted: None,
            pref_lex: None,
            lex_bit: Vec::new(),
            ids: None,
            id_field: Vec::new(),
        };
        for level in levels {
            match *level {
                Level::PreferredCount => out.pref_count = Some(out.width),
                Level::RankCount(k) => *out.rank.get_mut(k)? = Some(out.width),
                Level::Weighted => {
                    // Every partial sum must stay far from `INF` (and from
                    // overflow): at most every resource at the largest rank
                    // weight, every node at the reward.
                    let w = weights?;
                    let largest = i128::from(w.ranks.iter().copied().max().unwrap_or(0));
                    let mut extent = largest * comp.nres() as i128
                        + i128::from(w.preferred) * comp.nodes.len() as i128;
                    if w.has_time() {
                        // Every node at its dearest candidate, every resource at its
                        // dearest profile.
                        for n in &comp.nodes {
                            extent += i128::from(n.cands.iter().map(|c| c.time).max().unwrap_or(0));
                        }
                        for r in 0..comp.nres() as u32 {
                            extent += (0..comp.profiles)
                                .map(|k| i128::from(comp.res_cost(r, k)))
                                .max()
                                .unwrap_or(0);
                        }
                    }
                    if extent >= i128::from(INF / 4) {
                        return None;
                    }
                    out.weighted = Some((out.width, w.clone()));
                }
                Level::PreferredLex => {
                    let mut bits = 0;
                    out.lex_bit = comp
                        .nodes
                        .iter()
                        .map(|nd| {
                            let varies = nd.cands.iter().any(|c| c.preferred)
                                && nd.cands.iter().any(|c| !c.preferred);
                            bits += usize::from(varies);
                            varies.then(|| bits - 1)
                        })
                        .collect();
                    out.pref_lex = Some(out.width);
                    out.width += bits.div_ceil(LEX_BITS).max(1) - 1;
                }
                Level::ProviderLex => {
                    let mut bits = 0usize;
                    out.id_field = comp
                        .nodes
                        .iter()
                        .map(|nd| {
                            let n = nd.cands.len();
                            (n > 1).then(|| {
                                let width = usize::BITS - (n - 1).leading_zeros();
                                bits += width as usize;
                                (bits - width as usize, width)
                            })
                        })
                        .collect();
                    out.ids = Some(out.width);
                    out.width += bits.div_ceil(LEX_BITS).max(1) - 1;
                }
            }
            out.width += 1;
        }
        // No level left (every one constant on the part): every feasible
        // choice is optimal; one word that stays zero carries feasibility.
        out.width = out.width.max(1);
        Some(out)
    }

    /// Adds the node term of `node` choosing its candidate `cand` (local
    /// index, provider order) with this preferred flag and time cost.
    pub(super) fn node_term(
        &self,
        node: usize,
        cand: usize,
        (preferred, time): (bool, u64),
        cost: &mut [i64],
    ) {
        if let Some(w) = self.pref_count {
            cost[w] -= i64::from(preferred);
        }
        if let Some((w, weights)) = &self.weighted {
            cost[*w] -= i64::from(weights.preferred) * i64::from(preferred);
            if weights.has_time() {
                // Within `i64`: `Layout::new` bounded the extent.
                cost[*w] += i64::try_from(time).unwrap_or(i64::MAX / 4);
            }
        }
        if let (Some(w), Some(Some(bit)), false) =
            (self.pref_lex, self.lex_bit.get(node), preferred)
        {
            cost[w + bit / LEX_BITS] += 1i64 << (LEX_BITS - 1 - bit % LEX_BITS);
        }
        if let (Some(w), Some(Some((first, width)))) = (self.ids, self.id_field.get(node)) {
            // The candidate index, most significant bit first, at the
            // field's positions (a field may run over a word boundary: each
            // bit position belongs to one node, so no sum carries).
            for j in 0..*width {
                if (cand >> (width - 1 - j)) & 1 == 1 {
                    let bit = first + j as usize;
                    cost[w + bit / LEX_BITS] += 1i64 << (LEX_BITS - 1 - bit % LEX_BITS);
                }
            }
        }
    }

    /// Adds the resource term of a used resource at rank `k` whose time cost there is
    /// `time`.
    pub(super) fn rank_term(&self, k: usize, time: u64, cost: &mut [i64]) {
        if let Some(Some(w)) = self.rank.get(k) {
            cost[*w] += 1;
        }
        if let Some((w, weights)) = &self.weighted {
            cost[*w] += i64::from(weights.ranks.get(k).copied().unwrap_or(0));
            if weights.has_time() {
                cost[*w] += i64::try_from(time).unwrap_or(i64::MAX / 4);
            }
        }
    }
}
