//! `lynx devices`: the devices libtorch can use.

use crate::output;
use lynx_runner::{devices, libtorch};

pub fn run(json: bool) -> anyhow::Result<()> {
    let host = lynx_runner::host_record();
    let list = devices::list(&host);
    let runtime = libtorch::load_gpu_backends();
    if json {
        let records: Vec<_> = list.iter().map(|d| &d.record).collect();
        sayln!("{}", serde_json::to_string_pretty(&records)?);
    } else {
        say!("{}", output::devices_table(&list, runtime));
    }
    Ok(())
}
