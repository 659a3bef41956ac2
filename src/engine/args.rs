//! An engine's arguments as the engine spells them (`--engine-arg KEY=VALUE`), checked
//! against the keys each engine has that change its memory.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Engine, EngineError};

/// What values a key accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A fraction in (0, 1].
    Fraction,
    /// A positive integer.
    Count,
    /// A non-negative integer.
    CountOrZero,
    /// One of the listed words.
    Word(&'static [&'static str]),
    /// `true` or `false`.
    Flag,
    /// vLLM's `speculative_config`: a JSON object whose `method` is one of the listed
    /// words and whose `num_speculative_tokens`, if given, is a positive integer.
    SpeculativeConfig(&'static [&'static str]),
}

/// One argument an engine has: its spelling, values, default and where the default comes
/// from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownArg {
    /// The key as the engine spells it (`gpu_memory_utilization`).
    pub key: &'static str,
    /// Its values.
    pub kind: ArgKind,
    /// The default, in words (the accounting applies it).
    pub default: &'static str,
}

/// The arguments given, by key (sorted), values as given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineArgs {
    given: BTreeMap<String, String>,
}

impl EngineArgs {
    /// Parses `KEY=VALUE` texts (keys with `-` are read as `_`, as the engines' command
    /// lines do); values are checked against the engine by [`EngineArgs::check`].
    pub fn parse<S: AsRef<str>>(texts: &[S]) -> Result<Self, EngineError> {
        let mut given = BTreeMap::new();
        for text in texts {
            let text = text.as_ref();
            let Some((key, value)) = text.split_once('=') else {
                return Err(EngineError::Malformed {
                    given: text.to_owned(),
                });
            };
            let key = key.trim().trim_start_matches("--").replace('-', "_");
            if key.is_empty() {
                return Err(EngineError::Malformed {
                    given: text.to_owned(),
                });
            }
            if given.insert(key.clone(), value.trim().to_owned()).is_some() {
                return Err(EngineError::Duplicate { key });
            }
        }
        Ok(Self { given })
    }

    /// Sets one argument (for callers that hold values rather than texts).
    pub fn set(&mut self, key: &str, value: &str) {
        self.given.insert(key.to_owned(), value.to_owned());
    }

    /// The arguments given, by key.
    pub fn given(&self) -> &BTreeMap<String, String> {
        &self.given
    }

    /// Checks every key against `engine` and every value against its kind.
    pub fn check(&self, engine: Engine) -> Result<(), EngineError> {
        let known = engine.known_args();
        for (key, value) in &self.given {
            let Some(arg) = known.iter().find(|a| a.key == key) else {
                return Err(EngineError::UnknownArg {
                    engine,
                    key: key.clone(),
                    known: known.iter().map(|a| a.key).collect::<Vec<_>>().join(", "),
                });
            };
            check_value(arg, value)?;
        }
        Ok(())
    }

    /// The value of a fraction key, if given.
    pub fn fraction(&self, key: &str) -> Option<f64> {
        self.given.get(key).and_then(|v| v.parse().ok())
    }

    /// The value of a count key, if given.
    pub fn count(&self, key: &str) -> Option<u64> {
        self.given.get(key).and_then(|v| v.parse().ok())
    }

    /// The value of a word or flag key, if given.
    pub fn word(&self, key: &str) -> Option<&str> {
        self.given.get(key).map(String::as_str)
    }

    /// The `method` of a `speculative_config` JSON object, if one is given; without one, the
    /// method vLLM infers from its draft `model`'s name (`vllm/config/speculative.py`
    /// `SpeculativeConfig.__post_init__`, the same in v0.10 and later: a name containing
    /// `eagle-` is `eagle`, else one containing `eagle3` is `eagle3`; vLLM then reads the
    /// draft's `model_type` for Medusa, MLP speculators and multi-token-prediction layers,
    /// whose configurations synthesis refuses; any other is `draft_model`).
    pub fn speculative_method(&self) -> Option<String> {
        let value: serde_json::Value =
            serde_json::from_str(self.given.get("speculative_config")?).ok()?;
        if let Some(method) = value.get("method").and_then(|m| m.as_str()) {
            return Some(method.to_owned());
        }
        let model = value.get("model")?.as_str()?.to_lowercase();
        Some(
            if model.contains("eagle-") {
                "eagle"
            } else if model.contains("eagle3") {
                "eagle3"
            } else {
                "draft_model"
            }
            .to_owned(),
        )
    }

