//! The selection problem and what a solve returns: the problem in its exchange format and
//! indexed form (`problem`), the objectives (`objective`), the solution with its per-component
//! reports (`solution`), and progress events (`progress`).

pub(in crate::selection) mod objective;
pub(in crate::selection) mod problem;
pub(in crate::selection) mod progress;
pub(in crate::selection) mod solution;
