//! Test support shared by the integration tests.
#![allow(dead_code)]

pub mod model_fixtures;
pub mod model_parts;
pub mod models;
pub mod operations;
pub mod request_generator;
