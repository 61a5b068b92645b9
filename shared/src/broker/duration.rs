//! Durations as Vault's API takes and shows them. Vault clients send TTLs either as seconds (a
//! JSON number or a numeric string) or as Go duration strings, and read them back in Go's
//! `time.Duration` form ("30m0s"); matching both lets existing clients and scripts work unchanged.

use std::time::Duration;

use serde_json::Value;

const NANOS_PER_SECOND: u128 = 1_000_000_000;
/// Go durations are `int64` nanoseconds; longer ones do not exist on the wire.
const MAX_NANOS: u128 = i64::MAX as u128;

/// Parses a duration as Vault's API takes it: a JSON number or numeric string of seconds, or a Go
/// duration string ("1h", "30m", "1h30m", "90s", "1.5h", "500ms"); `h` is the largest unit (days
/// are not accepted). Negative → error. Errors are messages naming the value.
pub fn parse(value: &Value) -> Result<Duration, String> {
    match value {
        Value::String(raw) => parse_str(raw),
        Value::Number(number) => {
            let seconds = number.as_f64().unwrap_or(f64::NAN);
            if seconds < 0.0 {
                return Err(format!("invalid duration {number}: must not be negative"));
            }
            let duration = match number.as_u64() {
                Some(seconds) => Some(Duration::from_secs(seconds)),
                None => Duration::try_from_secs_f64(seconds).ok(),
            };
            duration
                .filter(|duration| duration.as_nanos() <= MAX_NANOS)
                .ok_or_else(|| format!("invalid duration {number}: out of range"))
        }
        other => {
            Err(format!("invalid duration {other}: expected a number of seconds or a duration string like \"1h30m\""))
        }
    }
}

/// Parses a duration string: whole seconds ("3600") or Go's duration syntax ("1h30m", "1.5s").
pub fn parse_str(raw: &str) -> Result<Duration, String> {
    let invalid = |why: &str| format!("invalid duration {raw:?}: {why}");
    let (negative, unsigned) = match raw.as_bytes().first() {
        Some(b'-') => (true, &raw[1..]),
        Some(b'+') => (false, &raw[1..]),
        _ => (false, raw),
    };
    let nanos = if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        unsigned.parse::<u128>().ok().and_then(|seconds| seconds.checked_mul(NANOS_PER_SECOND))
    } else {
        Some(go_duration(unsigned).map_err(|why| invalid(&why))?)
    };
    let nanos = nanos.filter(|&nanos| nanos <= MAX_NANOS).ok_or_else(|| invalid("out of range"))?;
    if negative && nanos > 0 {
        return Err(invalid("must not be negative"));
    }
    Ok(Duration::from_nanos(nanos as u64))
}

/// Go's `time.ParseDuration` grammar without the sign: `([0-9]*(\.[0-9]*)?unit)+`, or "0".
fn go_duration(mut rest: &str) -> Result<u128, String> {
    if rest.is_empty() {
        return Err("empty".to_owned());
    }
    if rest == "0" {
        return Ok(0);
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let whole_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (whole, after) = rest.split_at(whole_len);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after) => after.split_at(after.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err("expected a number".to_owned());
        }
        let unit_len = after.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale = unit_nanos(unit)?;
        let overflow = || "out of range".to_owned();
        let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| overflow())? };
        let digits = &fraction[..fraction.len().min(20)];
        let fraction_nanos = if digits.is_empty() {
            0
        } else {
            digits.parse::<u128>().map_err(|_| overflow())? * scale / 10u128.pow(digits.len() as u32)
        };
        total = whole
            .checked_mul(scale)
            .and_then(|nanos| nanos.checked_add(fraction_nanos))
            .and_then(|nanos| nanos.checked_add(total))
            .filter(|&nanos| nanos <= MAX_NANOS)
            .ok_or_else(overflow)?;
        rest = after;
    }
    Ok(total)
}

fn unit_nanos(unit: &str) -> Result<u128, String> {
    Ok(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SECOND,
        "m" => 60 * NANOS_PER_SECOND,
        "h" => 3_600 * NANOS_PER_SECOND,
        "" => return Err("missing unit (use h, m, s, ms, us or ns)".to_owned()),
        other => return Err(format!("unknown unit {other:?} (use h, m, s, ms, us or ns; days are not accepted)")),
    })
}

/// Go's time.Duration String(): "0s", "45s", "30m0s", "1h0m0s", "768h0m0s", "1.5s".
pub fn format(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    match nanos {
        0 => return "0s".to_owned(),
        1..=999 => return format!("{nanos}ns"),
        1_000..=999_999 => return format!("{}µs", decimal(nanos, 3)),
        1_000_000..=999_999_999 => return format!("{}ms", decimal(nanos, 6)),
        _ => {}
    }
    let seconds = nanos / NANOS_PER_SECOND;
    let (hours, minutes) = (seconds / 3_600, seconds / 60 % 60);
    let seconds = decimal(seconds % 60 * NANOS_PER_SECOND + nanos % NANOS_PER_SECOND, 9);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, _) => format!("{minutes}m{seconds}s"),
        _ => format!("{hours}h{minutes}m{seconds}s"),
    }
}

