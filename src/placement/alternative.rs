//! What an alternative placement costs (`--why-not tp=4`, `pp=2`, `offload=BYTES`): the
//! placement problem restricted to the alternative, solved exactly under the same
//! objective, and its figures against the chosen placement's; or, when the alternative
//! fits nowhere, why.

use serde::Serialize;

use super::problem::{Problem, Solution};
use super::record::PlacementPlan;
use super::solve::solve;
use super::PlacementError;

/// An alternative to the chosen placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Alternative {
    /// Tensor-parallel degree `N`.
    TensorParallel(u32),
    /// `N` pipeline stages.
    PipelineParallel(u32),
    /// Host offload allowed, up to this many bytes of host memory.
    Offload(u64),
}

impl Alternative {
    /// Parses `tp=N`, `pp=N` or `offload=BYTES`.
    pub fn parse(text: &str) -> Result<Alternative, PlacementError> {
        let bad = || {
            PlacementError::Usage(format!(
                "--why-not {text}: expected tp=N, pp=N or offload=BYTES (N at least 1)"
            ))
        };
        let (key, value) = text.split_once('=').ok_or_else(bad)?;
        let value: u64 = value.trim().parse().map_err(|_| bad())?;
        match key.trim() {
            "tp" if value > 0 => Ok(Alternative::TensorParallel(
                u32::try_from(value).map_err(|_| bad())?,
            )),
            "pp" if value > 0 => Ok(Alternative::PipelineParallel(
                u32::try_from(value).map_err(|_| bad())?,
            )),
            "offload" => Ok(Alternative::Offload(value)),
            _ => Err(bad()),
        }
    }

    /// The alternative as given.
    pub fn text(self) -> String {
        match self {
            Alternative::TensorParallel(n) => format!("tp={n}"),
            Alternative::PipelineParallel(n) => format!("pp={n}"),
            Alternative::Offload(n) => format!("offload={n}"),
        }
    }

    /// `problem` restricted to the alternative, or why it cannot be.
    fn restrict(self, problem: &Problem) -> Result<Problem, String> {
        let mut p = problem.clone();
        match self {
            Alternative::TensorParallel(n) => {
                p.options.retain(|o| o.degree == n);
                if p.options.is_empty() {
                    return Err(format!(
                        "tensor parallel {n} is not an option of this model on this set (the options: a degree must divide the heads and fit in one link domain of one device kind)"
                    ));
                }
            }
            Alternative::PipelineParallel(n) => {
                if p.pipeline_stages.is_some_and(|pinned| pinned != n) {
                    return Err(format!(
                        "the placement is pinned to {} stage(s)",
                        p.pipeline_stages.unwrap_or(1)
                    ));
                }
                p.pipeline_stages = Some(n);
            }
            Alternative::Offload(bytes) => {
                p.host_bytes = Some(bytes);
                p.layer_offload = true;
                p.kv_offload = true;
            }
        }
        Ok(p)
    }
}

/// The figures of one placement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Figures {
    /// Tensor-parallel degree.
    pub tensor_parallel: u32,
    /// Pipeline stages.
    pub pipeline_parallel: u32,
    /// Devices used.
    pub devices: u64,
    /// Bytes offloaded to the host.
    pub offloaded_bytes: u64,
    /// KV tokens that fit (`None`: unbounded).
    pub kv_tokens: Option<u64>,
    /// TPOT, nanoseconds (with a serving point).
    pub tpot_ns: Option<u64>,
    /// TTFT, nanoseconds (with a serving point).
    pub ttft_ns: Option<u64>,
}

impl Figures {
    fn of(problem: &Problem, s: &Solution) -> Figures {
        Figures {
            tensor_parallel: problem.options[s.option as usize].degree,
            pipeline_parallel: s.stages.len() as u32,
            devices: s.devices,
            offloaded_bytes: s.offloaded_bytes,
            kv_tokens: (s.kv_tokens != u64::MAX).then_some(s.kv_tokens),
            tpot_ns: s.tpot_ns,
            ttft_ns: s.ttft_ns,
        }
    }
}

