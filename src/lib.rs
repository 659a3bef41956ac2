//! jointplan: verified execution plans for ML model graphs.
//!
//! This crate currently provides the joint provider/storage-profile
//! selection solver ([`selection`]) and the `jointplan` command line
//! ([`cli`]).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod cli;
pub mod selection;
