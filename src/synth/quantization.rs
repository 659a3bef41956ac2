//! Quantized safetensors schemes: a checkpoint's `quantization_config` (fp8,
//! compressed-tensors, AWQ, GPTQ, bitsandbytes, mxfp4) or a `--weight-format` name (`fp8`,
//! `int8`, `awq-int4`, `mxfp4`, `nvfp4`), and the physical components of one projection
//! matrix under a scheme.
//!
//! The bytes are those the serving engine keeps resident after loading (vLLM's
//! quantization methods, `vllm/model_executor/layers/quantization/`, v0.10): fp8 and int8
//! scales are f32 whatever the checkpoint stores; the int4 weight-only methods run on
//! Marlin, which drops the zero points of symmetric GPTQ and the `g_idx` of GPTQ without
//! act-order. Only projection matrices are quantized; the embedding, norms, router and head
//! stay in the checkpoint dtype unless the configuration says otherwise (GPTQ `lm_head`).
//! `docs/synth.md` has the table of every rule.

use serde_json::Value;

use crate::request::{
    BlockQuantizationSpec, ElementType, WeightComponentRole, WeightComponentSpec, WeightEncoding,
    WeightId,
};

use super::{portable, ModelConfig, SynthError};

/// How the values of a scheme are stored and scaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// FP8 e4m3 values (1 byte), f32 scales (HF `fp8`, compressed-tensors float 8-bit,
    /// vLLM's online `quantization=fp8`).
    Fp8,
    /// INT8 values with f32 scales, int8 activations (W8A8).
    Int8,
    /// Weight-only integer groups on Marlin (GPTQ, AWQ, compressed-tensors `pack-quantized`):
    /// packed values, 16-bit scales per group, optional zero points and act-order indices.
    IntWeightOnly,
    /// bitsandbytes 4-bit (nf4 or fp4): blocks of 64 values with an absmax each.
    Bnb4,
    /// bitsandbytes LLM.int8(): int8 values, an f32 scale per row.
    Bnb8,
    /// MXFP4 (OCP microscaling): blocks of 32 e2m1 values (16 bytes) and an e8m0 scale byte.
    Mxfp4,
    /// NVFP4: blocks of 16 e2m1 values (8 bytes), an fp8 e4m3 scale per block and an f32
    /// global scale per tensor.
    Nvfp4,
}

/// Which values share a scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Granularity {
    /// One scale per checkpoint tensor.
    Tensor,
    /// One scale per output channel (row).
    Channel,
    /// One scale per `n` input values of a row.
    Group(u64),
    /// One scale per `rows x columns` tile.
    Block(u64, u64),
}

/// Where a scheme came from (names the format and the key errors point at).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// `--weight-format fp8`.
    Fp8Flag,
    /// `--weight-format int8`.
    Int8Flag,
    /// `--weight-format awq-int4`.
    AwqFlag,
    /// `--weight-format mxfp4`.
    Mxfp4Flag,
    /// `--weight-format nvfp4`.
    Nvfp4Flag,
    /// `quantization_config.quant_method: fp8`.
    ConfigFp8,
    /// `quantization_config.quant_method: compressed-tensors`.
    ConfigCompressed,
    /// `quantization_config.quant_method: awq`.
    ConfigAwq,
    /// `quantization_config.quant_method: gptq`.
    ConfigGptq,
    /// `quantization_config.quant_method: bitsandbytes`.
    ConfigBnb,
    /// `quantization_config.quant_method: mxfp4`.
    ConfigMxfp4,
}

impl Origin {
    /// The format's name as printed (`fp8`, `config:gptq`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Fp8Flag => "fp8",
            Self::Int8Flag => "int8",
            Self::AwqFlag => "awq-int4",
            Self::Mxfp4Flag => "mxfp4",
            Self::Nvfp4Flag => "nvfp4",
            Self::ConfigFp8 => "config:fp8",
            Self::ConfigCompressed => "config:compressed-tensors",
            Self::ConfigAwq => "config:awq",
            Self::ConfigGptq => "config:gptq",
            Self::ConfigBnb => "config:bitsandbytes",
            Self::ConfigMxfp4 => "config:mxfp4",
        }
    }

    /// Whether the scheme was read from the model's `quantization_config`.
    pub fn from_config(self) -> bool {
        !matches!(
            self,
            Self::Fp8Flag | Self::Int8Flag | Self::AwqFlag | Self::Mxfp4Flag | Self::Nvfp4Flag
        )
    }
}

