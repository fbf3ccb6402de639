//! The one place that chooses devices, for the tests, the benches and `cargo repro`. GPU
//! devices are asked for at run time: `Device::new_cuda` and `Device::new_metal` compile without
//! the `cuda` and `metal` features and say so when called.

use candle::Device;

/// A device to run on, or why it is not there.
pub struct Available {
    pub name: &'static str,
    pub device: Result<Device, String>,
}

/// Every accelerator candle knows, each with the device or the reason it is missing.
pub fn accelerators() -> Vec<Available> {
    vec![
        Available {
            name: "cuda",
            device: Device::new_cuda(0).map_err(|e| e.to_string()),
        },
        Available {
            name: "metal",
            device: Device::new_metal(0).map_err(|e| e.to_string()),
        },
    ]
}

/// The CPU, then every accelerator there is; prints why each missing one is skipped.
pub fn all_available() -> Vec<(&'static str, Device)> {
    let mut devices = vec![("cpu", Device::Cpu)];
    for available in accelerators() {
        match available.device {
            Ok(device) => devices.push((available.name, device)),
            Err(reason) => crate::announce(&format!("skipped {}: {reason}", available.name)),
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

/// Waits for the device's queued work, so that a clock read after it measures the work.
pub fn sync(device: &Device) -> candle::Result<()> {
    device.synchronize()
}
