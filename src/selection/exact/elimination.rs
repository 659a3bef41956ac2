//! The levels of a part, the provider ids included, by variable
//! elimination over a tree decomposition (bucket elimination).
//!
//! **What it computes.** Given a part and a list of levels, a choice of one
//! candidate per node that is feasible (every used resource has a common
//! profile) and optimal for the levels, or the fact that no choice is
//! feasible.
//!
//! **Why it is exact.** Every level is a sum of local terms, compared
//! as integers or as a vector of integers:
//!
//! * the preferred count and the `weighted` reward are sums over nodes of a
//!   term of the node's chosen candidate;
//! * a rank count and the `weighted` rank cost are sums over resources of a
//!   term of the intersection of the chosen candidates' accepted masks for
//!   that resource, which depends only on the choices of the nodes that
//!   can touch it (infeasible when it is empty);
//! * the preferred flags in node order, compared lexicographically (a met
//!   preference at the first position where two solutions differ wins),
//!   are the integer whose bit for node `i` (most significant first) is set
//!   when `i`'s chosen candidate is not preferred, smaller winning; it is
//!   the sum over nodes of one bit each, and bits of different nodes never
//!   carry into each other. Only the nodes whose candidates differ in
//!   preference get a bit (in node order): the others never decide a
//!   comparison, and a part with most nodes fixed keeps few words;
//! * the provider ids in node order, compared lexicographically, are the
//!   same construction with a field of several bits per node: a node's
//!   candidates are sorted by provider id and no two share one, so the
//!   provider sequence of a choice compares as the sequence of its
//!   candidate indices, which is the mixed-radix integer whose field for
//!   node `i` (most significant first, `⌈log2 k_i⌉` bits for `k_i`
//!   candidates) holds `i`'s index. Fields are disjoint, so the integer is
//!   the sum of one term per node with no carry between them; nodes with a
//!   single candidate get no field. This is the exact form of "blocks of
//!   nodes with mixed-radix weights": every word holds 62 bits, far from
//!   overflow, and words compare in order.
//!
//! So the objective is `F(x) = Σ_f f(x|scope(f))`, one vector of integers
//! per level (the bits of the last two points split into 62-bit words, most
//! significant first), compared lexicographically level by level. Vector
//! addition preserves that order (`a ≤ b` implies `a + c ≤ b + c`), which is
//! all bucket elimination needs: eliminating a node `v` replaces the terms
//! whose scope holds `v` by `m(y) = min_v Σ f(y, v)` over the union `y` of
//! their other scope variables, and `min_x F(x)` is unchanged because no
//! other term depends on `v` and, by the order's compatibility with
//! addition, the minimum of a sum with a term constant in `v` is that term
//! plus the minimum. After every node is eliminated the remaining constant
//! is the optimum, and the minimising `v` recorded for each `y`, read in the
//! reverse order of elimination, gives a choice that attains it.
//! Infeasible combinations carry an infinite cost that absorbs every sum.
//!
//! **Cost.** Eliminating `v` visits every combination of `v` and its
//! neighbours (nodes sharing a term with it, including the terms made by
//! earlier eliminations): the product of their candidate counts. The order
//! is greedy (smallest such product, then fewest fill edges, then node
//! order), and the total over the order is computed before any table is
//! built: a part whose total exceeds the budget is left to the other
//! methods. On long-range sharing the parts left after prefix dominance
//! have two candidates per node and a tree width far below their size, so
//! this is where the integer program used to spend seconds on tens of
//! nodes.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::Instant;

use crate::selection::model::objective::{Level, Weights};
use crate::selection::reduce::components::{Comp, ResourceState};

mod layout;
mod order;
use layout::Layout;
use order::{elimination_order, Stop};

/// Combinations one elimination may visit by default (its tables hold at
/// most this many cells of a few words each).
pub(crate) const ELIMINATION_BUDGET: u64 = 1 << 24;

/// One elimination step may visit at most this fraction of the budget
/// (bounds the largest table held at once).
const BUCKET_SHARE: u64 = 4;

/// The cost of an infeasible combination (in the first word only).
const INF: i64 = i64::MAX;