/// `value / 10^places` in decimal, without trailing zeros in the fraction.
fn decimal(value: u128, places: u32) -> String {
    let scale = 10u128.pow(places);
    let (whole, fraction) = (value / scale, value % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let fraction = format!("{fraction:0width$}", width = places as usize);
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn secs(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn json_numbers_and_numeric_strings_are_seconds() {
        assert_eq!(parse(&json!(3600)), Ok(secs(3600)));
        assert_eq!(parse(&json!(0)), Ok(secs(0)));
        assert_eq!(parse(&json!(1.5)), Ok(Duration::from_millis(1500)));
        assert_eq!(parse(&json!("3600")), Ok(secs(3600)));
        assert_eq!(parse(&json!("+90")), Ok(secs(90)));
        assert_eq!(parse(&json!(u64::MAX)), Err(format!("invalid duration {}: out of range", u64::MAX)));
    }

    #[test]
    fn go_duration_strings_are_parsed_with_every_unit() {
        assert_eq!(parse_str("1h"), Ok(secs(3600)));
        assert_eq!(parse_str("30m"), Ok(secs(1800)));
        assert_eq!(parse_str("1h30m"), Ok(secs(5400)));
        assert_eq!(parse_str("90s"), Ok(secs(90)));
        assert_eq!(parse_str("1.5h"), Ok(secs(5400)));
        assert_eq!(parse_str(".5m"), Ok(secs(30)));
        assert_eq!(parse_str("1."), Err("invalid duration \"1.\": missing unit (use h, m, s, ms, us or ns)".into()));
        assert_eq!(parse_str("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_str("2us"), Ok(Duration::from_micros(2)));
        assert_eq!(parse_str("2µs"), Ok(Duration::from_micros(2)));
        assert_eq!(parse_str("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_str("1h1m1s1ms"), Ok(Duration::from_millis(3_661_001)));
        assert_eq!(parse_str("0"), Ok(secs(0)));
        assert_eq!(parse_str("-0s"), Ok(secs(0)));
    }

    #[test]
    fn days_are_refused_because_h_is_the_largest_unit() {
        let error = parse_str("1d").unwrap_err();
        assert!(error.contains("\"1d\"") && error.contains("unknown unit \"d\"") && error.contains("days"), "{error}");
    }

    #[test]
    fn negative_durations_are_refused_in_every_form() {
        assert_eq!(parse(&json!(-5)), Err("invalid duration -5: must not be negative".into()));
        assert_eq!(parse(&json!(-0.5)), Err("invalid duration -0.5: must not be negative".into()));
        assert_eq!(parse_str("-30"), Err("invalid duration \"-30\": must not be negative".into()));
        assert_eq!(parse_str("-1h"), Err("invalid duration \"-1h\": must not be negative".into()));
    }

    #[test]
    fn malformed_strings_are_refused_naming_the_value() {
        assert_eq!(parse_str(""), Err("invalid duration \"\": empty".into()));
        assert_eq!(parse_str("1"), Ok(secs(1)));
        assert_eq!(parse_str("1.5"), Err("invalid duration \"1.5\": missing unit (use h, m, s, ms, us or ns)".into()));
        assert_eq!(parse_str("h"), Err("invalid duration \"h\": expected a number".into()));
        assert_eq!(
            parse_str("1h "),
            Err("invalid duration \"1h \": unknown unit \"h \" (use h, m, s, ms, us or ns; days are not accepted)"
                .into())
        );
        assert_eq!(
            parse_str("1hour").unwrap_err(),
            "invalid duration \"1hour\": unknown unit \"hour\" (use h, m, s, ms, us or ns; days are not accepted)"
        );
        assert_eq!(
            parse_str("99999999999999999999h"),
            Err("invalid duration \"99999999999999999999h\": out of range".into())
        );
        assert_eq!(
            parse_str("9999999999999999999"),
            Err("invalid duration \"9999999999999999999\": out of range".into())
        );
    }

    #[test]
    fn values_that_are_neither_numbers_nor_strings_are_refused() {
        for value in [json!(null), json!(true), json!([1]), json!({"h": 1})] {
            let error = parse(&value).unwrap_err();
            assert!(error.starts_with(&format!("invalid duration {value}:")), "{error}");
        }
    }

    #[test]
    fn format_matches_go_duration_string() {
        assert_eq!(format(secs(0)), "0s");
        assert_eq!(format(secs(45)), "45s");
        assert_eq!(format(secs(1800)), "30m0s");
        assert_eq!(format(secs(3600)), "1h0m0s");
        assert_eq!(format(secs(5400)), "1h30m0s");
        assert_eq!(format(secs(768 * 3600)), "768h0m0s");
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format(Duration::from_millis(500)), "500ms");
        assert_eq!(format(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(format(Duration::from_nanos(1500)), "1.5µs");
        assert_eq!(format(Duration::from_nanos(7)), "7ns");
        assert_eq!(format(Duration::from_nanos(3_600_000_000_001)), "1h0m0.000000001s");
    }

    #[test]
    fn a_lease_of_1800_seconds_reads_back_as_30m0s() {
        assert_eq!(format(parse(&json!(1800)).unwrap()), "30m0s");
        assert_eq!(format(parse(&json!("1800")).unwrap()), "30m0s");
        assert_eq!(format(parse(&json!("30m")).unwrap()), "30m0s");
    }

    #[test]
    fn formatted_durations_parse_back_to_themselves() {
        for raw in ["0s", "45s", "30m0s", "1h0m0s", "1h30m15s", "768h0m0s", "1.5s", "500ms", "1.5µs", "7ns"] {
            assert_eq!(format(parse_str(raw).unwrap()), raw);
        }
        for seconds in [1, 59, 60, 61, 3599, 3600, 86_400, 2_764_800] {
            assert_eq!(parse_str(&format(secs(seconds))), Ok(secs(seconds)));
        }
    }
}
