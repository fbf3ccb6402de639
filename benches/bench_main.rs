//! `sample` on real logits, the published point beside the whole series and, on the CPU, the
//! floor, per comparison and vocabulary; `cargo xtask bench-report` times the points between.

use benches::{comparisons, floor, logits, time_calls, SEED, VOCAB_SIZES};
use candle::Device;
use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use repro::decode::{DecodeLoop, NEEDS_THE_MODEL, TOKENS};
use shared::{PUBLISHED_POINT, SERIES_POINT};
use testbed::fixture::Fixture;

fn run_sampling(c: &mut Criterion) {
    let fixture = Fixture::load().unwrap();
    // Groups are named after the device, as in candle's own benches, so that one report can
    // hold several.
    for (name, device) in testbed::device::all_available() {
        for comparison in comparisons() {
            let mut group = c.benchmark_group(format!("{name}_{}", comparison.group));
            for vocab in VOCAB_SIZES {
                let logits = logits(&fixture, vocab, &device).unwrap();
                group.throughput(Throughput::Elements(vocab as u64));
                for point in [PUBLISHED_POINT, SERIES_POINT] {
                    let mut processor = comparison.processor(point).unwrap();
                    group.bench_function(BenchmarkId::new(point, vocab), |b| {
                        b.iter_custom(|iters| {
                            time_calls(&mut processor, &logits, &device, iters).unwrap()
                        })
                    });
                }
                if device.is_cpu() {
                    let host = logits.to_vec1::<f32>().unwrap();
                    let mut scratch = floor::Scratch::default();
                    let mut rng = rand::rngs::StdRng::seed_from_u64(SEED);
                    let sampling = &comparison.upstream;
                    group.bench_function(BenchmarkId::new("floor", vocab), |b| {
                        b.iter(|| floor::sample(sampling, &host, &mut scratch, &mut rng))
                    });
                }
            }
            group.finish();
        }
    }
}

/// What each step of upstream's `sample` costs at 49152 tokens, on the CPU.
fn run_profile(c: &mut Criterion) {
    let fixture = Fixture::load().unwrap();
    let logits = fixture.tensor(&Device::Cpu).unwrap();
    let scaled = (&logits / 0.8).unwrap();
    let probabilities = candle_nn::ops::softmax_last_dim(&scaled).unwrap();
    let host: Vec<f32> = probabilities.to_vec1().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(SEED);
    let mut group = c.benchmark_group("cpu_profile");
    group.throughput(Throughput::Elements(host.len() as u64));
    group.bench_function("argmax", |b| {
        b.iter(|| logits.argmax(0).unwrap().to_scalar::<u32>().unwrap())
    });
    group.bench_function("divide", |b| b.iter(|| (&logits / 0.8).unwrap()));
    group.bench_function("softmax", |b| {
        b.iter(|| candle_nn::ops::softmax_last_dim(&scaled).unwrap())
    });
    group.bench_function("to_host", |b| {
        b.iter(|| probabilities.to_vec1::<f32>().unwrap())
    });
    group.bench_function("select_top_40", |b| {
        b.iter(|| {
            let mut indices: Vec<usize> = (0..host.len()).collect();
            indices.select_nth_unstable_by(40, |&i, &j| host[j].total_cmp(&host[i]));
            indices.truncate(40);
            indices
        })
    });
    group.bench_function("sort_for_top_p", |b| {
        b.iter(|| {
            let mut indices: Vec<usize> = (0..host.len()).collect();
            indices.sort_by(|&i, &j| host[j].total_cmp(&host[i]));
            indices
        })
    });
    group.bench_function("weighted_draw", |b| {
        b.iter(|| rng.sample(rand::distr::weighted::WeightedIndex::new(&host).unwrap()))
    });
    group.finish();
}

/// The decode loop on the published point and the whole series; skipped without the model.
fn run_decode(c: &mut Criterion) {
    let Some(mut decode) = DecodeLoop::load().unwrap() else {
        testbed::announce(&format!("skipped cpu_decode: {NEEDS_THE_MODEL}"));
        return;
    };
    let mut group = c.benchmark_group("cpu_decode");
    group.throughput(Throughput::Elements(TOKENS as u64));
    group.sample_size(10);
    for comparison in comparisons() {
        for point in [PUBLISHED_POINT, SERIES_POINT] {
            let mut processor = comparison.processor(point).unwrap();
            group.bench_function(BenchmarkId::new(point, comparison.group), |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| decode.generate(&mut processor, TOKENS).unwrap().total)
                        .sum()
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = decode;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(8));
    targets = run_decode
}

criterion_group! {
    name = benches;
    // 7 comparisons x 4 vocabularies x 3 functions: criterion's 3 s + 5 s each would take 11
    // minutes. The report's ratios come from paired rounds; these medians only place each side.
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = run_sampling
}
criterion_group!(profile, run_profile);

criterion::criterion_main!(benches, profile, decode);