/// A quantization scheme of the projection matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Scheme {
    /// Where it came from.
    pub origin: Origin,
    /// Storage method.
    pub method: Method,
    /// Bits per stored value (2, 3, 4 or 8).
    pub bits: u8,
    /// Scale granularity.
    pub granularity: Granularity,
    /// Whether zero points are kept (asymmetric schemes).
    pub zero_points: bool,
    /// Whether act-order indices are kept (`g_idx` and Marlin's sort indices).
    pub act_order: bool,
    /// bitsandbytes double quantization (absmax quantized to 8 bits).
    pub double_quant: bool,
    /// A static per-tensor input (activation) scale.
    pub static_input_scale: bool,
    /// Whether the head is quantized too (GPTQ `lm_head: true`).
    pub quantize_head: bool,
    /// Only routed experts are quantized (mxfp4 as gpt-oss and llama.cpp's `MXFP4_MOE`).
    pub experts_only: bool,
    /// The checkpoint dtype: every unquantized weight, activations, Marlin's scales.
    pub dense_type: ElementType,
}

impl Scheme {
    /// The scheme of a `--weight-format` name (`fp8`, `int8`, `awq-int4`, `mxfp4`,
    /// `nvfp4`), in f16 until [`Scheme::with_dense_type`] sets the checkpoint dtype.
    pub fn from_flag(name: &str) -> Option<Self> {
        let base = Scheme {
            origin: Origin::Fp8Flag,
            method: Method::Fp8,
            bits: 8,
            granularity: Granularity::Tensor,
            zero_points: false,
            act_order: false,
            double_quant: false,
            static_input_scale: false,
            quantize_head: false,
            experts_only: false,
            dense_type: ElementType::F16,
        };
        Some(match name {
            // vLLM's online fp8 (`quantization=fp8`): per-tensor scales, dynamic activations.
            "fp8" => base,
            // W8A8 int8 with per-channel scales and dynamic per-token activations.
            "int8" => Scheme {
                origin: Origin::Int8Flag,
                method: Method::Int8,
                granularity: Granularity::Channel,
                ..base
            },
            "awq-int4" => Scheme {
                origin: Origin::AwqFlag,
                method: Method::IntWeightOnly,
                bits: 4,
                granularity: Granularity::Group(128),
                zero_points: true,
                ..base
            },
            "mxfp4" => Scheme {
                origin: Origin::Mxfp4Flag,
                method: Method::Mxfp4,
                bits: 4,
                granularity: Granularity::Group(32),
                experts_only: true,
                ..base
            },
            "nvfp4" => Scheme {
                origin: Origin::Nvfp4Flag,
                method: Method::Nvfp4,
                bits: 4,
                granularity: Granularity::Group(16),
                ..base
            },
            _ => return None,
        })
    }

    /// This scheme with unquantized weights and activations in `dense_type`.
    pub fn with_dense_type(self, dense_type: ElementType) -> Self {
        Scheme { dense_type, ..self }
    }

    /// The weight format id (`weight-format.safetensors.{method}`).
    pub fn format_id(self) -> &'static str {
        match self.method {
            Method::Fp8 => "weight-format.safetensors.fp8",
            Method::Int8 => "weight-format.safetensors.int8",
            Method::IntWeightOnly => "weight-format.safetensors.marlin-int",
            Method::Bnb4 | Method::Bnb8 => "weight-format.safetensors.bitsandbytes",
            Method::Mxfp4 => "weight-format.safetensors.mxfp4",
            Method::Nvfp4 => "weight-format.safetensors.nvfp4",
        }
    }

    /// The layout id suffix.
    pub fn layout_suffix(self) -> &'static str {
        match self.method {
            Method::Fp8 => "fp8",
            Method::Int8 => "int8",
            Method::IntWeightOnly => "marlin_int",
            Method::Bnb4 | Method::Bnb8 => "bitsandbytes",
            Method::Mxfp4 => "mxfp4",
            Method::Nvfp4 => "nvfp4",
        }
    }

    /// The quantization format id of the packed values (`quantization.fp8.e4m3`, ...).
    pub fn quantization_id(self) -> String {
        match self.method {
            Method::Fp8 => "quantization.fp8.e4m3".to_owned(),
            Method::Int8 => "quantization.int8.symmetric".to_owned(),
            Method::IntWeightOnly => format!("quantization.marlin.int{}", self.bits),
            Method::Bnb4 => "quantization.bitsandbytes.4bit".to_owned(),
            Method::Bnb8 => "quantization.bitsandbytes.int8".to_owned(),
            Method::Mxfp4 => MXFP4_FORMAT_ID.to_owned(),
            Method::Nvfp4 => "quantization.nvidia.nvfp4".to_owned(),
        }
    }

    /// `(values, bytes)` of one packed block of values.
    fn packing(self) -> (u64, u64) {
        match (self.method, self.bits) {
            (Method::Mxfp4, _) => (32, 16),
            (Method::Nvfp4, _) => (16, 8),
            (_, 8) => (1, 1),
            (_, 4) => (2, 1),
            (_, 3) => (8, 3),
            (_, 2) => (4, 1),
            (_, bits) => (8, u64::from(bits)),
        }
    }
}

