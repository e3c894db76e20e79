//! `lynx roofline`: the device's ceilings.

use lynx_runner::{devices, libtorch};
use lynx_schema::device::DeviceName;

pub fn run(device: Option<DeviceName>, sustained_s: f64, json: bool) -> anyhow::Result<()> {
    let host = lynx_runner::host_record();
    let device = match device {
        Some(name) => devices::find(name, &host)?,
        None => devices::best(&host),
    };
    let _inference = libtorch::InferenceMode::enter();
    lynx_runner::supervisor::catch_stop_signals();
    let plan = lynx_probes::roofline::ProbePlan {
        precision: None,
        sustained_s: Some(sustained_s).filter(|&s| s > 0.0),
        stop: &lynx_runner::supervisor::STOP,
    };
    let target = device.probe_target();
    let mut record = lynx_probes::roofline::burst(&target, &plan);
    if !lynx_probes::roofline::sustained(&target, &plan, &mut record) {
        let signal = lynx_runner::supervisor::stop_signal().unwrap_or(libc::SIGTERM);
        esayln!("lynx: roofline: stopped by signal {signal} during the sustained probe; nothing printed");
        return Err(crate::Exit(128 + signal as u8).into());
    }
    if json {
        sayln!("{}", serde_json::to_string_pretty(&record)?);
    } else {
        sayln!("{} ({})", device.record.device, device.record.name);
        say!("{}", lynx_report::text::roofline_table(&record));
    }
    Ok(())
}
