pub(crate) mod sampling;

use candle::Device;

/// The device helper of candle's own benches: names prefixed with the device, so one report can
/// hold several. The sync before each reading of the clock is in `benches::time_calls`, which
/// `bench-driver` times with too.
pub(crate) trait BenchDevice {
    fn bench_name<S: Into<String>>(&self, name: S) -> String;
}

impl BenchDevice for Device {
    fn bench_name<S: Into<String>>(&self, name: S) -> String {
        let prefix = match self {
            Device::Cpu => "cpu",
            Device::Cuda(_) => "cuda",
            Device::Metal(_) => "metal",
        };
        format!("{prefix}_{}", name.into())
    }
}

/// The CPU and each accelerator there is (testbed decides, and says why one is missing).
pub(crate) fn devices() -> Vec<Device> {
    testbed::device::all_available()
        .into_iter()
        .map(|(_, device)| device)
        .collect()
}
