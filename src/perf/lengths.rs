//! How the requests of a serving point draw their prompt and output lengths: all the same
//! (`fixed`, the default), the random datasets of the serving benchmarks (SGLang's
//! `bench_serving --dataset-name random` and vLLM's `bench serve --dataset-name random`,
//! each with its own `--random-range-ratio` rule), or a benchmark's own requests listed
//! one by one (a result file's per-request lengths).
//!
//! SGLang's draws are the benchmark's own: its lengths come from numpy's legacy
//! `np.random.randint` after `np.random.seed(--seed)` (MT19937, masked rejection), which
//! [`Mt19937`] reproduces, so a run of `N` requests at SGLang's seed simulates exactly the
//! lengths the benchmark sent. vLLM's draws are splitmix64 of a fixed seed and the
//! request's index: the same distribution, not vLLM's own sample. Either way a simulation
//! draws the same lengths run to run and whatever the thread count. The rules and their
//! sources are in docs/performance-model.md, "Request lengths".

use serde::ser::SerializeStruct;
use serde::Serialize;

use super::PerfError;

/// The distribution of the requests' prompt and output lengths, given the serving point's
/// nominal lengths `I` (`--input-tokens`) and `O` (`--output-tokens`).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Lengths {
    /// Every request has `I` prompt and `O` output tokens.
    #[default]
    Fixed,
    /// SGLang's random dataset (`python -m sglang.bench_serving --dataset-name random
    /// --random-input-len I --random-output-len O --random-range-ratio R`, SGLang's default
    /// R = 0): each length uniform among the integers of `[max(floor(L x R), 1), L]`.
    SglangRandom {
        /// The range ratio `R`, in `[0, 1]`.
        range_ratio: f64,
        /// The benchmark's `--seed` (SGLang's default 1): the `N` prompts' lengths are
        /// MT19937's first `N` draws, the outputs' the next `N`.
        seed: u32,
    },
    /// vLLM's random dataset (`vllm bench serve --dataset-name random ...
    /// --random-range-ratio R`, since vLLM PR #16126; default R = 0): each length uniform
    /// among the integers of `[floor(L x (1 - R)), ceil(L x (1 + R))]`, the output's lower
    /// end at least 1.
    VllmRandom {
        /// The range ratio `R`, in `[0, 1)`.
        range_ratio: f64,
    },
    /// A benchmark's own requests, in the order it sent them: `(prompt, output)` tokens of
    /// each (request `k` of a longer run takes entry `k mod n`; a prompt of 0 counts as 1;
    /// a response of 0 tokens, a model that stopped at once, runs as one token that the
    /// client never saw: its TTFT counts 0 in the mean, as the benchmark records it).
    Listed {
        /// The requests' lengths.
        requests: Vec<(u64, u64)>,
        /// Where they come from (a result file's URL).
        source: String,
    },
}

// Ratios are validated finite, so equality is reflexive.
impl Eq for Lengths {}

/// The seed of every draw (any fixed constant: the draws are reproducible, not secret).
const SEED: u64 = 0x6a6f_696e_7470_6c61;

/// splitmix64's output for state `x` (Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform integer of `[low, high]` from the 64 random bits `bits` (the high word of
/// `bits x span`: a bias below span / 2^64, nil for spans of lengths).
fn uniform(bits: u64, low: u64, high: u64) -> u64 {
    let span = u128::from(high - low) + 1;
    low + ((u128::from(bits) * span) >> 64) as u64
}

/// numpy's legacy generator (`np.random.seed(s)` then `np.random.randint`): MT19937
/// (Matsumoto and Nishimura, ACM TOMACS 1998) seeded by `init_genrand(s)`, and a bounded
/// integer by masked rejection (numpy/random/src/distributions: the 32-bit draw masked to
/// the range's bit width, redrawn while above it).
struct Mt19937 {
    state: [u32; 624],
    next: usize,
}

