mod benchmarks;

criterion::criterion_main!(
    benchmarks::sampling::benches,
    benchmarks::sampling::profile,
    benchmarks::sampling::decode
);
