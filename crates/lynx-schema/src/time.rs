//! UTC calendar time from Unix seconds, for run ids and timestamps in results.

/// `YYYY-MM-DDTHH:MM:SSZ` for `unix_s` seconds since 1970-01-01T00:00:00Z.
pub fn rfc3339_utc(unix_s: u64) -> String {
    let (year, month, day, hour, minute, second) = civil(unix_s);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
}

/// `YYYYMMDDTHHMMSSZ`: the same instant in a form that sorts and names files.
pub fn compact_utc(unix_s: u64) -> String {
    let (year, month, day, hour, minute, second) = civil(unix_s);
    format!("{year:04}{month:02}{day:02}T{hour:02}{minute:02}{second:02}Z")
}

/// Year, month, day, hour, minute, second of a Unix time. The date part is Howard Hinnant's
/// `civil_from_days` ("chrono-Compatible Low-Level Date Algorithms").
fn civil(unix_s: u64) -> (u64, u64, u64, u64, u64, u64) {
    let days = unix_s / 86_400;
    let seconds_of_day = unix_s % 86_400;
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day, seconds_of_day / 3600, seconds_of_day / 60 % 60, seconds_of_day % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 (leap day of a year divisible by 400) 12:34:56 UTC.
        assert_eq!(rfc3339_utc(951_827_696), "2000-02-29T12:34:56Z");
        assert_eq!(compact_utc(1_796_031_322), "20261130T093522Z");
    }
}
