//! Serving engines' own memory accounting: what vLLM, SGLang, TensorRT-LLM and llama.cpp
//! would log at startup for a model on a device (issue 37, item 4).
//!
//! The engines do not plan memory the way jointplan does: each takes a budget by its own
//! rule (vLLM a share of the total the driver reports, SGLang a static fraction, TensorRT-LLM
//! a fraction of what is left after the weights, llama.cpp the context it is told) and fills
//! what is left with KV cache. This module reproduces those rules from plain numbers
//! ([`ModelFacts`], [`DeviceFacts`]) so it stays a leaf: the wiring that reads the numbers
//! out of a synthesized request lives in `study::engine_facts`.
//!
//! * [`Engine`]: the four engines, spelled `vllm|sglang|trtllm|llama.cpp` (optionally
//!   `@VERSION`, e.g. `vllm@0.6`, to pick a modelled version; vLLM's default is 0.19);
//! * [`EngineArgs`]: the engine's arguments as the engine spells them (`KEY=VALUE`), checked
//!   against the keys the engine has, with the engine's defaults where absent;
//! * [`account`]: the accounting, an [`EngineReport`] with the budget's terms, the lines the
//!   engine would log (each with the rule it follows) and the flags that reproduce it.
//!
//! Every constant names its source (engine file and version) in `docs/engines.md`.

mod args;
mod facts;
mod llama_cpp;
mod report;
mod sglang;
mod trtllm;
mod vllm;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use args::{ArgKind, EngineArgs, KnownArg};
pub use facts::{CacheLayer, DeviceFacts, DraftFacts, ModelFacts, MoeFacts, Mxfp4Experts};
pub use report::{BudgetTerm, EngineReport, LogLine};
/// vLLM's profile-run rules per version (the activation peak, the non-torch memory and
/// their constants), for the validation that fits and tests them.
pub use vllm::activation as vllm_activation;
/// vLLM's EAGLE-3 heads: their shapes, weights per rank and the targets that feed them
/// (docs/engines.md, "Speculative decoding").
pub use vllm::eagle3 as vllm_eagle3;
/// vLLM v0.19.0's allocation of MXFP4 experts per GPU generation (docs/engines.md).
pub use vllm::mxfp4 as vllm_mxfp4;

/// Bytes in a GiB (engines print GiB, some label it "GB").
pub const GIB: u64 = 1 << 30;
/// Bytes in a MiB (llama.cpp prints MiB).
pub const MIB: u64 = 1 << 20;

/// A serving engine whose memory accounting jointplan reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Engine {
    /// vLLM (`vllm serve`).
    #[serde(rename = "vllm")]
    Vllm,
    /// SGLang (`python -m sglang.launch_server`).
    #[serde(rename = "sglang")]
    Sglang,
    /// TensorRT-LLM (the C++ runtime's paged KV cache manager).
    #[serde(rename = "trtllm")]
    Trtllm,
    /// llama.cpp (`llama-server`).
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
}

impl Engine {
    /// Every engine, in the order of the command line's help.
    pub const ALL: [Engine; 4] = [Self::Vllm, Self::Sglang, Self::Trtllm, Self::LlamaCpp];