impl Mt19937 {
    fn new(seed: u32) -> Self {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, next: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.next >= 624 {
            for k in 0..624 {
                let y = (self.state[k] & 0x8000_0000) | (self.state[(k + 1) % 624] & 0x7fff_ffff);
                let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
                self.state[k] = self.state[(k + 397) % 624] ^ (y >> 1) ^ mag;
            }
            self.next = 0;
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// An integer of `[low, high]` (a span below 2^32, as lengths are); numpy draws
    /// nothing for an empty span.
    fn bounded(&mut self, low: u64, high: u64) -> u64 {
        let range = (high - low) as u32;
        if range == 0 {
            return low;
        }
        let mut mask = range;
        for shift in [1, 2, 4, 8, 16] {
            mask |= mask >> shift;
        }
        loop {
            let v = self.next_u32() & mask;
            if v <= range {
                return low + u64::from(v);
            }
        }
    }
}

impl Lengths {
    /// Whether every request has the nominal lengths (the default; not serialized).
    pub fn is_fixed(&self) -> bool {
        matches!(self, Lengths::Fixed)
    }

    /// Parses the command line's spelling: `fixed`, `sglang[:R[:SEED]]` or `vllm[:R]` (R
    /// the benchmark's `--random-range-ratio`, its default 0 when left out; SEED SGLang's
    /// `--seed`, default 1).
    pub fn parse(text: &str) -> Result<Lengths, PerfError> {
        let mut parts = text.splitn(3, ':');
        let kind = parts.next().unwrap_or_default();
        let ratio = parts.next();
        let seed = match parts.next() {
            None => 1,
            Some(seed) if kind == "sglang" => seed.trim().parse::<u32>().map_err(|_| {
                bad(format!(
                    "`{text}`: the seed `{seed}` is not an integer of 0..=4294967295 (SGLang's --seed)"
                ))
            })?,
            Some(_) => {
                return Err(bad(format!(
                    "`{text}`: only sglang takes a seed (give fixed, sglang[:R[:SEED]] or vllm[:R])"
                )))
            }
        };
        let ratio = match ratio {
            None => 0.0,
            Some(r) => r.trim().parse::<f64>().map_err(|_| {
                bad(format!(
                    "`{text}`: the range ratio `{r}` is not a number (e.g. sglang:0.5)"
                ))
            })?,
        };
        let lengths = match kind {
            "fixed" if text.contains(':') => {
                return Err(bad(format!(
                    "`{text}`: fixed lengths take no range ratio (give fixed, sglang[:R[:SEED]] or vllm[:R])"
                )))
            }
            "fixed" => Lengths::Fixed,
            "sglang" => Lengths::SglangRandom {
                range_ratio: ratio,
                seed,
            },
            "vllm" => Lengths::VllmRandom { range_ratio: ratio },
            other => {
                return Err(bad(format!(
                    "`{other}`: expected fixed, sglang[:R[:SEED]] or vllm[:R]"
                )))
            }
        };
        lengths.validate()?;
        Ok(lengths)
    }

    /// Checks the range ratio against its benchmark's domain, and a list for emptiness.
    pub fn validate(&self) -> Result<(), PerfError> {
        match self {
            Lengths::Fixed => Ok(()),
            Lengths::SglangRandom { range_ratio, .. } if !(0.0..=1.0).contains(range_ratio) => {
                Err(bad(format!(
                    "sglang:{range_ratio}: SGLang's range ratio must be within [0, 1]"
                )))
            }
            Lengths::VllmRandom { range_ratio } if !(0.0..1.0).contains(range_ratio) => {
                Err(bad(format!(
                    "vllm:{range_ratio}: vLLM's range ratio must be within [0, 1) (vLLM rejects 1 and above)"
                )))
            }
            Lengths::Listed { requests, .. } if requests.is_empty() => {
                Err(bad("a listed distribution needs at least one request".to_owned()))
            }
            _ => Ok(()),
        }
    }

    /// The range `[low, high]` a nominal length `nominal` draws from (`output`: the
    /// output's, whose lower end vLLM raises to 1). Every length is at least 1: a request
    /// has a prompt, and the simulation gives it at least its first token. A list's range
    /// is its shortest and longest entry.
    pub fn range(&self, nominal: u64, output: bool) -> (u64, u64) {
        let n = nominal as f64;
        let (low, high) = match self {
            Lengths::Fixed => (nominal, nominal),
            Lengths::Listed { requests, .. } => {
                let pick = |r: &(u64, u64)| if output { r.1 } else { r.0 };
                (
                    requests.iter().map(pick).min().unwrap_or(1),
                    requests.iter().map(pick).max().unwrap_or(1),
                )
            }
            Lengths::SglangRandom { range_ratio, .. } => {
                ((n * range_ratio).floor() as u64, nominal)
            }
            Lengths::VllmRandom { range_ratio } => {
                let low = (n * (1.0 - range_ratio)).floor() as u64;
                let high = (n * (1.0 + range_ratio)).ceil() as u64;
                (if output { low.max(1) } else { low }, high)
            }
        };
        (low.max(1), high.max(1))
    }

    /// The `(prompt, output)` tokens of the `n` requests of a run, in the order the clients
    /// send them, at nominal lengths `input` and `output` (empty for fixed lengths: every
    /// request has the nominal ones). An output is 0 only for a listed response of none
    /// (see [`Lengths::Listed`]).
    pub fn draws(&self, n: u64, input: u64, output: u64) -> Vec<(u64, u64)> {
        match self {
            Lengths::Fixed => Vec::new(),
            Lengths::Listed { requests, .. } => (0..n)
                .map(|k| {
                    let (i, o) = requests[(k % requests.len().max(1) as u64) as usize];
                    (i.max(1), o)
                })
                .collect(),
            Lengths::SglangRandom { seed, .. } => {
                // `compute_random_lens` draws every prompt's length, then every output's.
                let mut mt = Mt19937::new(*seed);
                let (il, ih) = self.range(input, false);
                let (ol, oh) = self.range(output, true);
                let prompts: Vec<u64> = (0..n).map(|_| mt.bounded(il, ih)).collect();
                prompts
                    .into_iter()
                    .map(|i| (i, mt.bounded(ol, oh)))
                    .collect()
            }
            Lengths::VllmRandom { .. } => {
                let (il, ih) = self.range(input, false);
                let (ol, oh) = self.range(output, true);
                (0..n)
                    .map(|k| {
                        let state = SEED.wrapping_add(k.wrapping_mul(2));
                        (
                            uniform(splitmix64(state), il, ih),
                            uniform(splitmix64(state.wrapping_add(1)), ol, oh),
                        )
                    })
                    .collect()
            }
        }
    }

    /// The mean `(prompt, output)` tokens of the distribution (a list's mean over its
    /// entries, each at least 1).
    pub fn mean(&self, input: u64, output: u64) -> (f64, f64) {
        match self {
            Lengths::Listed { requests, .. } => {
                let n = requests.len().max(1) as f64;
                let sum = |f: fn(&(u64, u64)) -> u64| {
                    requests.iter().map(|r| f(r).max(1) as f64).sum::<f64>() / n
                };
                (sum(|r| r.0), sum(|r| r.1))
            }
            _ => {
                let mid = |(low, high): (u64, u64)| (low as f64 + high as f64) / 2.0;
                (mid(self.range(input, false)), mid(self.range(output, true)))
            }
        }
    }

    /// The longest `(prompt, output)` a request can draw.
    pub fn longest(&self, input: u64, output: u64) -> (u64, u64) {
        (self.range(input, false).1, self.range(output, true).1)
    }

    /// The distribution's name: `fixed`, `sglang-random`, `vllm-random` or `listed`.
    pub fn name(&self) -> &'static str {
        match self {
            Lengths::Fixed => "fixed",
            Lengths::SglangRandom { .. } => "sglang-random",
            Lengths::VllmRandom { .. } => "vllm-random",
            Lengths::Listed { .. } => "listed",
        }
    }

    /// The rule the simulated lengths follow (a line of a prediction's `rules`), or `None`
    /// for fixed lengths (whose rules are today's).
    pub fn rule(&self) -> Option<&'static str> {
        match self {
            Lengths::Fixed => None,
            Lengths::SglangRandom { .. } => Some(
                "lengths = SGLang's random dataset (python/sglang/bench_serving.py, compute_random_lens; --random-range-ratio R, default 0; --seed S, default 1): each prompt's and output's tokens uniform among the integers of [max(floor(L x R), 1), L], L = the serving point's input and output tokens, drawn as the benchmark draws them (numpy's np.random.seed(S), then randint for the N prompts, then for the N outputs; MT19937 with masked rejection): the benchmark's own lengths for a run of N = the simulated requests; the linear figures (prefill, decode step, by kind) are at the mean lengths",
            ),
            Lengths::VllmRandom { .. } => Some(
                "lengths = vLLM's random dataset (vllm bench serve, vllm/benchmarks/datasets.py since PR #16126; --random-range-ratio R in [0, 1), default 0): request k's prompt and output tokens each uniform among the integers of [floor(L x (1 - R)), ceil(L x (1 + R))] (output at least 1), L = the serving point's input and output tokens, drawn by splitmix64 from k (the same draws every run; the distribution of vLLM's draws, not its sample); the linear figures (prefill, decode step, by kind) are at the mean lengths",
            ),
            Lengths::Listed { .. } => Some(
                "lengths = a benchmark's own requests in the order sent (a result file's per-request input_lens and output_lens; request k of a longer run takes entry k mod n); a response of 0 tokens runs as 1 token and counts 0 s to the mean TTFT, as vLLM's benchmark_serving.py records a request that streamed nothing; the linear figures (prefill, decode step, by kind) are at the mean lengths",
            ),
        }
    }
}