/// Bits of the node-order preference level per word (keeps sums exact).
const LEX_BITS: usize = 62;

/// The outcome of an elimination within its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Eliminated {
    /// An optimal choice, one local candidate index per node.
    Optimal(Vec<usize>),
    /// No choice is feasible.
    Infeasible,
}

/// A term of the objective: a table over the choices of its scope's nodes
/// (mixed radix, the last scope node varying fastest), `width` words a cell.
struct Term {
    scope: Vec<usize>,
    table: Vec<i64>,
}

impl Term {
    /// The same term without the scope nodes its table does not depend on
    /// (a resource whose rank no level counts, a node whose candidates are
    /// alike on every level): such a node is no neighbour through this term,
    /// which keeps the elimination order narrow when few levels are asked.
    fn minimized(self, domain: &[usize], w: usize) -> Term {
        let (scope, table) = minimized(self.scope, self.table, domain, w);
        Term { scope, table }
    }
}

/// `table` over `scope` (mixed radix, last node fastest, `w` entries a
/// cell) without the scope nodes it does not depend on.
fn minimized<T: PartialEq + Clone>(
    mut scope: Vec<usize>,
    mut table: Vec<T>,
    domain: &[usize],
    w: usize,
) -> (Vec<usize>, Vec<T>) {
    let mut j = 0;
    while j < scope.len() {
        let d = domain[scope[j]];
        let inner = w * scope[j + 1..].iter().map(|&i| domain[i]).product::<usize>();
        let outer: usize = scope[..j].iter().map(|&i| domain[i]).product();
        let block = |o: usize, x: usize| &table[(o * d + x) * inner..][..inner];
        let independent = (0..outer).all(|o| (1..d).all(|x| block(o, x) == block(o, 0)));
        if independent {
            table = (0..outer).flat_map(|o| block(o, 0).to_vec()).collect();
            scope.remove(j);
        } else {
            j += 1;
        }
    }
    (scope, table)
}

/// A resource's term before the elimination order is known: each cell an
/// index into a palette of distinct cost vectors (unused, each rank, and
/// infeasible give at most a few), so that a large scope costs a byte a
/// cell until the order shows the elimination fits.
struct CompactTerm {
    scope: Vec<usize>,
    table: Vec<u8>,
    palette: Vec<Vec<i64>>,
}

impl CompactTerm {
    /// The term of resource `r` of `comp`, with only the nodes it depends
    /// on; `None` when even the touchers that can change it make a table
    /// larger than one step may visit (eliminating any node of its scope
    /// visits every cell).
    fn of_resource(
        comp: &Comp,
        r: usize,
        scope: Vec<usize>,
        domain: &[usize],
        layout: &Layout,
        step_budget: u64,
    ) -> Option<CompactTerm> {
        // Touchers whose candidates all use `r` alike only fold into the
        // starting intersection.
        let r32 = r as u32;
        let (scope, base_used, base_mask) = comp.deciding_touchers(r32, &scope);
        let cells = scope
            .iter()
            .try_fold(1u64, |p, &i| p.checked_mul(domain[i] as u64))
            .filter(|&c| c <= step_budget)? as usize;
        // Palette: 0 unused, 1 infeasible, 2 + k rank k; entries with equal
        // costs (a rank no level counts) share one index.
        let w = layout.width;
        let mut costs: Vec<Vec<i64>> = vec![vec![0; w], {
            let mut v = vec![0; w];
            v[0] = INF;
            v
        }];
        for k in 0..comp.profiles {
            let mut v = vec![0; w];
            layout.rank_term(k, comp.res_cost(r32, k), &mut v);
            costs.push(v);
        }
        let mut palette: Vec<Vec<i64>> = Vec::new();
        let index: Vec<u8> = costs
            .into_iter()
            .map(|c| match palette.iter().position(|p| *p == c) {
                Some(at) => at as u8,
                None => {
                    palette.push(c);
                    (palette.len() - 1) as u8
                }
            })
            .collect();
        let mut table = Vec::with_capacity(cells);
        comp.for_each_resource_state(r32, &scope, (base_used, base_mask), domain, |state| {
            table.push(
                index[match state {
                    ResourceState::Unused => 0,
                    ResourceState::Infeasible => 1,
                    ResourceState::Rank(k) => 2 + k,
                }],
            )
        });
        let (scope, table) = minimized(scope, table, domain, 1);
        Some(CompactTerm {
            scope,
            table,
            palette,
        })
    }

