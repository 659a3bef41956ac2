//! Exact solving of one reduced part: the strategy choosing a method (`strategy`), the integer
//! program and its backends (`ilp`, `backend`), the frontier search (`frontier`), variable
//! elimination (`elimination`), the exact preference level (`preference`, `propagation`,
//! `preference_groups`), the provider-id level (`probing`, `provider_ids`) and the counters of
//! what ran (`part_method`).

pub(crate) mod backend;
pub(in crate::selection) mod elimination;
pub(crate) mod frontier;
pub(crate) mod ilp;
pub(in crate::selection) mod part_method;
pub(in crate::selection) mod preference;
pub(in crate::selection) mod preference_groups;
pub(in crate::selection) mod probing;
pub(in crate::selection) mod propagation;
pub(in crate::selection) mod provider_ids;
pub(in crate::selection) mod strategy;
