//! Domain propagation with undo: the engine behind the exact greedy
//! treatment of node-order lexicographic levels (`preference`).
//!
//! State: the *live* candidates of every node and, for every resource, its
//! domain `D(r)`: the profiles `r` can still have in a solution that uses it.
//! Two sound rules run to a fixpoint after every decision:
//!
//! * **R1** (candidate support): a candidate `c` is dead when for some
//!   resource `r` it touches, `accepts(c, r) ∩ D(r) = ∅`;
//! * **R2** (sure touch): when every live candidate of a node touches `r`,
//!   `r` is used and `D(r) ⊆ ⋃_c accepts(c, r)` over those candidates.
//!
//! Both only remove values that no solution consistent with the decisions can
//! use, so a wipe-out (a node without candidates, or a surely used resource
//! with an empty domain) proves that the decisions admit no solution. When
//! every node has one live candidate and the fixpoint holds, the candidates
//! form a solution (R2 has intersected each resource's accepted sets), which
//! [`Domains::complete`] returns as a witness; callers still re-check it with
//! [`Comp::evaluate_local`].
//!
//! Every change is recorded on a trail, so a tentative decision is undone in
//! time proportional to what it changed ([`Domains::checkpoint`],
//! [`Domains::rollback`]).

use crate::selection::model::problem::{best_rank, Mask};
use crate::selection::reduce::components::Comp;

/// A decision admits no solution: propagation emptied this node (or a
/// resource this node surely touches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wipeout {
    /// Component position of the node that lost its last candidate or whose
    /// surely touched resource lost its last profile.
    pub node: usize,
}

enum Change {
    /// A candidate (flat index) was killed.
    Cand(usize),
    /// A resource domain was narrowed from this value.
    Dom(u32, Mask),
    /// The node started to surely touch the resource.
    Sure(u32, u32),
}

#[derive(Clone, Copy)]
enum Work {
    Res(u32),
    Node(u32),
}

/// Live candidates and resource domains of one component, with a trail.
pub(crate) struct Domains<'a> {
    comp: &'a Comp,
    /// First flat candidate index of each node.
    off: Vec<usize>,
    alive: Vec<bool>,
    nlive: Vec<u32>,
    dom: Vec<Mask>,
    /// Per resource: (node, flat candidate, accepted mask) of every candidate
    /// touching it.
    touch: Vec<Vec<(u32, u32, Mask)>>,
    trail: Vec<Change>,
    queue: Vec<Work>,
    queued_res: Vec<bool>,
    queued_node: Vec<bool>,
    /// Scratch of R2: (resource, union of masks, number of live touchers).
    cover: Vec<(u32, Mask, u32)>,
    /// Resources each node surely touches (all its live candidates do).
    sure_of: Vec<Vec<u32>>,
    /// Number of nodes that surely touch each resource.
    sure_count: Vec<u32>,
    /// Per rank: surely used resources whose domain's best rank is that rank.
    lower_bound: Vec<u64>,
}