fn bad(message: String) -> PerfError {
    PerfError::ServingPoint {
        flag: "--lengths".to_owned(),
        message,
    }
}

impl Serialize for Lengths {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Lengths::Fixed => {
                let mut s = serializer.serialize_struct("Lengths", 1)?;
                s.serialize_field("kind", "fixed")?;
                s.end()
            }
            Lengths::SglangRandom { range_ratio, seed } => {
                let mut s = serializer.serialize_struct("Lengths", 3)?;
                s.serialize_field("kind", self.name())?;
                s.serialize_field("range_ratio", range_ratio)?;
                s.serialize_field("seed", seed)?;
                s.end()
            }
            Lengths::VllmRandom { range_ratio } => {
                let mut s = serializer.serialize_struct("Lengths", 2)?;
                s.serialize_field("kind", self.name())?;
                s.serialize_field("range_ratio", range_ratio)?;
                s.end()
            }
            // The list itself stays out of a prediction: its size and means say what ran.
            Lengths::Listed { requests, source } => {
                let (input, output) = self.mean(0, 0);
                let mut s = serializer.serialize_struct("Lengths", 5)?;
                s.serialize_field("kind", "listed")?;
                s.serialize_field("requests", &requests.len())?;
                s.serialize_field("mean_input_tokens", &input)?;
                s.serialize_field("mean_output_tokens", &output)?;
                s.serialize_field("source", source)?;
                s.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_parse_and_bad_ones_name_the_flag() {
        assert_eq!(Lengths::parse("fixed").unwrap(), Lengths::Fixed);
        assert_eq!(
            Lengths::parse("sglang").unwrap(),
            Lengths::SglangRandom {
                range_ratio: 0.0,
                seed: 1
            }
        );
        assert_eq!(
            Lengths::parse("sglang:0.5:7").unwrap(),
            Lengths::SglangRandom {
                range_ratio: 0.5,
                seed: 7
            }
        );
        assert_eq!(
            Lengths::parse("vllm:0.25").unwrap(),
            Lengths::VllmRandom { range_ratio: 0.25 }
        );
        for bad in [
            "sglang:1.5",
            "vllm:1",
            "sglang:-0.1",
            "sglang:x",
            "uniform",
            "fixed:0",
        ] {
            let e = Lengths::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("--lengths: "), "{bad}: {e}");
        }
    }

