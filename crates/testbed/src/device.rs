//! The one place that chooses devices, for the tests, the benches and `cargo repro`. GPU
//! devices are asked for at run time: `Device::new_cuda` and `Device::new_metal` compile without
//! the `cuda` and `metal` features and say so when called.

use candle::Device;

/// The CPU, then every accelerator there is; prints why each missing one is skipped.
pub fn all_available() -> Vec<(&'static str, Device)> {
    let mut devices = vec![("cpu", Device::Cpu)];
    for name in ["cuda", "metal"] {
        match by_name(name) {
            Ok(device) => devices.push((name, device)),
            Err(reason) => crate::announce(&format!("skipped {name}: {reason}")),
        }
    }
    devices
}

/// The device named `name` (`cpu`, `cuda` or `metal`).
pub fn by_name(name: &str) -> candle::Result<Device> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "cuda" => Device::new_cuda(0),
        "metal" => Device::new_metal(0),
        other => candle::bail!("device must be cpu, cuda or metal, got {other}"),
    }
}