/// The answer to `--why-not`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// The alternative asked about.
    pub alternative: String,
    /// The chosen placement.
    pub chosen: Figures,
    /// The best placement under the alternative (`None`: none fits).
    pub alternative_best: Option<Figures>,
    /// Why the alternative fits nowhere, when it does not.
    pub reason: Option<String>,
}

/// The alternative's best placement under `problem`'s objective against `chosen`.
pub fn compare(problem: &Problem, chosen: &Solution, alternative: Alternative) -> Comparison {
    let chosen_figures = Figures::of(problem, chosen);
    let (best, reason) = match alternative.restrict(problem) {
        Err(reason) => (None, Some(reason)),
        Ok(restricted) => match solve(&restricted) {
            Some(s) => (Some(Figures::of(&restricted, &s)), None),
            None => (
                None,
                Some(
                    "no placement under it fits every device's memory (and the host's, with offload)"
                        .to_owned(),
                ),
            ),
        },
    };
    Comparison {
        alternative: alternative.text(),
        chosen: chosen_figures,
        alternative_best: best,
        reason,
    }
}

/// What `alternative` costs against a stored placement plan: the plan must pass the
/// checker and carry its problem, whose optimum must be the plan's placement; then the
/// answer is [`compare`]'s, as at `plan` time.
pub fn compare_stored(
    plan: &PlacementPlan,
    alternative: Alternative,
) -> Result<Comparison, PlacementError> {
    let violations = super::check::check(plan);
    if let Some(v) = violations.first() {
        return Err(PlacementError::Usage(format!(
            "the placement fails its checker ({} violation(s), the first: {} at {}: {}): it cannot be asked about",
            violations.len(),
            v.rule,
            v.path,
            v.message
        )));
    }
    let solved = plan.solved.as_ref().ok_or_else(|| {
        PlacementError::Usage(
            "the placement file has no `solved` section (the problem it solves): write it again with `jointplan plan MODEL --devices SET.json -o PLACEMENT.json`".to_owned(),
        )
    })?;
    let problem = &solved.problem;
    let s = &solved.solution;
    let p = &plan.payload;
    let option = problem.options.get(s.option as usize).ok_or_else(|| {
        PlacementError::Usage(format!(
            ".solved.solution.option: {} is not an option of .solved.problem",
            s.option
        ))
    })?;
    let same_stages = s.stages.len() == p.stages.len()
        && s.stages.iter().zip(&p.stages).all(|(a, b)| {
            a.end_layer == b.end_layer
                && a.offloaded_units == b.offloaded_units
                && a.offloaded_layers == b.offloaded_layers
                && a.kv_offloaded_layers == b.kv_offloaded_layers
                && a.kv_offloaded_sequences == b.kv_offloaded_sequences
        });
    if option.degree != p.tensor_parallel
        || option.split != p.expert_split
        || !same_stages
        || s.devices != p.devices_used
    {
        return Err(PlacementError::Usage(
            ".solved.solution: it is not the placement of .payload (degree, expert split, stages or devices differ)".to_owned(),
        ));
    }
    if solve(problem).as_ref() != Some(s) {
        return Err(PlacementError::Usage(
            ".solved: the stored solution is not the optimum of the stored problem (the file was edited, or written by another version): place the model again".to_owned(),
        ));
    }
    Ok(compare(problem, s, alternative))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternatives_parse_or_name_the_flag() {
        assert_eq!(
            Alternative::parse("tp=4").unwrap(),
            Alternative::TensorParallel(4)
        );
        assert_eq!(
            Alternative::parse("pp=2").unwrap(),
            Alternative::PipelineParallel(2)
        );
        assert_eq!(
            Alternative::parse("offload=1000").unwrap(),
            Alternative::Offload(1000)
        );
        for bad in ["tp=0", "tp", "xx=1", "pp=-1"] {
            let e = Alternative::parse(bad).unwrap_err().to_string();
            assert!(e.contains("--why-not"), "{e}");
        }
    }
}
