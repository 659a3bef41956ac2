//! Certification: the independent re-check of every answer (`certificate`) and the
//! whole-problem oracles of tests and benchmarks (`reference`).

pub(crate) mod certificate;
pub(in crate::selection) mod reference;
