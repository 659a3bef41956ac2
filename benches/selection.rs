//! Selection benchmarks: the reference frontier, the closure frontier and
//! the integer-program path (with and without the frontier check) on the
//! instance families of `jointplan::selection::instances`.
//!
//! ```sh
//! cargo bench --bench selection                 # everything
//! cargo bench --bench selection -- long-range   # one family
//! cargo bench --features highs --bench selection -- highs  # the HiGHS rows
//! cargo bench --bench selection -- objectives   # every objective, no preferences
//! ```
//!
//! The `objectives` group solves random long-range sharing (1,000 nodes,
//! four profiles, no preferred node) with every objective, `seed-lex` being
//! the peer of the others in the same run; the full objective x preferred
//! share x shape table is `examples/selection_table_objectives.rs`.
//!
//! With the `highs` feature, each family also gets `ilp-unchecked-highs` and
//! `solve-highs`: the same two integer-program rows with `--backend highs`.
//!
//! The frontiers run with a budget of 2,000,000 states; a frontier that
//! exceeds it stops early, so its time is the cost of finding out.

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use jointplan::selection::instances::Params;
use jointplan::selection::{
    frontier_solve, instances, solve, FrontierKind, Method, SeedLex, SolveOptions,
};

const FRONTIER_BUDGET: u64 = 2_000_000;

fn options(method: Method, dp_state_budget: u64) -> SolveOptions {
    SolveOptions {
        objective: Arc::new(SeedLex),
        method,
        dp_state_budget,
        timings: false,
        ..SolveOptions::default()
    }
}

fn selection(c: &mut Criterion) {
    for (family, n, problem) in instances::benchmark_families() {
        let mut g = c.benchmark_group(family);
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(2));
        if n <= 100 {
            g.bench_with_input(
                BenchmarkId::new("reference-frontier", n),
                &problem,
                |b, p| {
                    b.iter(|| frontier_solve(p, &SeedLex, FrontierKind::Reference, FRONTIER_BUDGET))
                },
            );
        }
        g.bench_with_input(BenchmarkId::new("closure-frontier", n), &problem, |b, p| {
            b.iter(|| frontier_solve(p, &SeedLex, FrontierKind::Closure, FRONTIER_BUDGET))
        });
        g.bench_with_input(BenchmarkId::new("ilp-unchecked", n), &problem, |b, p| {
            b.iter(|| solve(p, &options(Method::Ilp, 0)))
        });
        g.bench_with_input(BenchmarkId::new("solve-default", n), &problem, |b, p| {
            b.iter(|| solve(p, &SolveOptions::default()))
        });
        #[cfg(feature = "highs")]
        {
            use jointplan::selection::Backend;
            let highs = |o: SolveOptions| SolveOptions {
                backend: Backend::Highs,
                ..o
            };
            let unchecked = highs(options(Method::Ilp, 0));
            g.bench_with_input(
                BenchmarkId::new("ilp-unchecked-highs", n),
                &problem,
                |b, p| b.iter(|| solve(p, &unchecked)),
            );
            let default = highs(SolveOptions::default());
            g.bench_with_input(BenchmarkId::new("solve-highs", n), &problem, |b, p| {
                b.iter(|| solve(p, &default))
            });
        }
        g.finish();
    }
}

fn objectives(c: &mut Criterion) {
    let params = Params {
        profiles: 4,
        preferred_prob: 0.0,
        ..Params::default()
    };
    let problem = instances::long_range(1_000, 0.5, &params, 1);
    let objectives = instances::benchmark_objectives();
    let mut g = c.benchmark_group("objectives");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(5));
    for objective in objectives {
        let opts = SolveOptions {
            objective: objective.clone(),
            timings: false,
            ..SolveOptions::default()
        };
        g.bench_with_input(
            BenchmarkId::new(objective.name(), "long-range-1000-no-preferences"),
            &problem,
            |b, p| b.iter(|| solve(p, &opts)),
        );
    }
    g.finish();
}

criterion_group!(benches, selection, objectives);
criterion_main!(benches);