    /// Whether every cell costs nothing (the term can be dropped).
    fn is_zero(&self) -> bool {
        self.table
            .iter()
            .all(|&c| self.palette[c as usize].iter().all(|&x| x == 0))
    }

    /// The term with a cost vector in every cell.
    fn expanded(&self) -> Term {
        Term {
            scope: self.scope.clone(),
            table: self
                .table
                .iter()
                .flat_map(|&c| self.palette[c as usize].iter().copied())
                .collect(),
        }
    }
}

/// One step of a forward pass: the elimination of one node.
pub(crate) struct Step {
    /// The node eliminated.
    pub node: usize,
    /// The scope of its message (ascending node indices).
    pub scope: Vec<usize>,
    /// For every cell of the scope (mixed radix, last node fastest), the
    /// set of the node's candidates that minimise its bucket there, as a
    /// bit mask; 0 where every candidate is infeasible.
    pub best: Vec<u64>,
    /// The steps whose messages this step's bucket received.
    pub children: Vec<usize>,
}

/// The record of a forward pass of bucket elimination: enough to read one
/// optimal choice ([`Forward::choice`]) or every candidate that some
/// optimum uses (`optimal_supports.rs`).
pub(crate) struct Forward {
    /// Candidates per node.
    pub domain: Vec<usize>,
    /// The steps, in elimination order.
    pub steps: Vec<Step>,
    /// The optimum's cost vector (first word `INF`: infeasible).
    constant: Vec<i64>,
}

impl Forward {
    /// Whether no choice is feasible.
    pub fn infeasible(&self) -> bool {
        self.constant[0] == INF
    }

    /// The optimal choice with the first minimising candidate at every
    /// step, read in the reverse order of elimination (meaningless when
    /// [`Forward::infeasible`]).
    pub fn choice(&self) -> Vec<usize> {
        let mut choice = vec![0usize; self.domain.len()];
        for step in self.steps.iter().rev() {
            let mut cell = 0usize;
            for &i in &step.scope {
                cell = cell * self.domain[i] + choice[i];
            }
            let best = step.best[cell];
            choice[step.node] = if best == 0 {
                0
            } else {
                best.trailing_zeros() as usize
            };
        }
        choice
    }
}

/// Term graphs whose elimination order went over the budget, by a hash of
/// their candidate counts and scopes: the same graph is refused at once
/// the next time (a part's levels, its leading runs and its probes' regions
/// often come down to the same graph). A hash collision can only refuse a
/// graph that would have fitted, which leaves the part to the other exact
/// methods.
#[derive(Default)]
pub(crate) struct RefusedGraphs(Mutex<BTreeSet<u64>>);

/// How far one elimination may go.
#[derive(Clone, Copy)]
pub(crate) struct Reach<'a> {
    /// Combinations it may visit.
    pub budget: u64,
    /// When it stops, handing the part over.
    pub deadline: Option<Instant>,
    /// Graphs already found over the budget.
    pub refused: Option<&'a RefusedGraphs>,
}

impl Reach<'_> {
    /// A budget without deadline or memory of refused graphs.
    #[cfg(test)]
    pub(crate) fn budget(budget: u64) -> Reach<'static> {
        Reach {
            budget,
            deadline: None,
            refused: None,
        }
    }
}

/// Solves `comp` to `levels` by bucket elimination when the elimination
/// fits `reach`; `None` otherwise, or when its deadline passes (nothing
/// was decided). With the provider ids among the levels the optimum is
/// unique, and this is it.
pub(crate) fn eliminate(
    comp: &Comp,
    levels: &[Level],
    weights: Option<&Weights>,
    reach: &Reach,
) -> Option<Eliminated> {
    let fw = forward(comp, levels, weights, reach)?;
    Some(if fw.infeasible() {
        Eliminated::Infeasible
    } else {
        Eliminated::Optimal(fw.choice())
    })
}

