//! `lynx devices`: the devices libtorch can use.

use crate::output;
use lynx_runner::{devices, libtorch};
use lynx_schema::result::DeviceRecord;
use serde_json::Value;

pub fn run(json: bool) -> anyhow::Result<()> {
    let host = lynx_runner::host_record();
    let list = devices::list(&host);
    let runtime = libtorch::load_gpu_backends();
    if json {
        let listed = list.iter().map(|d| listed(&d.record)).collect::<Result<Vec<_>, _>>()?;
        sayln!("{}", serde_json::to_string_pretty(&listed)?);
    } else {
        say!("{}", output::devices_table(&list, runtime));
        // What a run here would be allowed of the host's CPUs, and the host's settings: a CPU's
        // cells, and a GPU's host issue times, are measured within them.
        if host.cpu_allowance.is_some() {
            sayln!("host: {}", host.cpu_allowance_words());
        }
        sayln!("host: {}", host.settings_words());
    }
    Ok(())
}

/// A device as `--json` lists it: its record, and beside it the datasheet lynx holds it to
/// (`null` for a CPU and for a GPU lynx has none for; a list from a lynx build before 2026-12-06
/// has no such key, which is how gpu-check tells the two apart).
fn listed(record: &DeviceRecord) -> serde_json::Result<Value> {
    let mut value = serde_json::to_value(record)?;
    if let Value::Object(fields) = &mut value {
        fields.insert("datasheet".to_owned(), serde_json::to_value(devices::datasheet_of(record))?);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::device::DeviceName;
    use lynx_schema::value::Reported;
    use serde_json::json;

    fn gpu(name: &str) -> DeviceRecord {
        DeviceRecord {
            device: DeviceName::Cuda(0),
            name: Reported::Known(name.to_owned()),
            memory_bytes: Reported::Known(150_000_000_000),
            uuid: Reported::unavailable("test"),
            compute_capability: Reported::Known("9.0".to_owned()),
            board: Reported::unavailable("test"),
            host_link: None,
        }
    }

    #[test]
    fn the_json_list_names_the_datasheet_a_gpu_is_held_to() {
        let h200 = listed(&gpu("NVIDIA H200")).unwrap();
        assert_eq!(h200["device"], "cuda:0");
        assert_eq!(h200["name"], "NVIDIA H200");
        assert_eq!(h200["compute_capability"], "9.0", "the record's fields stand beside it: {h200}");
        assert_eq!(h200["datasheet"]["name"], "H200");
        assert_eq!(h200["datasheet"]["bandwidth_bytes_per_s"], json!(4.8e12));
        assert_eq!(h200["datasheet"]["bf16_flops_per_s"], json!(989e12));
        assert_eq!(h200["datasheet"]["memory_gb"], 141);
        let pcie = listed(&gpu("NVIDIA H100 PCIe")).unwrap();
        assert_eq!(pcie["datasheet"]["bandwidth_bytes_per_s"], json!(2.0e12), "not the SXM board's: {pcie}");
        // None, said as null (not left out): for a GPU lynx has no datasheet for, a Grace Hopper
        // whose name holds "H200" in another word, and a CPU.
        for name in ["NVIDIA A100-SXM4-80GB", "NVIDIA GH200 480GB"] {
            let none = listed(&gpu(name)).unwrap();
            assert_eq!(none.get("datasheet"), Some(&Value::Null), "{none}");
        }
        let mut cpu = gpu("NVIDIA H200");
        cpu.device = DeviceName::Cpu;
        assert_eq!(listed(&cpu).unwrap().get("datasheet"), Some(&Value::Null));
    }
}