impl<'a> Domains<'a> {
    /// All candidates live, every domain full; then propagated. `Err` when
    /// the component itself has no solution by propagation.
    pub fn new(comp: &'a Comp) -> Result<Self, Wipeout> {
        let full: Mask = if comp.profiles >= 64 {
            Mask::MAX
        } else {
            (1 << comp.profiles) - 1
        };
        let mut off = Vec::with_capacity(comp.nodes.len());
        let mut total = 0usize;
        let mut touch: Vec<Vec<(u32, u32, Mask)>> = vec![Vec::new(); comp.nres()];
        for (u, n) in comp.nodes.iter().enumerate() {
            off.push(total);
            for (c, cand) in n.cands.iter().enumerate() {
                for &(r, m) in &cand.res {
                    touch[r as usize].push((u as u32, (total + c) as u32, m));
                }
            }
            total += n.cands.len();
        }
        let mut d = Domains {
            comp,
            off,
            alive: vec![true; total],
            nlive: comp.nodes.iter().map(|n| n.cands.len() as u32).collect(),
            dom: vec![full; comp.nres()],
            touch,
            trail: Vec::new(),
            queue: Vec::new(),
            queued_res: vec![false; comp.nres()],
            queued_node: vec![false; comp.nodes.len()],
            cover: Vec::new(),
            sure_of: vec![Vec::new(); comp.nodes.len()],
            sure_count: vec![0; comp.nres()],
            lower_bound: vec![0; comp.profiles],
        };
        for u in 0..comp.nodes.len() {
            if d.nlive[u] == 0 {
                return Err(Wipeout { node: u });
            }
            d.push(Work::Node(u as u32));
        }
        // Candidates with an empty accepted set for some resource.
        for r in 0..comp.nres() {
            d.push(Work::Res(r as u32));
        }
        d.propagate()?;
        d.trail.clear();
        Ok(d)
    }

    /// Whether candidate `c` of node `u` is live.
    pub fn is_live(&self, u: usize, c: usize) -> bool {
        self.alive[self.off[u] + c]
    }

    /// Number of live candidates of node `u`.
    pub fn live_count(&self, u: usize) -> usize {
        self.nlive[u] as usize
    }

