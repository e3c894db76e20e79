//! The amdgpu driver's `gpu_metrics` table (sysfs `/sys/bus/pci/devices/<bus id>/gpu_metrics`):
//! a binary structure whose layout is named by its header's format and content revisions
//! (`struct gpu_metrics_vX_Y` in the kernel's `kgd_pp_interface.h`). lynx reads one value from
//! it, the ASIC-independent throttle status `indep_throttle_status`, which version 1.3 (dGPUs:
//! RDNA2/3, MI200) carries. Versions 1.0-1.2 and 1.4-1.5 carry only `throttle_status`, whose bits
//! differ by ASIC; those are reported as unavailable, with that reason, rather than guessed.
//!
//! The table is read by the kernel ABI, not through ROCm SMI, whose own copy of the structure
//! changes layout between library versions.

use lynx_schema::telemetry::ThrottleReason;
use std::mem::{offset_of, size_of};

/// `struct metrics_table_header`.
#[repr(C)]
#[allow(dead_code, reason = "declared for its layout: offsets are taken, values are never built")]
struct Header {
    structure_size: u16,
    format_revision: u8,
    content_revision: u8,
}

/// `struct gpu_metrics_v1_3`, field for field, so that `offset_of!` gives the kernel's offsets
/// (the kernel's structure is naturally aligned, as `repr(C)` lays it out).
#[repr(C)]
#[allow(dead_code, reason = "declared for its layout: offsets are taken, values are never built")]
struct GpuMetricsV1_3 {
    common_header: Header,
    temperature_edge: u16,
    temperature_hotspot: u16,
    temperature_mem: u16,
    temperature_vrgfx: u16,
    temperature_vrsoc: u16,
    temperature_vrmem: u16,
    average_gfx_activity: u16,
    average_umc_activity: u16,
    average_mm_activity: u16,
    average_socket_power: u16,
    energy_accumulator: u64,
    system_clock_counter: u64,
    average_clocks: [u16; 7],
    current_clocks: [u16; 7],
    throttle_status: u32,
    current_fan_speed: u16,
    pcie_link_width: u16,
    pcie_link_speed: u16,
    padding: u16,
    gfx_activity_acc: u32,
    mem_activity_acc: u32,
    temperature_hbm: [u16; 4],
    firmware_timestamp: u64,
    voltage_soc: u16,
    voltage_gfx: u16,
    voltage_mem: u16,
    padding1: u16,
    indep_throttle_status: u64,
}

/// The size of version 1.3's table, as its header states it.
pub const V1_3_SIZE: usize = size_of::<GpuMetricsV1_3>();
/// Where `indep_throttle_status` lies in version 1.3's table.
pub const V1_3_INDEP_THROTTLE: usize = offset_of!(GpuMetricsV1_3, indep_throttle_status);

/// The table's format and content revisions, from its header.
pub fn revision(table: &[u8]) -> Result<(u8, u8), String> {
    match table {
        [_, _, format, content, ..] => Ok((*format, *content)),
        _ => Err(format!("gpu_metrics is {} bytes, shorter than its 4-byte header", table.len())),
    }
}

/// The ASIC-independent throttle status in `table`, or why the table does not give it.
pub fn indep_throttle_status(table: &[u8]) -> Result<u64, String> {
    let (format, content) = revision(table)?;
    if (format, content) != (1, 3) {
        return Err(format!(
            "gpu_metrics v{format}.{content} has no ASIC-independent throttle status (lynx reads it from v1.3; the \
             throttle_status of other versions has bits that differ by ASIC)"
        ));
    }
    let stated = usize::from(u16::from_ne_bytes([table[0], table[1]]));
    if stated != V1_3_SIZE || table.len() < V1_3_SIZE {
        return Err(format!(
            "gpu_metrics v1.3 states {stated} bytes and holds {}; its structure has {V1_3_SIZE}",
            table.len()
        ));
    }
    let bytes: [u8; 8] = table[V1_3_INDEP_THROTTLE..V1_3_INDEP_THROTTLE + 8].try_into().expect("8 bytes");
    Ok(u64::from_ne_bytes(bytes))
}