    /// The command-line spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Vllm => "vllm",
            Self::Sglang => "sglang",
            Self::Trtllm => "trtllm",
            Self::LlamaCpp => "llama.cpp",
        }
    }

    /// The versions whose rules are modelled, the default first.
    pub fn versions(self) -> &'static [&'static str] {
        match self {
            Self::Vllm => &vllm::VERSIONS,
            Self::Sglang => &[sglang::VERSION],
            Self::Trtllm => &[trtllm::VERSION],
            Self::LlamaCpp => &[llama_cpp::VERSION],
        }
    }

    /// The argument (as the engine spells it) that sets its tensor-parallel degree, for the
    /// engines whose accounting divides the model over tensor-parallel ranks; llama.cpp
    /// splits layers over GPUs instead, which is not modelled (`None`).
    pub fn tensor_parallel_key(self) -> Option<&'static str> {
        match self {
            Self::Vllm => Some("tensor_parallel_size"),
            Self::Sglang | Self::Trtllm => Some("tp_size"),
            Self::LlamaCpp => None,
        }
    }

    /// The argument (as the engine spells it) that sets its pipeline-parallel degree, for
    /// the engines whose accounting splits the layers into stages (vLLM 0.19 and 0.10).
    pub fn pipeline_parallel_key(self) -> Option<&'static str> {
        match self {
            Self::Vllm => Some("pipeline_parallel_size"),
            Self::Sglang | Self::Trtllm | Self::LlamaCpp => None,
        }
    }

    /// The arguments the engine has (as it spells them) that change its memory.
    pub fn known_args(self) -> &'static [KnownArg] {
        match self {
            Self::Vllm => vllm::ARGS,
            Self::Sglang => sglang::ARGS,
            Self::Trtllm => trtllm::ARGS,
            Self::LlamaCpp => llama_cpp::ARGS,
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Engine {
    type Err = EngineError;
    fn from_str(text: &str) -> Result<Self, EngineError> {
        Self::ALL
            .into_iter()
            .find(|e| e.name() == text)
            .ok_or_else(|| EngineError::UnknownEngine {
                given: text.to_owned(),
            })
    }
}

/// An engine and the version of its rules (`vllm`, `vllm@0.6`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineChoice {
    /// The engine.
    pub engine: Engine,
    /// The modelled version (one of [`Engine::versions`]).
    pub version: String,
}

impl FromStr for EngineChoice {
    type Err = EngineError;
    fn from_str(text: &str) -> Result<Self, EngineError> {
        let (name, version) = match text.split_once('@') {
            Some((name, version)) => (name, Some(version)),
            None => (text, None),
        };
        let engine: Engine = name.parse()?;
        let versions = engine.versions();
        let version = match version {
            None => versions[0],
            Some(v) => versions
                .iter()
                .copied()
                .find(|known| *known == v)
                .ok_or_else(|| EngineError::UnknownVersion {
                    engine,
                    given: v.to_owned(),
                    known: versions.join(", "),
                })?,
        };
        Ok(Self {
            engine,
            version: version.to_owned(),
        })
    }
}

/// Why an engine's accounting could not be made, or why the engine would refuse to start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// `--engine` names no engine.
    #[error("--engine {given:?}: unknown engine; the engines are vllm, sglang, trtllm, llama.cpp (optionally NAME@VERSION)")]
    UnknownEngine {
        /// What was given.
        given: String,
    },
    /// `--engine NAME@VERSION` names a version whose rules are not modelled.
    #[error("--engine {engine}@{given}: version not modelled; modelled versions: {known}")]
    UnknownVersion {
        /// The engine.
        engine: Engine,
        /// The version given.
        given: String,
        /// The modelled versions.
        known: String,
    },
    /// `--engine-arg` is not `KEY=VALUE`.
    #[error("--engine-arg {given:?}: expected KEY=VALUE as the engine spells it, e.g. gpu_memory_utilization=0.95")]
    Malformed {
        /// What was given.
        given: String,
    },
    /// `--engine-arg KEY=...` names a key the engine does not have (or whose memory effect is
    /// not modelled).
    #[error(
        "--engine-arg {key}: {engine} has no argument {key:?} that changes memory; known: {known}"
    )]
    UnknownArg {
        /// The engine.
        engine: Engine,
        /// The key.
        key: String,
        /// The known keys.
        known: String,
    },
    /// A value the key does not accept.
    #[error("--engine-arg {key}={value}: {expected}")]
    BadValue {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What the key accepts.
        expected: String,
    },
    /// The same key given twice.
    #[error("--engine-arg {key}: given twice")]
    Duplicate {
        /// The key.
        key: String,
    },
    /// The model has a feature whose accounting under this engine is not modelled.
    #[error("{engine}: {feature} is not modelled under this engine's accounting")]
    Unsupported {
        /// The engine.
        engine: Engine,
        /// The feature.
        feature: String,
    },
    /// The engine would refuse to start; `message` says why in its terms and what to change.
    #[error("{engine} would refuse to start: {message}")]
    Refused {
        /// The engine.
        engine: Engine,
        /// Why, with the figures and the lever.
        message: String,
    },
    /// The model's facts cannot be accounted (a bug of the caller's wiring, or a degenerate
    /// configuration).
    #[error("model facts: {what}")]
    Facts {
        /// What is wrong.
        what: String,
    },
    /// A byte count overflowed.
    #[error("{what} overflows u64")]
    Overflow {
        /// What overflowed.
        what: String,
    },
}

