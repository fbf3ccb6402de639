//! Every bad input that upstream turns into rand's message, a panic or a meaningless token, on
//! SmolLM2's real logits: upstream's outcome beside the patched one, for each.

use candle::{DType, Device, Result, Tensor};
use testbed::cases::Build;
use testbed::fixture::Fixture;
use testbed::sampler::{Outcome, Patched, Sampling, Upstream, RAND_INVALID_WEIGHT};

const GREEDY: u32 = 66;

/// What a row expects of one implementation.
#[derive(Debug)]
enum Expect {
    Token(u32),
    /// Some token that is not this one: upstream's arbitrary picks.
    NotToken(u32),
    /// An error that rand or candle raised and the sampler passed on, whose message starts with
    /// this: upstream's texts, which no patch writes.
    Error(&'static str),
    /// An error that the sampler raised itself, whose message names each of `names` and gives
    /// each of `values`, in whatever words its patch chose: what the patches promise of an error,
    /// not its text, which lives in the patch alone.
    Refused {
        names: &'static [&'static str],
        values: Vec<f64>,
    },
    /// A panic whose message contains one of these.
    Panic(&'static [&'static str]),
}

fn refused(names: &'static [&'static str], values: &[f64]) -> Expect {
    Expect::Refused {
        names,
        values: values.to_vec(),
    }
}

/// The numbers that `message` writes, as words of their own, a full stop after one included:
/// `3`, `49152`, `1e-6`, `8e-1`, `NaN`, `inf`, `+inf`, `-inf` (Rust's `f64` parses each of them,
/// the last four in any case).
fn numbers(message: &str) -> Vec<f64> {
    message
        .split(|c: char| c.is_whitespace() || ",:;()[]`".contains(c))
        .filter_map(|word| word.trim_end_matches('.').parse::<f64>().ok())
        .collect()
}

impl Expect {
    fn matches(&self, outcome: &Outcome) -> bool {
        match (self, outcome) {
            (Expect::Token(want), Outcome::Token(got)) => want == got,
            (Expect::NotToken(other), Outcome::Token(got)) => other != got,
            (Expect::Error(start), Outcome::Error(message)) => message.starts_with(start),
            (Expect::Refused { names, values }, Outcome::Refused(message)) => {
                let written = numbers(message);
                let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
                names.iter().all(|name| message.contains(name))
                    && values
                        .iter()
                        .all(|&value| written.iter().any(|&number| same(number, value)))
            }
            (Expect::Panic(parts), Outcome::Panic(message)) => {
                parts.iter().any(|part| message.contains(part))
            }
            _ => false,
        }
    }
}

struct Row {
    label: &'static str,
    logits: Tensor,
    build: Build,
    upstream: Expect,
    patched: Expect,
}

fn sample(sampling: Sampling) -> Build {
    Build::FromSampling(sampling)
}

/// The fixture's logits with `edit` applied.
fn edited(fixture: &Fixture, edit: impl Fn(&mut Vec<f32>)) -> Result<Tensor> {
    let mut values = fixture.logits.clone();
    edit(&mut values);
    let len = values.len();
    Tensor::from_vec(values, len, &Device::Cpu)
}

