//! Test support shared by the integration tests.
#![allow(dead_code)]

pub mod model_fixtures;
pub mod models;
