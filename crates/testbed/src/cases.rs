//! The bug report's scenario: each way it built a `LogitsProcessor`, for `cargo repro`'s table and
//! the regression tests, which run every case on both implementations.

use candle::Tensor;

use crate::sampler::{Implementation, Outcome, Processor, Sampling};

/// How a case builds its `LogitsProcessor`.
#[derive(Clone, Debug, PartialEq)]
pub enum Build {
    FromSampling(Sampling),
    New {
        temperature: Option<f64>,
        top_p: Option<f64>,
    },
}

impl Build {
    pub fn processor(&self, implementation: Implementation, seed: u64) -> Processor {
        match self {
            Build::FromSampling(sampling) => implementation.from_sampling(seed, sampling),
            Build::New { temperature, top_p } => {
                implementation.new_processor(seed, *temperature, *top_p)
            }
        }
    }

    /// The first token `implementation` samples, or its error, or its panic.
    pub fn run(&self, implementation: Implementation, seed: u64, logits: &Tensor) -> Outcome {
        let mut processor = self.processor(implementation, seed);
        Outcome::of(|| processor.sample(logits))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub label: String,
    pub build: Build,
}

impl Case {
    fn from_sampling(sampling: Sampling) -> Case {
        Case {
            label: format!("{sampling:?}"),
            build: Build::FromSampling(sampling),
        }
    }

    /// The first token `implementation` samples for this case.
    pub fn run(&self, implementation: Implementation, seed: u64, logits: &Tensor) -> Outcome {
        self.build.run(implementation, seed, logits)
    }
}

/// Every variant that takes a temperature, with the bug report's k = 40 and p = 0.9, in its
/// order: its headline case, `TopK`, first.
pub fn variants(temperature: f64) -> Vec<Sampling> {
    let mut variants: Vec<Sampling> = crate::sampler::all_samplings(temperature, 40, 0.9)
        .into_iter()
        .filter(|s| crate::sampler::temperature(s).is_some())
        .collect();
    // A stable sort: the others keep their order.
    variants.sort_by_key(|s| !matches!(s, Sampling::TopK { .. }));
    variants
}

/// Every case of the bug report, in its order.
pub fn bug_report() -> Vec<Case> {
    let mut cases: Vec<Case> = variants(0.0).into_iter().map(Case::from_sampling).collect();
    for temperature in [1e-3, 1e-7, 1e-30, 1e-38, f64::MIN_POSITIVE, -0.0, -1.0] {
        let mut case = Case::from_sampling(Sampling::All { temperature });
        if temperature == f64::MIN_POSITIVE {
            case.label = "All { temperature: f64::MIN_POSITIVE }".to_string();
        }
        cases.push(case);
    }
    cases.push(Case {
        label: "LogitsProcessor::new(seed, Some(0.0), None)".to_string(),
        build: Build::New {
            temperature: Some(0.0),
            top_p: None,
        },
    });
    // What a CLI does with `--temperature` and `--top-k` once it applies the bug report's fix at
    // the call site, as candle's own examples do.
    for (temperature, top_k) in [(0.0, Some(40)), (0.0, None), (0.8, Some(40))] {
        let sampling = match top_k {
            _ if temperature <= 0.0 => Sampling::ArgMax,
            None => Sampling::All { temperature },
            Some(k) => Sampling::TopK { k, temperature },
        };
        cases.push(Case {
            label: format!(
                "guarded at the call site (t {temperature:?}, top-k {top_k:?}): {sampling:?}"
            ),
            build: Build::FromSampling(sampling),
        });
    }
    cases
}
