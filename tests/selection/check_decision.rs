//! The whole-component frontier check is decided from the closure state bound
//! before it runs: a component within the budget is checked (`dp-agrees`), one
//! beyond it is not run and is certified by what its solve proved, and the
//! answer is the same either way.

use jointplan::selection::instances::{self, Params};
use jointplan::selection::{
    frontier_solve, solve, FrontierKind, FrontierResult, SeedLex, SolveOptions, Status,
};

fn options(budget: u64) -> SolveOptions {
    SolveOptions {
        dp_state_budget: budget,
        timings: false,
        ..SolveOptions::default()
    }
}

#[test]
fn a_component_beyond_the_bound_is_not_checked_and_is_certified_by_its_solve() {
    let p = instances::long_range(
        30,
        0.5,
        &Params {
            profiles: 4,
            ..Params::default()
        },
        3,
    );
    let s = solve(&p, &options(100)).unwrap();
    assert_eq!(s.status, Status::Optimal);
    let big = s
        .components
        .iter()
        .find(|c| c.nodes > 10)
        .expect("a long-range instance has a large component");
    assert!(
        big.check
            .starts_with("dp-skipped: not run: the closure state bound "),
        "{}",
        big.check
    );
    assert!(big.check.contains("exceeds the budget of 100 states"));
    assert!(big.check.contains("; certificate: "), "{}", big.check);
    // The answer is the exact optimum: the closure frontier with a large
    // budget (run directly, outside the solve) agrees.
    let exact = frontier_solve(&p, &SeedLex, FrontierKind::Closure, 5_000_000).unwrap();
    match exact {
        FrontierResult::Optimal(choices) => assert_eq!(choices, s.choices),
        other => panic!("the frontier should solve it: {other:?}"),
    }
}

#[test]
fn a_component_within_the_bound_is_checked_to_the_end() {
    let p = instances::chain(40, &Params::default(), 5);
    let s = solve(&p, &options(250_000)).unwrap();
    assert_eq!(s.status, Status::Optimal);
    for c in &s.components {
        assert_eq!(c.check, "dp-agrees", "{c:?}");
    }
}