/// The forward pass of bucket elimination of `comp` to `levels`: `None`
/// when the weighted sums could overflow, a node has more than 64 candidates, the
/// combinations exceed the budget, or the deadline passes.
pub(crate) fn forward(
    comp: &Comp,
    levels: &[Level],
    weights: Option<&Weights>,
    reach: &Reach,
) -> Option<Forward> {
    let deadline = reach.deadline;
    let layout = Layout::new(comp, levels, weights)?;
    let n = comp.nodes.len();
    let domain: Vec<usize> = comp.nodes.iter().map(|nd| nd.cands.len()).collect();
    if domain.iter().any(|&d| d > 64) {
        return None;
    }
    let w = layout.width;
    let mut constant = vec![0i64; w];
    if domain.contains(&0) {
        constant[0] = INF;
        return Some(Forward {
            domain,
            steps: Vec::new(),
            constant,
        });
    }
    // Node terms (small), and resource terms in compact form; terms that
    // depend on no node are constants, the others, with only the nodes they
    // depend on, are what the order sees.
    let mut node_terms: Vec<Term> = Vec::new();
    for (i, node) in comp.nodes.iter().enumerate() {
        let mut table = vec![0i64; domain[i] * w];
        for (c, cand) in node.cands.iter().enumerate() {
            layout.node_term(
                i,
                c,
                (cand.preferred, cand.time),
                &mut table[c * w..(c + 1) * w],
            );
        }
        let term = Term {
            scope: vec![i],
            table,
        }
        .minimized(&domain, w);
        if term.scope.is_empty() {
            add_into(&mut constant, &term.table);
        } else if term.table.iter().any(|&x| x != 0) {
            node_terms.push(term);
        }
    }
    let mut resource_terms: Vec<CompactTerm> = Vec::new();
    for (r, scope) in comp.touchers().into_iter().enumerate() {
        if scope.is_empty() {
            continue;
        }
        let term = CompactTerm::of_resource(
            comp,
            r,
            scope,
            &domain,
            &layout,
            reach.budget / BUCKET_SHARE,
        )?;
        if term.scope.is_empty() {
            add_into(&mut constant, &term.palette[term.table[0] as usize]);
        } else if !term.is_zero() {
            resource_terms.push(term);
        }
    }
    let mut terms: Vec<Option<(Term, Option<usize>)>> = Vec::new();
    let scopes: Vec<&[usize]> = node_terms
        .iter()
        .map(|t| t.scope.as_slice())
        .chain(resource_terms.iter().map(|t| t.scope.as_slice()))
        .collect();
    let mut graph = DefaultHasher::new();
    (&domain, &scopes, reach.budget).hash(&mut graph);
    let graph = graph.finish();
    let known = |r: &RefusedGraphs| r.0.lock().is_ok_and(|set| set.contains(&graph));
    if reach.refused.is_some_and(known) {
        return None;
    }
    let order = match elimination_order(&domain, &scopes, reach.budget, deadline) {
        Ok(order) => order,
        Err(Stop::OverBudget) => {
            if let Some(Ok(mut set)) = reach.refused.map(|r| r.0.lock()) {
                set.insert(graph);
            }
            return None;
        }
        Err(Stop::Deadline) => return None,
    };

    terms.extend(node_terms.into_iter().map(|t| Some((t, None))));
    terms.extend(resource_terms.iter().map(|t| Some((t.expanded(), None))));
    drop(resource_terms);
    // Terms by node, to find each bucket without scanning every term.
    let mut by_node: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (t, term) in terms.iter().enumerate() {
        if let Some((term, _)) = term {
            for &i in &term.scope {
                by_node[i].push(t);
            }
        }
    }
    let mut steps: Vec<Step> = Vec::with_capacity(n);
    for &v in &order {
        if deadline.is_some_and(|t| Instant::now() >= t) {
            return None;
        }
        let mut bucket: Vec<Term> = Vec::new();
        let mut children = Vec::new();
        for &t in &by_node[v] {
            if let Some((term, origin)) = terms[t].take() {
                bucket.push(term);
                children.extend(origin);
            }
        }
        let scope: Vec<usize> = bucket
            .iter()
            .flat_map(|t| t.scope.iter().copied())
            .filter(|&i| i != v)
            .collect::<BTreeSet<usize>>()
            .into_iter()
            .collect();
        let (message, best) = eliminate_node(v, &scope, &bucket, &domain, w);
        if scope.is_empty() {
            add_into(&mut constant, &message);
        } else {
            let t = terms.len();
            for &i in &scope {
                by_node[i].push(t);
            }
            terms.push(Some((
                Term {
                    scope: scope.clone(),
                    table: message,
                },
                Some(steps.len()),
            )));
        }
        steps.push(Step {
            node: v,
            scope,
            best,
            children,
        });
    }
    Some(Forward {
        domain,
        steps,
        constant,
    })
}