/// A `quantization_config` read from a model configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantizationConfig {
    /// The scheme of the quantized projections.
    pub scheme: Scheme,
    /// Module-name patterns kept unquantized (`ignore`, `modules_to_not_convert`,
    /// `llm_int8_skip_modules`).
    pub keep_dense: Vec<Pattern>,
    /// The JSON path of the key that sets the group or block size (for errors).
    pub group_key: String,
}

/// A module-name pattern: a plain name (matches the module, any dotted prefix of it, or a
/// dotted suffix, as `ignore: ["lm_head"]` and `modules_to_not_convert` are meant), with `*`
/// matching any run; or `re:` followed by a regular expression of literals, `.`, `.*`,
/// `\` escapes, `^` and `$`, matched from the start of the name (Python's `re.match`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    text: String,
}

impl Pattern {
    /// Checks a pattern; `path` names it in errors.
    pub fn new(text: &str, path: &str) -> Result<Self, SynthError> {
        if let Some(re) = text.strip_prefix("re:") {
            if let Some(c) = re.chars().find(|c| "()[]{}+?|".contains(*c)) {
                return Err(SynthError::config(
                    path,
                    format!("{text:?} uses {c:?}: only literals, '.', '.*', '\\' escapes, '^' and '$' are understood; list the module names instead"),
                ));
            }
        }
        Ok(Self {
            text: text.to_owned(),
        })
    }

    /// Whether the module `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        if let Some(re) = self.text.strip_prefix("re:") {
            let re: Vec<char> = re.strip_prefix('^').unwrap_or(re).chars().collect();
            let name: Vec<char> = name.chars().collect();
            return regex_here(&re, &name);
        }
        let p: Vec<char> = self.text.chars().collect();
        let parts: Vec<&str> = name.split('.').collect();
        (0..parts.len()).any(|start| {
            (start + 1..=parts.len()).any(|end| {
                // A plain pattern names a whole module path: a prefix (its submodules) or a
                // suffix (`lm_head`, `mlp.gate`).
                (start == 0 || end == parts.len())
                    && glob(&p, &parts[start..end].join(".").chars().collect::<Vec<_>>())
            })
        })
    }
}

fn glob(p: &[char], t: &[char]) -> bool {
    match p.split_first() {
        None => t.is_empty(),
        Some(('*', rest)) => (0..=t.len()).any(|k| glob(rest, &t[k..])),
        Some((c, rest)) => t.first() == Some(c) && glob(rest, &t[1..]),
    }
}

/// Matches `re` (literals, `.`, `.*`, `\x`, trailing `$`) at the start of `t`.
fn regex_here(re: &[char], t: &[char]) -> bool {
    match re {
        [] => true,
        ['$'] => t.is_empty(),
        ['.', '*', rest @ ..] => (0..=t.len()).any(|k| regex_here(rest, &t[k..])),
        ['\\', c, rest @ ..] => t.first() == Some(c) && regex_here(rest, &t[1..]),
        ['.', rest @ ..] => !t.is_empty() && regex_here(rest, &t[1..]),
        [c, rest @ ..] => t.first() == Some(c) && regex_here(rest, &t[1..]),
    }
}

struct Reader<'a> {
    object: &'a serde_json::Map<String, Value>,
    path: String,
}