fn rows(fixture: &Fixture) -> Result<Vec<Row>> {
    let real = fixture.tensor(&Device::Cpu)?;
    let nan_first = edited(fixture, |v| v[0] = f32::NAN)?;
    let three_nan = edited(fixture, |v| {
        [0, 100, 30_000].into_iter().for_each(|i| v[i] = f32::NAN)
    })?;
    let all_nan = edited(fixture, |v| v.fill(f32::NAN))?;
    let nan_later = edited(fixture, |v| v[30_000] = f32::NAN)?;
    let plus_inf = edited(fixture, |v| v[500] = f32::INFINITY)?;
    let plus_inf_gumbel = plus_inf.clone();
    let masked = edited(fixture, |v| v.fill(f32::NEG_INFINITY))?;
    let masked_half = edited(fixture, |v| v[..24_576].fill(f32::NEG_INFINITY))?;
    let huge = edited(fixture, |v| v.iter_mut().for_each(|x| *x *= 1e32))?;
    // 3000 times the real logits: the top ones pass f16's largest value, 65504.
    let f16_overflow = (&real * 3000.0)?.to_dtype(DType::F16)?;
    let f16_values = f16_overflow.to_dtype(DType::F32)?.to_vec1::<f32>()?;
    let first_f16_inf = f16_values
        .iter()
        .position(|v| *v == f32::INFINITY)
        .expect("3000 times the logits overflow f16") as u32;
    assert_ne!(first_f16_inf, GREEDY);
    let f16_infs = f16_values.iter().filter(|v| **v == f32::INFINITY).count() as f64;
    let empty = Tensor::new(&[0f32; 0], &Device::Cpu)?;
    let scalar = Tensor::new(1f32, &Device::Cpu)?;
    let batch = real.unsqueeze(0)?;
    let t = 0.8;
    Ok(vec![
        Row {
            label: "NaN temperature",
            logits: real.clone(),
            build: sample(Sampling::All {
                temperature: f64::NAN,
            }),
            upstream: Expect::Error(RAND_INVALID_WEIGHT),
            patched: refused(&["temperature"], &[f64::NAN]),
        },
        Row {
            label: "NaN temperature, GumbelSoftmax",
            logits: real.clone(),
            build: sample(Sampling::GumbelSoftmax {
                temperature: f64::NAN,
            }),
            upstream: Expect::Token(0),
            patched: refused(&["temperature"], &[f64::NAN]),
        },
        Row {
            label: "NaN temperature through new",
            logits: real.clone(),
            build: Build::New {
                temperature: Some(f64::NAN),
                top_p: None,
            },
            upstream: Expect::Error(RAND_INVALID_WEIGHT),
            patched: refused(&["temperature"], &[f64::NAN]),
        },
        Row {
            label: "+inf temperature",
            logits: real.clone(),
            build: sample(Sampling::TopK {
                k: 40,
                temperature: f64::INFINITY,
            }),
            // 1 / inf is 0: every logit is 0, and the draw is uniform, as the limit says.
            upstream: Expect::NotToken(GREEDY),
            patched: Expect::NotToken(GREEDY),
        },
        Row {
            // 1 / 1e46 rounds to zero in f32: -inf * 0 is NaN.
            label: "temperature 1e46, some tokens masked",
            logits: masked_half.clone(),
            build: sample(Sampling::All { temperature: 1e46 }),
            upstream: Expect::Error(RAND_INVALID_WEIGHT),
            patched: refused(&["temperature"], &[1e46, 24_576.0, 49_152.0]),
        },
        Row {
            label: "-inf temperature",
            logits: real.clone(),
            build: sample(Sampling::All {
                temperature: f64::NEG_INFINITY,
            }),
            upstream: Expect::NotToken(GREEDY),
            patched: Expect::Token(GREEDY),
        },
        Row {
            // Documented: ArgMax is candle's argmax, which answers token 0 for a NaN first.
            label: "NaN first, ArgMax",
            logits: nan_first.clone(),
            build: sample(Sampling::ArgMax),
            upstream: Expect::Token(0),
            patched: refused(&["logit", "NaN"], &[0.0]),
        },
        Row {
            label: "all NaN, ArgMax",
            logits: all_nan,
            build: sample(Sampling::ArgMax),
            upstream: Expect::Token(0),
            patched: refused(&["logit", "NaN"], &[0.0]),
        },
        Row {
            label: "NaN first, GumbelSoftmax",
            logits: nan_first,
            build: sample(Sampling::GumbelSoftmax { temperature: t }),
            upstream: Expect::Token(0),
            patched: refused(&[], &[0.0, f64::NAN]),
        },
        Row {
            label: "3 NaN, All",
            logits: three_nan.clone(),
            build: sample(Sampling::All { temperature: t }),
            upstream: Expect::Error(RAND_INVALID_WEIGHT),
            patched: refused(&[], &[3.0, f64::NAN, 49_152.0]),
        },
        Row {
            label: "3 NaN, TopKThenTopP",
            logits: three_nan,
            build: sample(Sampling::TopKThenTopP {
                k: 40,
                p: 0.9,
                temperature: t,
            }),
            upstream: Expect::Error(RAND_INVALID_WEIGHT),
            patched: refused(&[], &[3.0, f64::NAN, 49_152.0]),
        },
        Row {
            // Upstream's argmax skips a NaN after the first logit, and picks a token as if the
            // NaN were not there; the patched CPU path sees every logit, as softmax does.
            label: "a later NaN, GumbelSoftmax",
            logits: nan_later.clone(),
            build: sample(Sampling::GumbelSoftmax { temperature: t }),
            upstream: Expect::NotToken(30_000),
            patched: refused(&[], &[30_000.0, f64::NAN]),
        },
        Row {
            // Documented: ArgMax reads only the logit it picks, and argmax skips a later NaN.
            label: "a later NaN, ArgMax",
            logits: nan_later,
            build: sample(Sampling::ArgMax),
            upstream: Expect::Token(GREEDY),
            patched: Expect::Token(GREEDY),
        },
        Row {
            // Documented: +inf is the largest logit.
            label: "+inf logit, ArgMax",
            logits: plus_inf.clone(),
            build: sample(Sampling::ArgMax),
            upstream: Expect::Token(500),
            patched: Expect::Token(500),
        },
        Row {
            label: "+inf logit, TopP",
            logits: plus_inf,
            build: sample(Sampling::TopP {
                p: 0.9,
                temperature: t,
            }),
            upstream: Expect::Error(RAND_INVALID_WEIGHT),
            patched: refused(&[], &[1.0, f64::INFINITY, 49_152.0]),
        },
        Row {
            // Documented: ArgMax is candle's argmax, which answers token 0 when all are -inf.
            label: "all -inf, ArgMax",
            logits: masked.clone(),
            build: sample(Sampling::ArgMax),
            upstream: Expect::Token(0),
            patched: refused(&["logits", "-inf"], &[49_152.0]),
        },
        Row {
            label: "all -inf, TopK",
            logits: masked,
            build: sample(Sampling::TopK {
                k: 40,
                temperature: t,
            }),
            upstream: Expect::Error(RAND_INVALID_WEIGHT),
            patched: refused(&[], &[49_152.0, f64::NEG_INFINITY]),
        },
        Row {
            label: "f16 logits beyond 65504, All",
            logits: f16_overflow.clone(),
            build: sample(Sampling::All { temperature: t }),
            upstream: Expect::Error(RAND_INVALID_WEIGHT),
            patched: refused(&[], &[f16_infs, f64::INFINITY, 49_152.0]),
        },
        Row {
            // Documented: the first of the logits that overflowed to +inf.
            label: "f16 logits beyond 65504, ArgMax",
            logits: f16_overflow,
            build: sample(Sampling::ArgMax),
            upstream: Expect::Token(first_f16_inf),
            patched: Expect::Token(first_f16_inf),
        },
        Row {
            label: "logits / temperature overflow f32",
            logits: huge,
            build: sample(Sampling::All { temperature: 1e-6 }),
            upstream: Expect::Error(RAND_INVALID_WEIGHT),
            patched: refused(&["temperature"], &[1e-6, 48_409.0, 49_152.0]),
        },
        Row {
            label: "TopK k = 0",
            logits: real.clone(),
            build: sample(Sampling::TopK {
                k: 0,
                temperature: t,
            }),
            upstream: Expect::Error("Weights sequence is empty/too long/unordered"),
            patched: Expect::Token(GREEDY),
        },
        Row {
            label: "TopKThenTopP k = 0, p = 0",
            logits: real.clone(),
            build: sample(Sampling::TopKThenTopP {
                k: 0,
                p: 0.0,
                temperature: t,
            }),
            upstream: Expect::Error("Weights sequence is empty/too long/unordered"),
            patched: Expect::Token(GREEDY),
        },
        Row {
            label: "TopKThenTopP k = vocabulary, p = 0",
            logits: real.clone(),
            build: sample(Sampling::TopKThenTopP {
                k: 49152,
                p: 0.0,
                temperature: t,
            }),
            upstream: Expect::Error("Not enough weights > zero"),
            patched: Expect::Token(GREEDY),
        },
        Row {
            label: "NaN top-p",
            logits: real.clone(),
            build: sample(Sampling::TopP {
                p: f64::NAN,
                temperature: t,
            }),
            upstream: Expect::Token(GREEDY),
            patched: refused(&["top-p"], &[f64::NAN]),
        },
        Row {
            // 1e-50 is 0 in f32: top-p is off rather than every token clamped.
            label: "top-p 1e-50",
            logits: real.clone(),
            build: sample(Sampling::TopP {
                p: 1e-50,
                temperature: t,
            }),
            upstream: Expect::Error("Not enough weights > zero"),
            patched: Expect::Token(GREEDY),
        },
        Row {
            // Documented: p outside (0, 1) turns top-p off, as it did.
            label: "top-p 1.5",
            logits: real.clone(),
            build: sample(Sampling::TopP {
                p: 1.5,
                temperature: t,
            }),
            upstream: Expect::Token(GREEDY),
            patched: Expect::Token(GREEDY),
        },
        Row {
            label: "+inf logit, GumbelSoftmax",
            logits: plus_inf_gumbel,
            build: sample(Sampling::GumbelSoftmax { temperature: t }),
            upstream: Expect::Token(500),
            patched: refused(&["temperature"], &[500.0, f64::INFINITY, t]),
        },
        Row {
            label: "empty logits, All",
            logits: empty.clone(),
            build: sample(Sampling::All { temperature: t }),
            upstream: Expect::Panic(&["chunk_size must not be zero"]),
            patched: refused(&["logits", "shape"], &[0.0]),
        },
        Row {
            label: "empty logits, ArgMax",
            logits: empty,
            build: sample(Sampling::ArgMax),
            upstream: Expect::Error("empty tensor for reduce"),
            patched: refused(&["logits", "shape"], &[0.0]),
        },
        Row {
            // An overflow check with debug assertions, an index out of bounds without.
            label: "0-D logits",
            logits: scalar,
            build: sample(Sampling::TopK {
                k: 40,
                temperature: t,
            }),
            upstream: Expect::Panic(&["attempt to subtract with overflow", "index out of bounds"]),
            patched: refused(&["logits", "[]"], &[]),
        },
        Row {
            label: "2-D logits [1, 49152]",
            logits: batch,
            build: sample(Sampling::All { temperature: t }),
            upstream: Expect::Error("unexpected rank"),
            patched: refused(&["logits"], &[1.0, 49_152.0]),
        },
    ])
}

