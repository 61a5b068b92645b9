//! Go's reference-time layouts (`time.Time.Format`), which the `timestamp` function takes.

use chrono::{DateTime, Datelike, Timelike, Utc};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// Formats `t` with a Go layout (`time.Time.Format`), recognising the layout tokens as Go's
/// `nextStdChunk` does; everything else is copied. The time is UTC, so zones print as `UTC`/`Z`/
/// `+00:00`.
pub(super) fn go_format(layout: &str, t: &DateTime<Utc>) -> String {
    let mut out = String::with_capacity(layout.len() + 10);
    let starts_lower = |s: &str| s.as_bytes().first().is_some_and(u8::is_ascii_lowercase);
    let month = MONTHS[t.month0() as usize];
    let weekday = WEEKDAYS[t.weekday().num_days_from_monday() as usize];
    let hour12 = match t.hour() % 12 {
        0 => 12,
        h => h,
    };
    let mut rest = layout;
    while let Some(c) = rest.chars().next() {
        let (text, used) = if rest.starts_with("January") {
            (month.to_owned(), 7)
        } else if rest.starts_with("Jan") && !starts_lower(&rest[3..]) {
            (month[..3].to_owned(), 3)
        } else if rest.starts_with("Monday") {
            (weekday.to_owned(), 6)
        } else if rest.starts_with("Mon") && !starts_lower(&rest[3..]) {
            (weekday[..3].to_owned(), 3)
        } else if rest.starts_with("MST") {
            ("UTC".to_owned(), 3)
        } else if rest.starts_with("01") {
            (format!("{:02}", t.month()), 2)
        } else if rest.starts_with("02") {
            (format!("{:02}", t.day()), 2)
        } else if rest.starts_with("03") {
            (format!("{hour12:02}"), 2)
        } else if rest.starts_with("04") {
            (format!("{:02}", t.minute()), 2)
        } else if rest.starts_with("05") {
            (format!("{:02}", t.second()), 2)
        } else if rest.starts_with("06") {
            (format!("{:02}", t.year().rem_euclid(100)), 2)
        } else if rest.starts_with("002") {
            (format!("{:03}", t.ordinal()), 3)
        } else if rest.starts_with("15") {
            (format!("{:02}", t.hour()), 2)
        } else if rest.starts_with('1') {
            (t.month().to_string(), 1)
        } else if rest.starts_with("2006") {
            (format!("{:04}", t.year()), 4)
        } else if rest.starts_with('2') {
            (t.day().to_string(), 1)
        } else if rest.starts_with("_2006") {
            (format!("_{:04}", t.year()), 5)
        } else if rest.starts_with("_2") {
            (format!("{:>2}", t.day()), 2)
        } else if rest.starts_with("__2") {
            (format!("{:>3}", t.ordinal()), 3)
        } else if rest.starts_with('3') {
            (hour12.to_string(), 1)
        } else if rest.starts_with('4') {
            (t.minute().to_string(), 1)
        } else if rest.starts_with('5') {
            (t.second().to_string(), 1)
        } else if rest.starts_with("PM") {
            ((if t.hour() < 12 { "AM" } else { "PM" }).to_owned(), 2)
        } else if rest.starts_with("pm") {
            ((if t.hour() < 12 { "am" } else { "pm" }).to_owned(), 2)
        } else if let Some(token) =
            ["-070000", "-07:00:00", "-0700", "-07:00", "-07"].into_iter().find(|z| rest.starts_with(z))
        {
            (token.replace('-', "+").replace('7', "0"), token.len())
        } else if let Some(token) =
            ["Z070000", "Z07:00:00", "Z0700", "Z07:00", "Z07"].into_iter().find(|z| rest.starts_with(z))
        {
            ("Z".to_owned(), token.len())
        } else if let Some(fraction) = go_fraction(rest, t.nanosecond().min(999_999_999)) {
            fraction
        } else {
            (c.to_string(), c.len_utf8())
        };
        out.push_str(&text);
        rest = &rest[used..];
    }
    out
}

/// `.000`/`,000` (fixed digits) or `.999`/`,999` (trailing zeros dropped) at the start of `rest`,
/// as Go reads them: a run of one repeated digit not followed by another digit.
fn go_fraction(rest: &str, nanos: u32) -> Option<(String, usize)> {
    let bytes = rest.as_bytes();
    let separator = *bytes.first().filter(|b| matches!(b, b'.' | b','))?;
    let digit = *bytes.get(1).filter(|b| matches!(b, b'0' | b'9'))?;
    let run = bytes[1..].iter().take_while(|&&b| b == digit).count();
    if bytes.get(1 + run).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let nanos = format!("{nanos:09}");
    let mut digits = &nanos[..run.min(9)];
    if digit == b'9' {
        digits = digits.trim_end_matches('0');
        if digits.is_empty() {
            return Some((String::new(), 1 + run));
        }
    }
    Some((format!("{}{digits}", separator as char), 1 + run))
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn reference_time() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2009, 11, 10, 23, 4, 5).unwrap() + chrono::Duration::nanoseconds(123_450_000)
    }

    #[test]
    fn go_layouts_format_like_go() {
        let t = reference_time();
        let cases = [
            ("2006-01-02T15:04:05Z07:00", "2009-11-10T23:04:05Z"),
            ("Mon Jan _2 15:04:05 MST 2006", "Tue Nov 10 23:04:05 UTC 2009"),
            ("Monday, January 2, 06", "Tuesday, November 10, 09"),
            ("3:04:05PM pm", "11:04:05PM pm"),
            ("03 1/2 4:5", "11 11/10 4:5"),
            ("20060102150405", "20091110230405"),
            ("-0700 -07:00 -07 Z0700", "+0000 +00:00 +00 Z"),
            ("05.000 05,999999 .000000000 .9", "05.123 05,12345 .123450000 .1"),
            ("002 __2 _2006", "314 314 _2009"),
            ("Janet Monique", "Janet Monique"),
            ("hangar-é-2006", "hangar-é-2009"),
        ];
        for (layout, expected) in cases {
            assert_eq!(go_format(layout, &t), expected, "{layout}");
        }
        let whole_second = Utc.with_ymd_and_hms(2009, 11, 10, 0, 4, 5).unwrap();
        assert_eq!(go_format("05.999 3PM", &whole_second), "05 12AM");
    }
}