impl<'a> Reader<'a> {
    fn new(value: &'a Value, path: &str) -> Result<Self, SynthError> {
        match value {
            Value::Object(object) => Ok(Self {
                object,
                path: path.to_owned(),
            }),
            other => Err(SynthError::config(
                path,
                format!("expected an object, got {other}"),
            )),
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.object.get(key).filter(|v| !v.is_null())
    }

    fn integer(&self, key: &str) -> Result<Option<i64>, SynthError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_i64().map(Some).ok_or_else(|| {
                SynthError::config(&self.key(key), format!("expected an integer, got {v}"))
            }),
        }
    }

    fn flag(&self, key: &str, default: bool) -> Result<bool, SynthError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(SynthError::config(
                &self.key(key),
                format!("expected true or false, got {v}"),
            )),
        }
    }

    fn word(&self, key: &str) -> Result<Option<&'a str>, SynthError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(SynthError::config(
                &self.key(key),
                format!("expected a string, got {v}"),
            )),
        }
    }

    fn patterns(&self, key: &str) -> Result<Vec<Pattern>, SynthError> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let path = format!("{}[{i}]", self.key(key));
                    match item {
                        Value::String(s) => Pattern::new(s, &path),
                        other => Err(SynthError::config(
                            &path,
                            format!("expected a module name, got {other}"),
                        )),
                    }
                })
                .collect(),
            Some(v) => Err(SynthError::config(
                &self.key(key),
                format!("expected a list of module names, got {v}"),
            )),
        }
    }

    /// A group size: positive, or -1 (one group per row) when `per_row` is allowed.
    fn group(&self, key: &str, default: Option<i64>) -> Result<Granularity, SynthError> {
        match self.integer(key)?.or(default) {
            Some(-1) => Ok(Granularity::Channel),
            Some(g) if g > 0 => Ok(Granularity::Group(g as u64)),
            Some(g) => Err(SynthError::config(
                &self.key(key),
                format!("{g} is not a positive group size (or -1 for one group per row)"),
            )),
            None => Err(SynthError::config(&self.key(key), "is missing")),
        }
    }
}

const METHODS: &str = "fp8, compressed-tensors, awq, gptq, bitsandbytes, mxfp4";

/// The quantization format id of MXFP4 packed values in a weight schema (engines that
/// allocate MXFP4 experts their own way find them by it).
pub const MXFP4_FORMAT_ID: &str = "quantization.ocp.mxfp4";

/// The weight format an engine's `dtype` and `quantization` arguments ask for, as the
/// engine applies them to an unquantized checkpoint: vLLM's `quantization=fp8` quantizes
/// the projections to fp8 with one f32 scale per tensor at load time (`fp8`); `dtype`
/// `float16`/`half` or `bfloat16` serve the weights in that type (`dense-f16`,
/// `dense-bf16`). `None` when neither is given (or `dtype=auto`); an error names a value
/// that has no format (`float32`: no float32 weight format is synthesized).
pub fn format_of_engine_args(
    dtype: Option<&str>,
    quantization: Option<&str>,
) -> Result<Option<&'static str>, SynthError> {
    match (quantization, dtype) {
        (Some("fp8"), _) => Ok(Some("fp8")),
        (Some(other), _) => Err(SynthError::Option {
            option: "engine-arg quantization".to_owned(),
            message: format!(
                "{other:?} has no modelled online quantization (fp8); give --weight-format instead"
            ),
        }),
        (None, Some("float16" | "half")) => Ok(Some("dense-f16")),
        (None, Some("bfloat16")) => Ok(Some("dense-bf16")),
        // vLLM's float32 is modelled in its accounting (`engine::vllm`), but no weight
        // format here holds float32 weights, so a plan could not hold what vLLM loads.
        (None, Some(word @ ("float32" | "float"))) => Err(SynthError::Option {
            option: "engine-arg dtype".to_owned(),
            message: format!(
                "{word}: jointplan synthesizes no float32 weight format ({}), so a plan cannot hold the float32 weights vLLM would load (its accounting of them is docs/engines.md's, vLLM, dtype=float32); plan at dtype=auto, float16 or bfloat16",
                super::weights::FORMAT_NAMES
            ),
        }),
        (None, _) => Ok(None),
    }
}

/// The checkpoint dtype of a configuration (`torch_dtype`): bf16 when it says
/// `bfloat16`, else f16 (the engines' half type for float16 and float32 checkpoints).
pub fn checkpoint_dtype(config: &ModelConfig) -> ElementType {
    match config.torch_dtype.as_deref() {
        Some("bfloat16") => ElementType::Bf16,
        _ => ElementType::F16,
    }
}