/// The accounting of `choice` for `model` on `device` under `args`.
pub fn account(
    choice: &EngineChoice,
    model: &ModelFacts,
    device: &DeviceFacts,
    args: &EngineArgs,
) -> Result<EngineReport, EngineError> {
    args.check(choice.engine)?;
    model.check()?;
    match choice.engine {
        Engine::Vllm => vllm::account(&choice.version, model, device, args),
        Engine::Sglang => sglang::account(model, device, args),
        Engine::Trtllm => trtllm::account(model, device, args),
        Engine::LlamaCpp => llama_cpp::account(model, device, args),
    }
}

/// vLLM's forward-pass activation peak per token on one of `tp` ranks (docs/engines.md).
pub fn vllm_forward_bytes_per_token(model: &ModelFacts, tp: u64) -> Result<u64, EngineError> {
    vllm::forward_bytes_per_token(model, tp)
}

/// vLLM's non-torch memory as modelled (taken from one published log, docs/engines.md).
pub fn vllm_non_torch_bytes() -> u64 {
    vllm::NON_TORCH_BYTES
}

/// vLLM's sampler bytes per logit as modelled (taken from one published log,
/// docs/engines.md).
pub fn vllm_sampler_bytes_per_logit() -> u64 {
    vllm::SAMPLER_BYTES_PER_LOGIT
}

/// `a * b`, or an overflow naming `what`.
pub(crate) fn mul(a: u64, b: u64, what: &str) -> Result<u64, EngineError> {
    a.checked_mul(b).ok_or_else(|| EngineError::Overflow {
        what: what.to_owned(),
    })
}

/// `a + b`, or an overflow naming `what`.
pub(crate) fn add(a: u64, b: u64, what: &str) -> Result<u64, EngineError> {
    a.checked_add(b).ok_or_else(|| EngineError::Overflow {
        what: what.to_owned(),
    })
}

/// Bytes in GiB with two decimals, as the engines print them.
pub fn gib(bytes: f64) -> String {
    format!("{:.2}", bytes / GIB as f64)
}

/// A count with thousands separators, as vLLM prints token counts (`{:,}`).
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_by_their_command_line_names() {
        for engine in Engine::ALL {
            assert_eq!(engine.name().parse::<Engine>().unwrap(), engine);
        }
        let err = "vlm".parse::<Engine>().unwrap_err();
        assert!(
            err.to_string().contains("vllm, sglang, trtllm, llama.cpp"),
            "{err}"
        );
        let choice: EngineChoice = "vllm@0.6".parse().unwrap();
        assert_eq!(
            (choice.engine, choice.version.as_str()),
            (Engine::Vllm, "0.6")
        );
        let err = "vllm@9.9".parse::<EngineChoice>().unwrap_err();
        assert!(err.to_string().contains("0.19, 0.10, 0.6"), "{err}");
        let default: EngineChoice = "vllm".parse().unwrap();
        assert_eq!(default.version, "0.19");
    }

    #[test]
    fn counts_are_grouped_as_vllm_prints_them() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(447_088), "447,088");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }
}
