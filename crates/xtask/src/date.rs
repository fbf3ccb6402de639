//! Civil dates from days since 1970-01-01 (Howard Hinnant's algorithm).

/// `(year, month, day)` of the day `days` after 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

/// Today's date, in UTC, as `YYYY-MM-DD`.
pub(crate) fn today() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let (year, month, day) = civil_from_days(now.map_or(0, |d| d.as_secs() / 86_400) as i64);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_days_and_successive_days() {
        // Python: (date.fromisoformat(d) - date(1970, 1, 1)).days
        for (date, days) in [
            ("1970-01-01", 0),
            ("1969-12-31", -1),
            ("2000-02-29", 11_016),
            ("2000-03-01", 11_017),
            ("2026-11-30", 20_787),
            ("2100-03-01", 47_541),
        ] {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(format!("{year:04}-{month:02}-{day:02}"), date);
        }
        // Each day follows the one before it, through every month's length and leap year.
        let leap = |year: i64| year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        let mut last = civil_from_days(-800_001);
        for days in -800_000..800_000 {
            let (year, month, day) = last;
            let february = if leap(year) { 29 } else { 28 };
            let length = [31, february, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month as usize - 1];
            let next = match (month, day) {
                (12, 31) => (year + 1, 1, 1),
                _ if day == length => (year, month + 1, 1),
                _ => (year, month, day + 1),
            };
            last = civil_from_days(days);
            assert_eq!(last, next, "{days}");
        }
    }
}