/// The `quantization_config` of `config`, if it has one.
pub fn of_config(config: &ModelConfig) -> Result<Option<QuantizationConfig>, SynthError> {
    match config.extra.get("quantization_config") {
        None | Some(Value::Null) => Ok(None),
        Some(value) => parse(value, checkpoint_dtype(config)).map(Some),
    }
}

/// Reads a model's `quantization_config` (`value`); `dense_type` is the checkpoint dtype.
pub fn parse(value: &Value, dense_type: ElementType) -> Result<QuantizationConfig, SynthError> {
    let root = Reader::new(value, "quantization_config")?;
    let method = root.word("quant_method")?.ok_or_else(|| {
        SynthError::config(
            "quantization_config.quant_method",
            format!("is missing (one of {METHODS}); plan with --weight-format NAME to choose the format yourself"),
        )
    })?;
    let base = Scheme::from_flag("fp8")
        .map(|s| s.with_dense_type(dense_type))
        .ok_or_else(|| SynthError::Internal("fp8 flag scheme".to_owned()))?;
    let mut group_key = root.key("group_size");
    let (scheme, keep_dense) = match method {
        "fp8" => {
            let granularity = match root.get("weight_block_size") {
                None => Granularity::Tensor,
                Some(Value::Array(items)) if items.len() == 2 => {
                    let dim = |i: usize| {
                        items[i].as_u64().filter(|&d| d > 0).ok_or_else(|| {
                            SynthError::config(
                                &format!("quantization_config.weight_block_size[{i}]"),
                                format!("expected a positive integer, got {}", items[i]),
                            )
                        })
                    };
                    Granularity::Block(dim(0)?, dim(1)?)
                }
                Some(v) => {
                    return Err(SynthError::config(
                        "quantization_config.weight_block_size",
                        format!("expected [rows, columns], got {v}"),
                    ))
                }
            };
            group_key = root.key("weight_block_size");
            let static_input_scale = match root.word("activation_scheme")? {
                None | Some("dynamic") => false,
                Some("static") => true,
                Some(other) => {
                    return Err(SynthError::config(
                        "quantization_config.activation_scheme",
                        format!("{other:?} is not dynamic or static"),
                    ))
                }
            };
            let mut keep = root.patterns("ignored_layers")?;
            keep.extend(root.patterns("modules_to_not_convert")?);
            (
                Scheme {
                    origin: Origin::ConfigFp8,
                    granularity,
                    static_input_scale,
                    ..base
                },
                keep,
            )
        }
        "compressed-tensors" => {
            let (scheme, key) = compressed_tensors(&root, base)?;
            group_key = key;
            (scheme, root.patterns("ignore")?)
        }
        "awq" => {
            let bits = root.integer("bits")?.unwrap_or(4);
            if bits != 4 {
                return Err(SynthError::config(
                    "quantization_config.bits",
                    format!("AWQ checkpoints are 4-bit (vLLM's awq and awq_marlin load only 4-bit), got {bits}; plan with --weight-format to choose another format"),
                ));
            }
            let granularity = root.group("group_size", Some(128))?;
            if granularity == Granularity::Channel {
                return Err(SynthError::config(
                    "quantization_config.group_size",
                    "AWQ needs a positive group size",
                ));
            }
            (
                Scheme {
                    origin: Origin::ConfigAwq,
                    method: Method::IntWeightOnly,
                    bits: 4,
                    granularity,
                    zero_points: root.flag("zero_point", true)?,
                    ..base
                },
                root.patterns("modules_to_not_convert")?,
            )
        }
        "gptq" => {
            let bits = root.integer("bits")?.unwrap_or(4);
            if !matches!(bits, 2 | 3 | 4 | 8) {
                return Err(SynthError::config(
                    "quantization_config.bits",
                    format!("GPTQ stores 2, 3, 4 or 8 bits, got {bits}"),
                ));
            }
            (
                Scheme {
                    origin: Origin::ConfigGptq,
                    method: Method::IntWeightOnly,
                    bits: bits as u8,
                    granularity: root.group("group_size", Some(128))?,
                    zero_points: !root.flag("sym", true)?,
                    act_order: root.flag("desc_act", false)?,
                    quantize_head: root.flag("lm_head", false)?,
                    ..base
                },
                root.patterns("modules_to_not_convert")?,
            )
        }
        "bitsandbytes" => {
            let four = root.flag("load_in_4bit", false)?;
            let eight = root.flag("load_in_8bit", false)?;
            let scheme = match (four, eight) {
                (true, false) => {
                    match root.word("bnb_4bit_quant_type")?.unwrap_or("fp4") {
                        "nf4" | "fp4" => {}
                        other => {
                            return Err(SynthError::config(
                                "quantization_config.bnb_4bit_quant_type",
                                format!("{other:?} is not nf4 or fp4"),
                            ))
                        }
                    }
                    Scheme {
                        origin: Origin::ConfigBnb,
                        method: Method::Bnb4,
                        bits: 4,
                        granularity: Granularity::Group(64),
                        double_quant: root.flag("bnb_4bit_use_double_quant", false)?,
                        ..base
                    }
                }
                (false, true) => Scheme {
                    origin: Origin::ConfigBnb,
                    method: Method::Bnb8,
                    granularity: Granularity::Channel,
                    ..base
                },
                _ => {
                    return Err(SynthError::config(
                        "quantization_config.load_in_4bit",
                        "exactly one of load_in_4bit and load_in_8bit must be true",
                    ))
                }
            };
            (scheme, root.patterns("llm_int8_skip_modules")?)
        }
        "mxfp4" => (
            Scheme {
                origin: Origin::ConfigMxfp4,
                method: Method::Mxfp4,
                bits: 4,
                granularity: Granularity::Group(32),
                ..base
            },
            root.patterns("modules_to_not_convert")?,
        ),
        other => {
            return Err(SynthError::config(
                "quantization_config.quant_method",
                format!("{other:?} is not a method jointplan models ({METHODS}); plan with --weight-format NAME to override the checkpoint's format (e.g. dense-bf16, gptq-int4, fp8)"),
            ))
        }
    };
    Ok(QuantizationConfig {
        scheme,
        keep_dense,
        group_key,
    })
}