#[test]
fn bad_inputs_upstream_beside_patched() -> Result<()> {
    let fixture = Fixture::load()?;
    let mut mismatches = Vec::new();
    for row in rows(&fixture)? {
        let upstream = row.build.run(Upstream, 42, &row.logits);
        let patched = row.build.run(Patched, 42, &row.logits);
        if !row.upstream.matches(&upstream) {
            mismatches.push(format!(
                "{}: upstream {upstream:?}, expected {:?}",
                row.label, row.upstream
            ));
        }
        if !row.patched.matches(&patched) {
            mismatches.push(format!(
                "{}: patched {patched:?}, expected {:?}",
                row.label, row.patched
            ));
        } else if matches!(patched, Outcome::Error(_) | Outcome::Panic(_)) {
            // A row that expects rand's refusal, candle's error or a panic of the patched
            // sampler is wrong itself: the patches promise none of them.
            mismatches.push(format!(
                "{}: patched {patched:?}, neither a token nor its own error",
                row.label
            ));
        }
    }
    assert!(mismatches.is_empty(), "\n{}", mismatches.join("\n"));
    Ok(())
}

/// `Expect::Refused` holds the sampler to what its errors promise, in any words: raised by the
/// sampler itself, not passed on from rand or candle; the parameter it names; every value and
/// count, in any of the ways Rust writes a number.
#[test]
fn a_refusal_is_told_by_where_it_comes_from_and_what_it_gives() {
    let refusal = |message: &str| Outcome::Refused(message.to_string());
    let nan_temperature = refused(&["temperature"], &[f64::NAN]);
    assert!(nan_temperature.matches(&refusal("the temperature is NaN")));
    assert!(nan_temperature.matches(&refusal("temperature: nan")));
    assert!(!nan_temperature.matches(&Outcome::Error("the temperature is NaN".to_string())));
    assert!(!nan_temperature.matches(&refusal("top-p is NaN")));
    assert!(!nan_temperature.matches(&refusal("the temperature is 0.5")));
    let counted = refused(&[], &[3.0, f64::NAN, 49_152.0]);
    assert!(counted.matches(&refusal("3 of the 49152 logits are NaN.")));
    assert!(!counted.matches(&refusal("2 of the 49152 logits are NaN")));
    assert!(!counted.matches(&refusal("3 of the 49152 logits are +inf")));
    let scaled = refused(&["temperature"], &[500.0, f64::INFINITY, 0.8]);
    assert!(scaled.matches(&refusal("logit 500 is inf at the temperature 8e-1")));
    assert!(scaled.matches(&refusal("logit 500 (+inf), temperature 0.8")));
    assert!(!scaled.matches(&refusal(
        "logit 500 is inf at the temperature 0.800000011920929"
    )));
    assert!(!scaled.matches(&refusal("logit 500 is -inf at the temperature 0.8")));
    let masked = refused(&[], &[f64::NEG_INFINITY]);
    assert!(masked.matches(&refusal("all 4 logits are -inf")));
    assert!(!masked.matches(&refusal("all 4 logits are inf")));
}