    /// The draft `model` of a `speculative_config` JSON object, if one is given.
    pub fn speculative_model(&self) -> Option<String> {
        let value: serde_json::Value =
            serde_json::from_str(self.given.get("speculative_config")?).ok()?;
        value.get("model")?.as_str().map(str::to_owned)
    }
}

fn check_value(arg: &KnownArg, value: &str) -> Result<(), EngineError> {
    let bad = |expected: String| EngineError::BadValue {
        key: arg.key.to_owned(),
        value: value.to_owned(),
        expected,
    };
    match arg.kind {
        ArgKind::Fraction => match value.parse::<f64>() {
            Ok(f) if f > 0.0 && f <= 1.0 => Ok(()),
            _ => Err(bad("expected a fraction in (0, 1], e.g. 0.9".to_owned())),
        },
        ArgKind::Count => match value.parse::<u64>() {
            Ok(n) if n > 0 => Ok(()),
            _ => Err(bad("expected a positive integer".to_owned())),
        },
        ArgKind::CountOrZero => match value.parse::<u64>() {
            Ok(_) => Ok(()),
            _ => Err(bad("expected a non-negative integer".to_owned())),
        },
        ArgKind::Word(words) => {
            if words.contains(&value) {
                Ok(())
            } else {
                Err(bad(format!("expected one of {}", words.join(", "))))
            }
        }
        ArgKind::Flag => match value {
            "true" | "false" => Ok(()),
            _ => Err(bad("expected true or false".to_owned())),
        },
        ArgKind::SpeculativeConfig(methods) => {
            let expected = || {
                bad(format!(
                    "expected a JSON object such as {{\"method\":\"deepseek_mtp\",\"num_speculative_tokens\":1}} or {{\"method\":\"eagle\",\"model\":\"path/to/the/draft/config.json\",\"num_speculative_tokens\":3}} whose method is one of {} (the modelled methods: the checkpoint's own multi-token-prediction layers; an EAGLE or EAGLE-3 head or a draft model whose configuration is at `model`; n-gram, Medusa and the others are not modelled)",
                    methods.join(", ")
                ))
            };
            let Ok(serde_json::Value::Object(map)) = serde_json::from_str(value) else {
                return Err(expected());
            };
            let model = map.get("model").and_then(|m| m.as_str());
            let method = EngineArgs {
                given: [("speculative_config".to_owned(), value.to_owned())].into(),
            }
            .speculative_method();
            match method.as_deref() {
                Some(method) if methods.contains(&method) => {
                    if matches!(method, "eagle" | "eagle3" | "draft_model") && model.is_none() {
                        return Err(bad(format!(
                            "speculative_config.model is missing: method {method} loads a drafter whose configuration is read from `model` (a config.json file, or a folder holding one such as models/<name>)"
                        )));
                    }
                }
                _ => return Err(expected()),
            }
            match map.get("num_speculative_tokens") {
                None => Ok(()),
                Some(n) if n.as_u64().is_some_and(|n| n > 0) => Ok(()),
                Some(_) => Err(expected()),
            }
        }
    }
}