/// The one weight scheme of a compressed-tensors `config_groups`, and the JSON path of its
/// group size.
fn compressed_tensors(root: &Reader<'_>, base: Scheme) -> Result<(Scheme, String), SynthError> {
    let groups_path = root.key("config_groups");
    let groups = match root.get("config_groups") {
        Some(Value::Object(map)) if !map.is_empty() => map,
        Some(v) => {
            return Err(SynthError::config(
                &groups_path,
                format!("expected a non-empty object of groups, got {v}"),
            ))
        }
        None => return Err(SynthError::config(&groups_path, "is missing")),
    };
    let format = root.word("format")?.unwrap_or("");
    let mut found: Option<(Scheme, String)> = None;
    for (name, group) in groups {
        let group = Reader::new(group, &format!("{groups_path}.{name}"))?;
        let weights_value = group
            .get("weights")
            .ok_or_else(|| SynthError::config(&group.key("weights"), "is missing"))?;
        let w = Reader::new(weights_value, &group.key("weights"))?;
        let bits = w
            .integer("num_bits")?
            .ok_or_else(|| SynthError::config(&w.key("num_bits"), "is missing"))?;
        let kind = w.word("type")?.unwrap_or("int");
        let strategy = w.word("strategy")?.unwrap_or("tensor");
        let symmetric = w.flag("symmetric", true)?;
        let granularity = match strategy {
            "tensor" => Granularity::Tensor,
            "channel" => Granularity::Channel,
            "group" | "tensor_group" => w.group("group_size", None)?,
            "block" => match w.get("block_structure") {
                Some(Value::Array(items)) if items.len() == 2 => {
                    let dim = |i: usize| {
                        items[i].as_u64().filter(|&d| d > 0).ok_or_else(|| {
                            SynthError::config(
                                &format!("{}[{i}]", w.key("block_structure")),
                                format!("expected a positive integer, got {}", items[i]),
                            )
                        })
                    };
                    Granularity::Block(dim(0)?, dim(1)?)
                }
                other => {
                    return Err(SynthError::config(
                        &w.key("block_structure"),
                        format!("expected [rows, columns] for strategy block, got {other:?}"),
                    ))
                }
            },
            other => {
                return Err(SynthError::config(
                    &w.key("strategy"),
                    format!("{other:?} is not tensor, channel, group, tensor_group or block"),
                ))
            }
        };
        let key = if matches!(granularity, Granularity::Block(..)) {
            w.key("block_structure")
        } else {
            w.key("group_size")
        };
        let inputs = match group.get("input_activations") {
            None => None,
            Some(v) => {
                let a = Reader::new(v, &group.key("input_activations"))?;
                Some(match a.get("dynamic") {
                    None | Some(Value::Bool(true)) => true,
                    Some(Value::String(s)) if s == "local" => true,
                    Some(Value::Bool(false)) => false,
                    Some(other) => {
                        return Err(SynthError::config(
                            &a.key("dynamic"),
                            format!("expected true, false or \"local\", got {other}"),
                        ))
                    }
                })
            }
        };
        let static_input_scale = inputs == Some(false);
        let scheme = match (kind, bits, inputs.is_some()) {
            ("float", 8, _) => Scheme {
                origin: Origin::ConfigCompressed,
                granularity,
                static_input_scale,
                ..base
            },
            ("float", 4, _) if granularity == Granularity::Group(16) => Scheme {
                origin: Origin::ConfigCompressed,
                method: Method::Nvfp4,
                bits: 4,
                granularity,
                ..base
            },
            ("int", 8, true) if matches!(granularity, Granularity::Tensor | Granularity::Channel) => {
                Scheme {
                    origin: Origin::ConfigCompressed,
                    method: Method::Int8,
                    granularity,
                    static_input_scale,
                    ..base
                }
            }
            ("int", 4 | 8, false) if matches!(granularity, Granularity::Group(_) | Granularity::Channel) => {
                Scheme {
                    origin: Origin::ConfigCompressed,
                    method: Method::IntWeightOnly,
                    bits: bits as u8,
                    granularity,
                    zero_points: !symmetric,
                    act_order: w.word("actorder")? == Some("group"),
                    ..base
                }
            }
            _ => {
                return Err(SynthError::config(
                    &w.path,
                    format!("type {kind} with {bits} bits, strategy {strategy} and {} activations is not a scheme jointplan models (fp8, int8 w8a8 per tensor/channel, int4/int8 weight-only per group/channel, nvfp4 groups of 16; format {format:?}); plan with --weight-format", if inputs.is_some() { "quantized" } else { "16-bit" }),
                ))
            }
        };
        match &found {
            Some((first, _)) if *first != scheme => {
                return Err(SynthError::config(
                    &groups_path,
                    "groups with different weight schemes (mixed precision) are not modelled; plan with --weight-format to choose one format",
                ))
            }
            Some(_) => {}
            None => found = Some((scheme, key)),
        }
    }
    found.ok_or_else(|| SynthError::config(&groups_path, "is empty"))
}