    /// The live candidates of node `u`, ascending.
    pub fn live(&self, u: usize) -> impl Iterator<Item = usize> + '_ {
        let o = self.off[u];
        (0..self.comp.nodes[u].cands.len()).filter(move |&c| self.alive[o + c])
    }

    /// The current trail position.
    pub fn checkpoint(&self) -> usize {
        self.trail.len()
    }

    /// Undoes every change after `checkpoint`.
    pub fn rollback(&mut self, checkpoint: usize) {
        while self.trail.len() > checkpoint {
            match self.trail.pop() {
                Some(Change::Cand(i)) => {
                    self.alive[i] = true;
                    let u = self.node_of(i);
                    self.nlive[u] += 1;
                }
                Some(Change::Dom(r, old)) => {
                    let cur = self.dom[r as usize];
                    self.move_bound(r, cur, old);
                    self.dom[r as usize] = old;
                }
                Some(Change::Sure(u, r)) => {
                    self.sure_of[u as usize].pop();
                    self.sure_count[r as usize] -= 1;
                    if self.sure_count[r as usize] == 0 {
                        let m = self.dom[r as usize];
                        self.count_bound(m, false);
                    }
                }
                None => break,
            }
        }
    }

    /// A lower bound on the penalty of every solution consistent with the
    /// state: per rank, the surely used resources whose domain's best rank
    /// is that rank. Every such resource ends at that rank or worse and
    /// other resources only add, so each solution's rank counts are at
    /// least as bad, compared from the worst rank down.
    pub fn penalty_lower_bound(&self) -> &[u64] {
        &self.lower_bound
    }

    fn count_bound(&mut self, m: Mask, add: bool) {
        if m == 0 {
            return;
        }
        let k = best_rank(m);
        if add {
            self.lower_bound[k] += 1;
        } else {
            self.lower_bound[k] -= 1;
        }
    }

    fn move_bound(&mut self, r: u32, from: Mask, to: Mask) {
        if self.sure_count[r as usize] > 0 {
            self.count_bound(from, false);
            self.count_bound(to, true);
        }
    }

    /// Chooses candidate `c` at node `u` (kills every other) and propagates.
    /// On a wipe-out the state is left inconsistent: roll back.
    pub fn fix(&mut self, u: usize, c: usize) -> Result<(), Wipeout> {
        if !self.is_live(u, c) {
            return Err(Wipeout { node: u });
        }
        for d in 0..self.comp.nodes[u].cands.len() {
            if d != c && self.is_live(u, d) {
                self.kill(self.off[u] + d)?;
            }
        }
        self.propagate()
    }

    /// Forbids candidate `c` at node `u` and propagates. On a wipe-out the
    /// state is left inconsistent: roll back.
    pub fn forbid(&mut self, u: usize, c: usize) -> Result<(), Wipeout> {
        if self.is_live(u, c) {
            self.kill(self.off[u] + c)?;
        }
        self.propagate()
    }

    /// A solution consistent with the current state, built in node order:
    /// at every undecided node the first candidate of `order(u)` that
    /// survives propagation is fixed, without backtracking. `None` when some
    /// node has no surviving candidate (which proves nothing). The state is
    /// restored before returning.
    pub fn complete(
        &mut self,
        mut order: impl FnMut(usize, &mut Vec<usize>),
    ) -> Option<Vec<usize>> {
        let start = self.checkpoint();
        let mut choice = vec![usize::MAX; self.comp.nodes.len()];
        let mut tries: Vec<usize> = Vec::new();
        let mut ok = true;
        'nodes: for u in 0..self.comp.nodes.len() {
            if self.nlive[u] == 1 {
                continue;
            }
            tries.clear();
            order(u, &mut tries);
            for &c in &tries {
                if !self.is_live(u, c) {
                    continue;
                }
                let cp = self.checkpoint();
                if self.fix(u, c).is_ok() {
                    continue 'nodes;
                }
                self.rollback(cp);
            }
            // Whatever is still live, in candidate order.
            let live: Vec<usize> = self.live(u).collect();
            for c in live {
                let cp = self.checkpoint();
                if self.fix(u, c).is_ok() {
                    continue 'nodes;
                }
                self.rollback(cp);
            }
            ok = false;
            break;
        }
        if ok {
            for (u, slot) in choice.iter_mut().enumerate() {
                *slot = self.live(u).next().unwrap_or(usize::MAX);
            }
        }
        self.rollback(start);
        ok.then_some(choice)
    }

    fn node_of(&self, flat: usize) -> usize {
        // `off` is ascending: the last node whose offset is <= flat.
        self.off.partition_point(|&o| o <= flat) - 1
    }

    fn push(&mut self, w: Work) {
        match w {
            Work::Res(r) => {
                if !self.queued_res[r as usize] {
                    self.queued_res[r as usize] = true;
                    self.queue.push(w);
                }
            }
            Work::Node(u) => {
                if !self.queued_node[u as usize] {
                    self.queued_node[u as usize] = true;
                    self.queue.push(w);
                }
            }
        }
    }

    fn kill(&mut self, flat: usize) -> Result<(), Wipeout> {
        debug_assert!(self.alive[flat]);
        self.alive[flat] = false;
        self.trail.push(Change::Cand(flat));
        let u = self.node_of(flat);
        self.nlive[u] -= 1;
        if self.nlive[u] == 0 {
            self.clear_queue();
            return Err(Wipeout { node: u });
        }
        self.push(Work::Node(u as u32));
        Ok(())
    }

    fn clear_queue(&mut self) {
        for w in self.queue.drain(..) {
            match w {
                Work::Res(r) => self.queued_res[r as usize] = false,
                Work::Node(u) => self.queued_node[u as usize] = false,
            }
        }
    }

    fn propagate(&mut self) -> Result<(), Wipeout> {
        while let Some(w) = self.queue.pop() {
            match w {
                Work::Res(r) => {
                    self.queued_res[r as usize] = false;
                    let d = self.dom[r as usize];
                    for k in 0..self.touch[r as usize].len() {
                        let (_, flat, m) = self.touch[r as usize][k];
                        if self.alive[flat as usize] && m & d == 0 {
                            self.kill(flat as usize)?;
                        }
                    }
                }
                Work::Node(u) => {
                    self.queued_node[u as usize] = false;
                    self.sure_touch(u as usize)?;
                }
            }
        }
        Ok(())
    }

    /// R2 at node `u`.
    fn sure_touch(&mut self, u: usize) -> Result<(), Wipeout> {
        let mut cover = std::mem::take(&mut self.cover);
        cover.clear();
        let o = self.off[u];
        for (c, cand) in self.comp.nodes[u].cands.iter().enumerate() {
            if !self.alive[o + c] {
                continue;
            }
            for &(r, m) in &cand.res {
                match cover.iter_mut().find(|e| e.0 == r) {
                    Some(e) => {
                        e.1 |= m;
                        e.2 += 1;
                    }
                    None => cover.push((r, m, 1)),
                }
            }
        }
        let mut result = Ok(());
        for &(r, m, cnt) in &cover {
            if cnt != self.nlive[u] {
                continue;
            }
            if !self.sure_of[u].contains(&r) {
                self.sure_of[u].push(r);
                self.trail.push(Change::Sure(u as u32, r));
                if self.sure_count[r as usize] == 0 {
                    let m = self.dom[r as usize];
                    self.count_bound(m, true);
                }
                self.sure_count[r as usize] += 1;
            }
            let old = self.dom[r as usize];
            let new = old & m;
            if new == old {
                continue;
            }
            self.trail.push(Change::Dom(r, old));
            self.move_bound(r, old, new);
            self.dom[r as usize] = new;
            if new == 0 {
                self.clear_queue();
                result = Err(Wipeout { node: u });
                break;
            }
            self.push(Work::Res(r));
        }
        self.cover = cover;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::reduce::components::{CCand, CNode};

    fn cand(orig: u16, preferred: bool, res: &[(u32, Mask)]) -> CCand {
        CCand {
            orig,
            preferred,
            res: res.to_vec(),
            time: 0,
        }
    }

    /// Two nodes sharing resource 0; node 0 has {a: p0, b: p1}, node 1 has
    /// {c: p1}.
    fn pair() -> Comp {
        Comp {
            nodes: vec![
                CNode {
                    global: 0,
                    cands: vec![cand(0, true, &[(0, 0b01)]), cand(1, false, &[(0, 0b10)])],
                },
                CNode {
                    global: 1,
                    cands: vec![cand(0, false, &[(0, 0b10)])],
                },
            ],
            res_global: vec![0],
            profiles: 2,
            res_time: Default::default(),
        }
    }

    #[test]
    fn initial_propagation_kills_unsupported_candidates() {
        let comp = pair();
        let d = Domains::new(&comp).expect("feasible");
        // Node 1 surely touches r0 with {p1}: candidate a (p0 only) dies.
        assert!(!d.is_live(0, 0));
        assert!(d.is_live(0, 1));
    }

    #[test]
    fn fix_wipes_out_and_rollback_restores() {
        let mut comp = pair();
        comp.nodes[1].cands.push(cand(1, false, &[(0, 0b01)]));
        let mut d = Domains::new(&comp).expect("feasible");
        assert!(d.is_live(0, 0));
        let cp = d.checkpoint();
        d.fix(1, 0).expect("consistent");
        assert!(!d.is_live(0, 0));
        assert_eq!(d.fix(0, 0), Err(Wipeout { node: 0 }));
        d.rollback(cp);
        assert!(d.is_live(0, 0) && d.is_live(1, 1));
        assert_eq!(d.live_count(1), 2);
    }

    #[test]
    fn completion_is_a_solution_in_the_requested_order() {
        let mut comp = pair();
        comp.nodes[1].cands.push(cand(1, false, &[(0, 0b01)]));
        let mut d = Domains::new(&comp).expect("feasible");
        let choice = d
            .complete(|u, v| v.extend(if u == 0 { vec![0] } else { vec![] }))
            .expect("a witness");
        assert_eq!(choice, vec![0, 1]);
        assert!(comp.evaluate_local(&choice).is_some());
        // The state is restored.
        assert_eq!(d.live_count(0), 2);
    }
}