/// Bytes per KV cache element of a `kv_cache_dtype` word (`auto`: the model's dtype).
/// FP8 and INT8 caches keep one byte per element; vLLM keeps its FP8 scales per layer (one
/// float for K and one for V), llama.cpp's `q8_0` blocks carry an f16 scale per 32 values
/// (34 bytes per 32), which the callers add.
pub fn kv_element_bytes(word: &str, model_dtype_bytes: u64) -> u64 {
    match word {
        "fp8" | "fp8_e4m3" | "fp8_e5m2" | "int8" => 1,
        "float16" | "f16" | "fp16" | "bfloat16" | "bf16" => 2,
        "float32" | "f32" => 4,
        _ => model_dtype_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_are_checked_against_the_engine() {
        let args =
            EngineArgs::parse(&["gpu-memory-utilization=0.95", "max_model_len=8192"]).unwrap();
        args.check(Engine::Vllm).unwrap();
        assert_eq!(args.fraction("gpu_memory_utilization"), Some(0.95));
        let err = EngineArgs::parse(&["mem_fraction_static=0.8"])
            .unwrap()
            .check(Engine::Vllm)
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("mem_fraction_static") && text.contains("gpu_memory_utilization"),
            "{text}"
        );
        let err = EngineArgs::parse(&["gpu_memory_utilization=1.5"])
            .unwrap()
            .check(Engine::Vllm)
            .unwrap_err();
        assert!(
            err.to_string().contains("gpu_memory_utilization=1.5"),
            "{err}"
        );
        let err = EngineArgs::parse(&["kv_cache_dtype=fp4"])
            .unwrap()
            .check(Engine::Vllm)
            .unwrap_err();
        assert!(err.to_string().contains("fp8"), "{err}");
        let mtp = EngineArgs::parse(&[
            r#"speculative_config={"method":"deepseek_mtp","num_speculative_tokens":1}"#,
        ])
        .unwrap();
        mtp.check(Engine::Vllm).unwrap();
        assert_eq!(mtp.speculative_method().as_deref(), Some("deepseek_mtp"));
        let eagle = EngineArgs::parse(&[r#"speculative_config={"method":"eagle"}"#])
            .unwrap()
            .check(Engine::Vllm)
            .unwrap_err();
        assert!(
            eagle
                .to_string()
                .contains("speculative_config.model is missing"),
            "{eagle}"
        );
        let named = EngineArgs::parse(&[r#"speculative_config={"model":"x/EAGLE-head"}"#]).unwrap();
        named.check(Engine::Vllm).unwrap();
        assert_eq!(named.speculative_method().as_deref(), Some("eagle"));
        assert_eq!(named.speculative_model().as_deref(), Some("x/EAGLE-head"));
        // vLLM's name rule: `eagle-` before `eagle3`; a name with neither is a draft model.
        for (model, method) in [
            ("yuhuili/EAGLE-LLaMA3-Instruct-8B", "eagle"),
            ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "eagle3"),
            ("AngelSlim/Qwen3-8B_eagle3", "eagle3"),
            ("my_eagle_head", "draft_model"),
            ("models/llama-3.2-1b", "draft_model"),
        ] {
            let args =
                EngineArgs::parse(&[&format!(r#"speculative_config={{"model":"{model}"}}"#)])
                    .unwrap();
            assert_eq!(
                args.speculative_method().as_deref(),
                Some(method),
                "{model}"
            );
        }
        let eagle3 = EngineArgs::parse(&[r#"speculative_config={"method":"eagle3"}"#])
            .unwrap()
            .check(Engine::Vllm)
            .unwrap_err();
        assert!(
            eagle3
                .to_string()
                .contains("speculative_config.model is missing: method eagle3"),
            "{eagle3}"
        );
        for bad in [
            r#"speculative_config={"method":"ngram","num_speculative_tokens":1}"#,
            r#"speculative_config={"method":"mtp","num_speculative_tokens":0}"#,
            "speculative_config=mtp",
        ] {
            let err = EngineArgs::parse(&[bad])
                .unwrap()
                .check(Engine::Vllm)
                .unwrap_err();
            assert!(err.to_string().contains("deepseek_mtp"), "{err}");
        }
        assert!(matches!(
            EngineArgs::parse(&["block_size"]),
            Err(EngineError::Malformed { .. })
        ));
        assert!(matches!(
            EngineArgs::parse(&["block_size=16", "block-size=32"]),
            Err(EngineError::Duplicate { .. })
        ));
    }
}