fn component(
    weight: &WeightId,
    suffix: &str,
    role: WeightComponentRole,
    names: &[String],
    external_suffix: &str,
    dimensions: Vec<u64>,
    encoding: WeightEncoding,
) -> WeightComponentSpec {
    WeightComponentSpec {
        id: portable(format!("{weight}:{suffix}")),
        role,
        external_names: names
            .iter()
            .map(|n| format!("{n}{external_suffix}"))
            .collect(),
        dimensions,
        encoding,
        required: true,
    }
}

fn dense(element_type: ElementType) -> WeightEncoding {
    WeightEncoding::Dense { element_type }
}

/// The components of a projection `weight` of `dims` (`[.., out, in]`) stored from the
/// checkpoint tensors `names` under `scheme`; `group_key` names the group size in errors.
pub fn projection_components(
    scheme: Scheme,
    weight: &WeightId,
    dims: &[u64],
    names: &[String],
    group_key: &str,
) -> Result<Vec<WeightComponentSpec>, SynthError> {
    let rank = dims.len();
    if rank < 2 {
        return Err(SynthError::Internal(format!(
            "projection {weight} has rank {rank}"
        )));
    }
    let lead = &dims[..rank - 2];
    let (out, input) = (dims[rank - 2], dims[rank - 1]);
    let tensors = (names.len() as u64).max(1);
    let with = |tail: &[u64]| -> Vec<u64> { lead.iter().chain(tail).copied().collect() };
    let overflow = || SynthError::overflow(&format!("components of {weight}"));
    let divides = |size: u64| -> Result<u64, SynthError> {
        if input % size == 0 {
            Ok(input / size)
        } else {
            Err(SynthError::config(
                group_key,
                format!("{size} does not divide the input dimension {input} of {weight} ({}); choose a format whose group divides it", names.first().map_or("", String::as_str)),
            ))
        }
    };
    let (per_block, block_bytes) = scheme.packing();
    let values = |columns: u64| {
        component(
            weight,
            "packed",
            WeightComponentRole::PackedValues,
            names,
            match scheme.method {
                Method::IntWeightOnly => ".qweight",
                Method::Mxfp4 => "_blocks",
                Method::Nvfp4 => ".weight_packed",
                _ => ".weight",
            },
            with(&[out, columns]),
            WeightEncoding::BlockQuantized(BlockQuantizationSpec {
                format_id: portable(scheme.quantization_id()),
                logical_values_per_block: per_block as u32,
                bytes_per_block: block_bytes as u32,
            }),
        )
    };
    let scale = |suffix: &str, dims: Vec<u64>, element_type: ElementType| {
        component(
            weight,
            suffix.trim_start_matches('.'),
            WeightComponentRole::Scales,
            names,
            suffix,
            dims,
            dense(element_type),
        )
    };
    let packed_columns = if input % per_block == 0 {
        input / per_block
    } else {
        return Err(SynthError::config(
            group_key,
            format!("the input dimension {input} of {weight} is not a multiple of the {per_block}-value packing"),
        ));
    };
    let mut parts = vec![values(packed_columns)];
    match scheme.method {
        Method::Fp8 | Method::Int8 => {
            let dims = match scheme.granularity {
                Granularity::Tensor => vec![tensors],
                Granularity::Channel => with(&[out, 1]),
                Granularity::Group(g) => with(&[out, divides(g)?]),
                Granularity::Block(r, c) => with(&[out.div_ceil(r), input.div_ceil(c)]),
            };
            let suffix = if matches!(scheme.granularity, Granularity::Block(..)) {
                ".weight_scale_inv"
            } else {
                ".weight_scale"
            };
            parts.push(scale(suffix, dims, ElementType::F32));
            if scheme.static_input_scale {
                parts.push(scale(".input_scale", vec![tensors], ElementType::F32));
            }
        }
        Method::IntWeightOnly => {
            let groups = match scheme.granularity {
                Granularity::Group(g) => divides(g)?,
                _ => 1,
            };
            parts.push(scale(".scales", with(&[groups, out]), scheme.dense_type));
            if scheme.zero_points {
                let bytes = out
                    .checked_mul(u64::from(scheme.bits))
                    .ok_or_else(overflow)?
                    .div_ceil(8);
                parts.push(component(
                    weight,
                    "qzeros",
                    WeightComponentRole::ZeroPoints,
                    names,
                    ".qzeros",
                    with(&[groups, bytes]),
                    dense(ElementType::U8),
                ));
            }
            if scheme.act_order {
                // g_idx and Marlin's sort indices: one i32 each per input row.
                parts.push(component(
                    weight,
                    "g_idx",
                    WeightComponentRole::Indices,
                    names,
                    ".g_idx",
                    with(&[2, input]),
                    dense(ElementType::I32),
                ));
            }
        }
        Method::Bnb4 => {
            let elements = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
            let per_tensor = elements.ok_or_else(overflow)? / tensors;
            let blocks = per_tensor.div_ceil(64);
            if scheme.double_quant {
                parts.push(scale(".absmax", vec![tensors, blocks], ElementType::U8));
                parts.push(scale(
                    ".nested_absmax",
                    vec![tensors, blocks.div_ceil(256)],
                    ElementType::F32,
                ));
                parts.push(scale(
                    ".nested_quant_map",
                    vec![tensors, 256],
                    ElementType::F32,
                ));
            } else {
                parts.push(scale(".absmax", vec![tensors, blocks], ElementType::F32));
            }
            parts.push(scale(".quant_map", vec![tensors, 16], ElementType::F32));
        }
        Method::Bnb8 => parts.push(scale(".SCB", with(&[out]), ElementType::F32)),
        Method::Mxfp4 => parts.push(scale(
            "_scales",
            with(&[out, divides(32)?]),
            ElementType::U8,
        )),
        Method::Nvfp4 => {
            parts.push(scale(
                ".weight_scale",
                with(&[out, divides(16)?]),
                ElementType::U8,
            ));
            parts.push(scale(
                ".weight_global_scale",
                vec![tensors],
                ElementType::F32,
            ));
        }
    }
    parts.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(parts)
}
