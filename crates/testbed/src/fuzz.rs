//! One fuzz case: arbitrary bytes read as logits and a way to build a `LogitsProcessor`, and
//! what the patched sampler must do with them: no panic; a token that is no masked (`-inf`) or
//! NaN logit, and at a greedy temperature the largest (`+inf` included); errors of ours only,
//! those that the sampler raises itself ([`Outcome::Refused`]), whatever they say.
//! The cargo-fuzz target (crates/fuzz) calls [`check`]; `cargo test` replays the committed
//! corpus through it (tests/testsuite/fuzz_corpus.rs).

use candle::{DType, Device, Tensor};

use crate::cases::Build;
use crate::fixture::f32s;
use crate::sampler::{self, Implementation, Outcome, Patched};

/// Temperatures and top-p values worth trying, picked by one byte when a flag says so; the
/// other bytes give any f64, NaN and infinities included.
const SPECIAL: [f64; 14] = [
    0.0,
    -0.0,
    1e-7,
    9.99e-8,
    1.0,
    0.8,
    2.0,
    1e-38,
    f64::MIN_POSITIVE,
    -1.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e46,
];

/// The most logits one case reads.
const MAX_LOGITS: usize = 1 << 16;

/// A decoded case.
#[derive(Debug, Clone)]
pub struct Input {
    pub build: Build,
    pub seed: u64,
    pub dtype: DType,
    /// 0: 1-D; 1: `[1, n]`; 2: 0-D (the first value).
    pub shape: u8,
    pub values: Vec<f32>,
}

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        let n = N.min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }

    fn number(&mut self, special: bool) -> f64 {
        let bytes = self.take::<8>();
        if special {
            SPECIAL[bytes[0] as usize % SPECIAL.len()]
        } else {
            f64::from_le_bytes(bytes)
        }
    }
}

/// Reads a case: a variant byte, a flags byte, temperature, top-p, k, seed, then logits as
/// little-endian f32 (at most 65536).
pub fn decode(data: &[u8]) -> Input {
    let mut bytes = Bytes(data);
    let [variant, flags] = bytes.take::<2>();
    let temperature = bytes.number(flags & 0x10 != 0);
    let p = bytes.number(flags & 0x20 != 0);
    let k = u32::from_le_bytes(bytes.take::<4>()) as usize;
    let seed = u64::from_le_bytes(bytes.take::<8>());
    let values: Vec<f32> = f32s(bytes.0).take(MAX_LOGITS).collect();
    // Each `Sampling`, then `LogitsProcessor::new`.
    let samplings = sampler::all_samplings(temperature, k, p);
    let build = match usize::from(variant) % (samplings.len() + 1) {
        index if index < samplings.len() => Build::FromSampling(samplings[index].clone()),
        _ => Build::New {
            temperature: (flags & 0x40 == 0).then_some(temperature),
            top_p: (flags & 0x80 == 0).then_some(p),
        },
    };
    let dtype = [DType::F32, DType::F16, DType::BF16, DType::F32][(flags & 0x03) as usize];
    Input {
        build,
        seed,
        dtype,
        shape: ((flags >> 2) & 0x03) % 3,
        values,
    }
}

impl Input {
    /// Whether the processor samples greedily: `ArgMax`, or a temperature below 1e-7.
    fn is_greedy(&self) -> bool {
        let temperature = match &self.build {
            Build::FromSampling(sampling) => sampler::temperature(sampling),
            Build::New { temperature, .. } => *temperature,
        };
        temperature.is_none_or(|t| t < 1e-7)
    }

    fn tensor(&self) -> candle::Result<Tensor> {
        let values = Tensor::from_slice(&self.values, self.values.len(), &Device::Cpu)?;
        let values = values.to_dtype(self.dtype)?;
        match self.shape {
            0 => Ok(values),
            1 => values.unsqueeze(0),
            _ if self.values.is_empty() => Ok(values),
            _ => values.get(0),
        }
    }
}

/// Runs the patched sampler on `data`'s case; `Err` says which promise it broke. A panic is
/// left to propagate, so that libFuzzer and `cargo test` both report it.
pub fn check(data: &[u8]) -> Result<(), String> {
    check_with(Patched, data)
}

/// [`check`] on either implementation: upstream breaks these promises, which shows that the
/// corpus and the checks can tell.
pub fn check_with(implementation: Implementation, data: &[u8]) -> Result<(), String> {
    let case = decode(data);
    let logits = case
        .tensor()
        .map_err(|e| format!("building the case: {e}"))?;
    let mut processor = case.build.processor(implementation, case.seed);
    let outcome = Outcome::from(processor.sample(&logits));
    // What the sampler sees: the values after the round trip through the case's dtype.
    let seen: Vec<f32> = logits
        .flatten_all()
        .and_then(|t| t.to_dtype(DType::F32)?.to_vec1())
        .map_err(|e| format!("reading the case back: {e}"))?;
    match outcome {
        Outcome::Token(token) => {
            let token = token as usize;
            if case.shape != 0 || seen.is_empty() {
                return Err(format!("{case:?}: a token from logits of the wrong shape"));
            }
            let Some(&logit) = seen.get(token) else {
                return Err(format!("token {token} out of {} logits", seen.len()));
            };
            // Never a masked token or a NaN, greedy picks included; +inf only as the largest
            // logit of a greedy pick.
            if logit.is_nan()
                || logit == f32::NEG_INFINITY
                || (logit.is_infinite() && !case.is_greedy())
            {
                return Err(format!("token {token} has logit {logit}: {:?}", case.build));
            }
            // `f32::max` passes over NaN.
            let largest = seen.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            if case.is_greedy() && logit != largest {
                return Err(format!(
                    "greedy {:?} picked {token} ({logit}), not the largest {largest}",
                    case.build
                ));
            }
            Ok(())
        }
        // An error that the sampler raised itself, whatever its text: the patches' messages
        // live in the patches alone. rand's refusal and candle's shape errors are findings.
        Outcome::Refused(_) => Ok(()),
        Outcome::Error(message) => Err(format!(
            "{:?}: not one of our errors: {message}",
            case.build
        )),
        Outcome::Panic(message) => Err(format!("{:?}: panicked: {message}", case.build)),
    }
}