/// `acc += x`, with `INF` absorbing.
fn add_into(acc: &mut [i64], x: &[i64]) {
    if acc[0] == INF || x[0] == INF {
        acc[0] = INF;
        return;
    }
    for (a, b) in acc.iter_mut().zip(x) {
        *a += b;
    }
}

/// The message of eliminating `v` from `bucket` over `scope`, and the set
/// of minimising candidates of `v` (a bit mask) for each of its cells.
fn eliminate_node(
    v: usize,
    scope: &[usize],
    bucket: &[Term],
    domain: &[usize],
    w: usize,
) -> (Vec<i64>, Vec<u64>) {
    let cells: usize = scope.iter().map(|&i| domain[i]).product();
    // Each term's stride for every scope node and for `v`.
    let strides: Vec<(Vec<usize>, usize)> = bucket
        .iter()
        .map(|t| {
            let mut own = vec![0usize; t.scope.len()];
            let mut s = 1usize;
            for j in (0..t.scope.len()).rev() {
                own[j] = s;
                s *= domain[t.scope[j]];
            }
            let at = |i: usize| t.scope.iter().position(|&x| x == i).map_or(0, |j| own[j]);
            (scope.iter().map(|&i| at(i)).collect(), at(v))
        })
        .collect();
    let mut message = vec![0i64; cells * w];
    let mut best = vec![0u64; cells];
    let mut base = vec![0usize; bucket.len()];
    let mut digits = vec![0usize; scope.len()];
    let mut sum = vec![0i64; w];
    let mut top = vec![0i64; w];
    for cell in 0..cells {
        top[0] = INF;
        let mut arg = 0u64;
        for x in 0..domain[v] {
            sum.iter_mut().for_each(|s| *s = 0);
            for ((t, (_, sv)), b) in bucket.iter().zip(&strides).zip(&base) {
                let at = (b + x * sv) * w;
                add_into(&mut sum, &t.table[at..at + w]);
            }
            // Lexicographic order of the words; `INF` in the first is worst.
            match sum.cmp(&top) {
                std::cmp::Ordering::Less => {
                    top.copy_from_slice(&sum);
                    arg = 1 << x;
                }
                std::cmp::Ordering::Equal => arg |= 1 << x,
                std::cmp::Ordering::Greater => {}
            }
        }
        if top[0] == INF {
            // Infeasible whatever `v`: no minimiser, and a clean cell.
            top[1..].iter_mut().for_each(|t| *t = 0);
            arg = 0;
        }
        message[cell * w..(cell + 1) * w].copy_from_slice(&top);
        best[cell] = arg;
        // Next cell: step the digits and every term's base index.
        for j in (0..digits.len()).rev() {
            digits[j] += 1;
            let d = domain[scope[j]];
            if digits[j] < d {
                for (b, (s, _)) in base.iter_mut().zip(&strides) {
                    *b += s[j];
                }
                break;
            }
            digits[j] = 0;
            for (b, (s, _)) in base.iter_mut().zip(&strides) {
                *b -= s[j] * (d - 1);
            }
        }
    }
    (message, best)
}

#[cfg(all(test, feature = "testing"))]
pub(crate) mod tests;
