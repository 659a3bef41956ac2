//! Reductions before the exact solve: connected components (`components`), exact presolve
//! (`presolve`), count levels settled or merged (`settled_levels`, `count_levels`), candidates
//! ruled out of every optimum (`prefix_dominance`, `optimal_supports`, `dual_bound`).

pub(crate) mod components;
pub(in crate::selection) mod count_levels;
pub(in crate::selection) mod dual_bound;
pub(in crate::selection) mod optimal_supports;
pub(in crate::selection) mod prefix_dominance;
pub(crate) mod presolve;
pub(in crate::selection) mod settled_levels;