    #[test]
    fn ranges_follow_the_benchmarks() {
        let s = Lengths::SglangRandom {
            range_ratio: 0.0,
            seed: 1,
        };
        assert_eq!(s.range(1000, false), (1, 1000));
        assert_eq!(s.range(1000, true), (1, 1000));
        let s = Lengths::SglangRandom {
            range_ratio: 0.5,
            seed: 1,
        };
        assert_eq!(s.range(1001, false), (500, 1001));
        let v = Lengths::VllmRandom { range_ratio: 0.3 };
        assert_eq!(v.range(128, false), (89, 167));
        let v = Lengths::VllmRandom { range_ratio: 0.0 };
        assert_eq!(v.range(128, true), (128, 128));
    }

    #[test]
    fn mt19937_is_the_reference_generator() {
        // The reference implementation's first outputs for init_genrand(5489) (mt19937ar.c;
        // also C++ std::mt19937's default seed, whose 10000th output is 4123659995).
        let mut mt = Mt19937::new(5489);
        assert_eq!(mt.next_u32(), 3_499_211_612);
        assert_eq!(mt.next_u32(), 581_869_302);
        let mut mt = Mt19937::new(5489);
        let tenth_thousand = (0..10_000).map(|_| mt.next_u32()).last();
        assert_eq!(tenth_thousand, Some(4_123_659_995));
    }

    #[test]
    fn uniform_reaches_both_ends() {
        assert_eq!(uniform(0, 5, 9), 5);
        assert_eq!(uniform(u64::MAX, 5, 9), 9);
        assert_eq!(uniform(u64::MAX, 7, 7), 7);
    }
}