/// A version 1.3 table with `indep_throttle_status` set to `bits` and every other value zero,
/// in the host's byte order, as the driver writes it: a fixture for tests.
#[doc(hidden)]
pub fn v1_3_table(bits: u64) -> Vec<u8> {
    let mut table = vec![0u8; V1_3_SIZE];
    table[0..2].copy_from_slice(&(V1_3_SIZE as u16).to_ne_bytes());
    table[2] = 1;
    table[3] = 3;
    table[V1_3_INDEP_THROTTLE..V1_3_INDEP_THROTTLE + 8].copy_from_slice(&bits.to_ne_bytes());
    table
}

/// The groups set in an AMD `indep_throttle_status` (bit numbers of the amdgpu driver's
/// `SMU_THROTTLER_*_BIT`: power 0-7, current 16-23, temperature 32-45, PROCHOT 46-47, PPM
/// 56, FIT 57), each group once.
pub fn throttle_reasons(bits: u64) -> Vec<ThrottleReason> {
    let group = |low: u32, high: u32| bits & ((u64::MAX >> (63 - high)) & (u64::MAX << low)) != 0;
    [
        (group(0, 7), ThrottleReason::AmdPowerLimit),
        (group(16, 23), ThrottleReason::AmdCurrentLimit),
        (group(32, 45), ThrottleReason::AmdThermalLimit),
        (group(46, 47), ThrottleReason::AmdProchot),
        (group(56, 57), ThrottleReason::AmdPlatformLimit),
    ]
    .into_iter()
    .filter(|(set, _)| *set)
    .map(|(_, reason)| reason)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_1_3_has_the_kernel_s_size_and_offset() {
        // By hand from kgd_pp_interface.h: the header (4), 10 u16 (20), two u64 (16), 14 u16
        // clocks (28), throttle_status (4), 4 u16 (8), two u32 (8), 4 u16 HBM (8), a u64 (8), 4
        // u16 voltages and padding (8): 112, then indep_throttle_status (8).
        assert_eq!(V1_3_INDEP_THROTTLE, 112);
        assert_eq!(V1_3_SIZE, 120);
    }

    #[test]
    fn the_independent_status_is_read_from_version_1_3_only() {
        let bits = (1 << 36) | 1;
        assert_eq!(indep_throttle_status(&v1_3_table(bits)), Ok(bits));
        let mut v1_2 = v1_3_table(bits);
        v1_2[3] = 2;
        let reason = indep_throttle_status(&v1_2).unwrap_err();
        assert!(reason.starts_with("gpu_metrics v1.2 has no ASIC-independent throttle status"), "{reason}");
        let mut v1_5 = v1_3_table(bits);
        v1_5[3] = 5;
        assert!(indep_throttle_status(&v1_5).unwrap_err().starts_with("gpu_metrics v1.5 has no"));
    }

    #[test]
    fn a_short_or_mis_sized_table_is_refused() {
        assert_eq!(
            indep_throttle_status(&[1, 3]),
            Err("gpu_metrics is 2 bytes, shorter than its 4-byte header".into())
        );
        let table = v1_3_table(1);
        let reason = indep_throttle_status(&table[..100]).unwrap_err();
        assert_eq!(reason, "gpu_metrics v1.3 states 120 bytes and holds 100; its structure has 120");
        let mut wrong_size = table.clone();
        wrong_size[0] = 96;
        assert!(indep_throttle_status(&wrong_size).unwrap_err().starts_with("gpu_metrics v1.3 states 96 bytes"));
    }

    #[test]
    fn amd_independent_throttler_bits_decode_to_their_groups() {
        use ThrottleReason::*;
        let bit = |n: u32| 1u64 << n;
        assert!(throttle_reasons(0).is_empty());
        // The first and last bit of each group, alone.
        for (n, reason) in [
            (0, AmdPowerLimit),
            (7, AmdPowerLimit),
            (16, AmdCurrentLimit),
            (23, AmdCurrentLimit),
            (32, AmdThermalLimit),
            (45, AmdThermalLimit),
            (46, AmdProchot),
            (47, AmdProchot),
            (56, AmdPlatformLimit),
            (57, AmdPlatformLimit),
        ] {
            assert_eq!(throttle_reasons(bit(n)), [reason], "bit {n}");
            assert!(reason.is_hardware_slowdown());
        }
        // Bits between the groups name nothing; several bits of a group name it once.
        for n in [8, 15, 24, 31, 48, 55, 58, 63] {
            assert!(throttle_reasons(bit(n)).is_empty(), "bit {n}");
        }
        assert_eq!(throttle_reasons(bit(0) | bit(3) | bit(36) | bit(34)), [AmdPowerLimit, AmdThermalLimit]);
    }
}
