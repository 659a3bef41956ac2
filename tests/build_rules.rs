//! One test per rule of domain.md 2.2-2.7, 3.1 and 3.5: each mutates the valid fixture in one
//! place and asserts the exact `PlanError` variant.

#[path = "common/build_fixture.rs"]
mod build_fixture;

use build_fixture::*;
use jointplan::plan::build::{build_core, BuildOptions, PlanCore};
use jointplan::plan::error::PlanError;
use jointplan::request::*;

fn build(request: &PlanRequest) -> Result<PlanCore, PlanError> {
    build_core(request, &BuildOptions::default())
}

#[test]
fn fixture_builds() {
    let core = build(&request()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(core.nodes.len(), 4);
}