/// k = 0 disables top-k: the same tokens as sampling every token, from the same seed.
#[test]
fn top_k_zero_samples_like_all() -> Result<()> {
    let fixture = Fixture::load()?;
    let logits = fixture.tensor(&Device::Cpu)?;
    let mut top_k = Patched.from_sampling(
        42,
        &Sampling::TopK {
            k: 0,
            temperature: 2.0,
        },
    );
    let mut all = Patched.from_sampling(42, &Sampling::All { temperature: 2.0 });
    for _ in 0..1000 {
        assert_eq!(top_k.sample(&logits)?, all.sample(&logits)?);
    }
    Ok(())
}

/// Every class of `sample_f` closure on every sampled variant, upstream beside patched: where
/// upstream returns a token, the patched sampler returns the same token; where upstream fails, or
/// panics on weights that sum to infinity, the patched sampler fails with an error of its own,
/// which names `sample_f` as where the weights that rand cannot draw from come from.
#[test]
fn closures_upstream_beside_patched() -> Result<()> {
    let fixture = Fixture::load()?;
    let logits = fixture.tensor(&Device::Cpu)?;
    // The two least likely tokens: outside every top k and top-p nucleus below.
    let mut order: Vec<usize> = (0..fixture.logits.len()).collect();
    order.sort_by(|&i, &j| fixture.logits[i].total_cmp(&fixture.logits[j]));
    let (least, next) = (order[0], order[1]);
    let t = 0.8;
    let samplings = [
        Sampling::All { temperature: t },
        Sampling::TopK {
            k: 40,
            temperature: t,
        },
        Sampling::TopP {
            p: 0.9,
            temperature: t,
        },
        Sampling::TopKThenTopP {
            k: 40,
            p: 0.9,
            temperature: t,
        },
    ];
    type Edit = Box<dyn Fn(&mut [f32])>;
    let edits: [(&str, Edit); 6] = [
        ("a negative", Box::new(move |prs| prs[least] = -1.0)),
        (
            "two f32::MAX",
            Box::new(move |prs| {
                prs[least] = f32::MAX;
                prs[next] = f32::MAX;
            }),
        ),
        ("one +inf", Box::new(move |prs| prs[least] = f32::INFINITY)),
        ("a NaN", Box::new(move |prs| prs[least] = f32::NAN)),
        ("all zero", Box::new(|prs| prs.fill(0.0))),
        ("all negative", Box::new(|prs| prs.fill(-1.0))),
    ];
    let ours = |message: &str| message.contains("sample_f");
    let mut seen = std::collections::BTreeMap::new();
    for (label, edit) in &edits {
        for sampling in &samplings {
            let mut upstream = Upstream.from_sampling(42, sampling);
            let before = Outcome::of(|| upstream.sample_f(&logits, edit));
            let mut patched = Patched.from_sampling(42, sampling);
            let after = Outcome::of(|| patched.sample_f(&logits, edit));
            let kind = match &before {
                Outcome::Token(token) => {
                    assert_eq!(after, Outcome::Token(*token), "{label}, {sampling:?}");
                    "token"
                }
                Outcome::Error(_) | Outcome::Refused(_) => "error",
                Outcome::Panic(message) => {
                    assert!(
                        message.contains("NonFinite"),
                        "{label}, {sampling:?}: {message}"
                    );
                    "panic"
                }
            };
            if kind != "token" {
                assert!(
                    matches!(&after, Outcome::Refused(message) if ours(message)),
                    "{label}, {sampling:?}: upstream {before:?}, patched {after:?}"
                );
            }
            *seen.entry((*label, kind)).or_insert(0) += 1;
        }
    }
    // Where upstream sampled: a negative outside what top-k and top-p sample from, and two
    // `f32::MAX`, of which top-p keeps only the first. Upstream panicked on an infinite sum.
    let count = |label, kind| seen.get(&(label, kind)).copied().unwrap_or(0);
    assert_eq!(count("a negative", "token"), 3, "{seen:?}");
    assert_eq!(count("two f32::MAX", "token"), 2, "{seen:?}");
    assert_eq!(count("two f32::MAX", "panic"), 2, "{seen:?}");
    assert_eq!(count("one +inf", "panic"), 4, "{seen:?}");
    for label in ["a NaN", "all zero", "all negative"] {
        assert_eq!(count(label, "token"), 0, "{seen:?}");
    }
    Ok(())
}

/// A temperature beyond `f32::MAX` still samples: `1 / 1e39` is a subnormal in f32, not 0, so the
/// masked logits stay `-inf` and the draw is uniform over the others, as upstream's is.
#[test]
fn a_huge_temperature_samples_as_upstream_does() -> Result<()> {
    let fixture = Fixture::load()?;
    let masked_half = edited(&fixture, |v| v[..24_576].fill(f32::NEG_INFINITY))?;
    let sampling = Sampling::All { temperature: 1e39 };
    let upstream = Upstream
        .from_sampling(42, &sampling)
        .stream(&masked_half, 20)?;
    let patched = Patched
        .from_sampling(42, &sampling)
        .stream(&masked_half, 20)?;
    assert_eq!(upstream, patched);
    assert!(patched.iter().all(|&token| token >= 24_576), "{patched:?}");
    Ok(())
}
