//! How a part was solved: the counters of every method that took part in its exact
//! solve, which the component's certificate reports in words.

/// How a part was solved, for its certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PartMethod {
    /// Preferences met (proved by a witness) and refuted (by propagation),
    /// when the preference level was decided greedily.
    pub preferences: Option<(usize, usize)>,
    /// Sub-parts solved by the exact closure frontier.
    pub frontier_parts: usize,
    /// Sub-parts solved by the integer program.
    pub ilp_parts: usize,
    /// Sub-parts solved by variable elimination over a tree decomposition.
    pub eliminated_parts: usize,
    /// Sub-parts whose answer was reused from an identical sub-part.
    pub reused_parts: usize,
    /// Parts whose provider-id level was decided by the depth-first search.
    pub searched_parts: usize,
    /// Integer programs solved.
    pub solves: usize,
    /// Leading count levels settled at their best possible value by a
    /// re-checked witness (summed over the parts where that happened).
    pub settled_levels: usize,
    /// Candidates set aside while the levels before the provider ids were
    /// solved (prefix dominance; they are back for the provider ids).
    pub prefix_dominated: usize,
    /// Exact solves of the earlier levels with one more node decided, when
    /// the provider ids were decided by probing.
    pub probes: usize,
    /// Candidates set aside as in no optimum of a leading run of levels
    /// (optimal supports by variable elimination).
    pub unsupported: usize,
    /// Candidates set aside by the reduced costs of the first level's dual
    /// bound against an incumbent.
    pub cost_fixed: usize,
    /// Candidates set aside as in no choice that reaches the first level's
    /// dual bound, in parts whose restricted optimum reached it.
    pub bound_fixed: usize,
}

impl PartMethod {
    /// The component's method label: `ilp` when an integer program ran,
    /// `presolve+dp` when the frontier solved every sub-part left, else
    /// `presolve`.
    pub fn label(&self) -> &'static str {
        if self.solves > 0 || self.ilp_parts > 0 {
            "ilp"
        } else if self.frontier_parts > 0 || self.eliminated_parts > 0 {
            "presolve+dp"
        } else {
            "presolve"
        }
    }

    /// The certificate of an uninterrupted solve, in words.
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        if self.settled_levels > 0 {
            out.push(format!(
                "{} count levels settled at their best possible value by re-checked witnesses",
                self.settled_levels
            ));
        }
        if self.prefix_dominated > 0 {
            out.push(format!(
                "levels before the provider ids solved without {} prefix-dominated candidates",
                self.prefix_dominated
            ));
        }
        if self.unsupported > 0 {
            out.push(format!(
                "{} candidates set aside as in no optimum of the leading levels (optimal supports by exact variable elimination)",
                self.unsupported
            ));
        }
        if self.cost_fixed > 0 {
            out.push(format!(
                "{} candidates set aside as in no optimum of the first level (reduced costs of its local-polytope dual bound against an incumbent)",
                self.cost_fixed
            ));
        }
        if self.bound_fixed > 0 {
            out.push(format!(
                "{} candidates set aside as in no choice reaching the first level's local-polytope dual bound, which the optimum of the part left reaches",
                self.bound_fixed
            ));
        }
        if let Some((met, refuted)) = self.preferences {
            out.push(format!(
                "preferred level decided exactly ({met} met by re-checked witnesses, {refuted} refuted by propagation)"
            ));
        }
        if self.frontier_parts > 0 {
            out.push(format!(
                "{} sub-parts solved by the exact closure frontier",
                self.frontier_parts
            ));
        }
        if self.eliminated_parts > 0 {
            out.push(format!(
                "{} sub-parts solved by exact variable elimination over a tree decomposition",
                self.eliminated_parts
            ));
        }
        if self.ilp_parts > 0 || self.solves > 0 {
            out.push(format!(
                "integer program: every level proved optimal ({} solves)",
                self.solves
            ));
        }
        if self.searched_parts > 0 {
            out.push(format!(
                "provider-id level of {} parts by exhaustive depth-first search at the proved penalty",
                self.searched_parts
            ));
        }
        if self.probes > 0 {
            out.push(format!(
                "provider ids decided node by node with {} exact probes of the earlier levels",
                self.probes
            ));
        }
        if self.reused_parts > 0 {
            out.push(format!(
                "{} sub-parts reused from identical ones",
                self.reused_parts
            ));
        }
        if out.is_empty() {
            out.push("presolve fixed every node".into());
        }
        out.join("; ")
    }

    /// Adds `other`'s counters.
    pub fn add(&mut self, other: &PartMethod) {
        if let Some((m, r)) = other.preferences {
            let (a, b) = self.preferences.unwrap_or((0, 0));
            self.preferences = Some((a + m, b + r));
        }
        self.frontier_parts += other.frontier_parts;
        self.ilp_parts += other.ilp_parts;
        self.eliminated_parts += other.eliminated_parts;
        self.reused_parts += other.reused_parts;
        self.searched_parts += other.searched_parts;
        self.solves += other.solves;
        self.settled_levels += other.settled_levels;
        self.prefix_dominated += other.prefix_dominated;
        self.probes += other.probes;
        self.unsupported += other.unsupported;
        self.cost_fixed += other.cost_fixed;
        self.bound_fixed += other.bound_fixed;
    }
}
