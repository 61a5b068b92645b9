//! Vault's template functions (`sdk/helper/template`'s `funcs.go`): same names, argument order
//! and results, each bounded in what it takes and returns; and Go's `eq`/`ne`, registered over
//! gtmpl's.

use base64::Engine as _;
use chrono::Utc;
use gtmpl::{Func, FuncError, Value};
use rand::distributions::Alphanumeric;
use rand::Rng;
use sha2::{Digest, Sha256};

use super::go_time::go_format;
use super::VALUE_MAX;

/// The largest `random N` allowed: far beyond any username, small enough that a typo cannot
/// exhaust the function's memory.
const RANDOM_MAX: i64 = 1024;

/// The widest width or precision `printf` accepts.
const WIDTH_MAX: usize = 64;

/// Wraps each function so that it refuses arguments and results over [`VALUE_MAX`].
macro_rules! bounded {
    ($($name:literal => $func:path),* $(,)?) => {
        &[$(($name, {
            fn bounded(args: &[Value]) -> Result<Value, FuncError> {
                within_bounds($name, args, $func)
            }
            bounded as Func
        })),*]
    };
}

/// Vault's functions, and the gtmpl builtins that build strings (registered over gtmpl's own,
/// so that they too are bounded); the other builtins return a value they were given or a bool.
pub(super) const FUNCS: &[(&str, Func)] = bounded![
    "random" => random,
    "truncate" => truncate,
    "truncate_sha256" => truncate_sha256,
    "uppercase" => uppercase,
    "lowercase" => lowercase,
    "replace" => replace,
    "sha256" => sha256,
    "base64" => base64_encode,
    "unix_time" => unix_time,
    "unix_time_millis" => unix_time_millis,
    "timestamp" => timestamp,
    "uuid" => uuid,
    "eq" => go_eq,
    "ne" => go_ne,
    "printf" => printf,
    "print" => gtmpl::funcs::print,
    "println" => gtmpl::funcs::println,
    "urlquery" => gtmpl::funcs::urlquery,
];

/// Runs `func` only on arguments of at most [`VALUE_MAX`] bytes together, and refuses a result
/// over it: no chain of actions can then build a value larger than that. (Functions that would
/// grow a value many times over check the size before building it: `replace`, `printf`.)
fn within_bounds(name: &str, args: &[Value], func: Func) -> Result<Value, FuncError> {
    if args.iter().map(value_len).sum::<usize>() > VALUE_MAX {
        return Err(FuncError::Generic(format!("{name}: its arguments exceed {VALUE_MAX} bytes")));
    }
    let result = func(args)?;
    if value_len(&result) > VALUE_MAX {
        return Err(FuncError::Generic(format!("{name}: its result exceeds {VALUE_MAX} bytes")));
    }
    Ok(result)
}

/// About how many bytes a value prints as.
fn value_len(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(value_len).sum(),
        Value::Object(fields) | Value::Map(fields) => fields.iter().map(|(k, v)| k.len() + value_len(v)).sum(),
        Value::Number(n) => n.to_string().len(),
        _ => 16,
    }
}

fn arity(name: &str, args: &[Value], count: usize) -> Result<(), FuncError> {
    if args.len() == count {
        Ok(())
    } else {
        Err(FuncError::ExactlyXArgs(name.to_owned(), count))
    }
}

fn string_arg<'a>(name: &str, arg: &'a Value) -> Result<&'a str, FuncError> {
    match arg {
        Value::String(s) => Ok(s),
        other => Err(FuncError::Generic(format!("{name}: expected a string, got {other}"))),
    }
}

fn int_arg(name: &str, arg: &Value) -> Result<i64, FuncError> {
    match arg {
        Value::Number(n) => {
            n.as_i64().ok_or_else(|| FuncError::Generic(format!("{name}: expected an integer, got {n}")))
        }
        other => Err(FuncError::Generic(format!("{name}: expected an integer, got {other}"))),
    }
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a character boundary.
pub(super) fn prefix(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn random(args: &[Value]) -> Result<Value, FuncError> {
    arity("random", args, 1)?;
    let len = int_arg("random", &args[0])?;
    if !(0..=RANDOM_MAX).contains(&len) {
        return Err(FuncError::Generic(format!("random: length must be between 0 and {RANDOM_MAX} but was {len}")));
    }
    let chars: String = rand::thread_rng().sample_iter(&Alphanumeric).take(len as usize).map(char::from).collect();
    Ok(Value::from(chars))
}

fn truncate(args: &[Value]) -> Result<Value, FuncError> {
    arity("truncate", args, 2)?;
    let max = int_arg("truncate", &args[0])?;
    let s = string_arg("truncate", &args[1])?;
    if max <= 0 {
        return Err(FuncError::Generic(format!("truncate: max length must be > 0 but was {max}")));
    }
    Ok(Value::from(prefix(s, usize::try_from(max).unwrap_or(usize::MAX))))
}

/// Vault keeps the first `N - 8` bytes and appends the first 8 hex digits of the SHA-256 of the
/// part it cut off (not of the whole string).
fn truncate_sha256(args: &[Value]) -> Result<Value, FuncError> {
    const HASH_LEN: usize = 8;
    arity("truncate_sha256", args, 2)?;
    let max = int_arg("truncate_sha256", &args[0])?;
    let s = string_arg("truncate_sha256", &args[1])?;
    if max <= HASH_LEN as i64 {
        return Err(FuncError::Generic(format!("truncate_sha256: max length must be > {HASH_LEN} but was {max}")));
    }
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    if s.len() <= max {
        return Ok(Value::from(s));
    }
    let kept = prefix(s, max - HASH_LEN);
    let hash = sha256_hex(&s[kept.len()..]);
    Ok(Value::from(format!("{kept}{}", &hash[..HASH_LEN])))
}

fn uppercase(args: &[Value]) -> Result<Value, FuncError> {
    arity("uppercase", args, 1)?;
    Ok(Value::from(string_arg("uppercase", &args[0])?.to_uppercase()))
}

fn lowercase(args: &[Value]) -> Result<Value, FuncError> {
    arity("lowercase", args, 1)?;
    Ok(Value::from(string_arg("lowercase", &args[0])?.to_lowercase()))
}

fn replace(args: &[Value]) -> Result<Value, FuncError> {
    arity("replace", args, 3)?;
    let find = string_arg("replace", &args[0])?;
    let with = string_arg("replace", &args[1])?;
    let s = string_arg("replace", &args[2])?;
    // Each match can multiply the string; its length is known before it is built.
    let matches = if find.is_empty() { s.chars().count() + 1 } else { s.matches(find).count() };
    let len = (s.len() - matches * find.len()).saturating_add(matches.saturating_mul(with.len()));
    if len > VALUE_MAX {
        return Err(FuncError::Generic(format!("replace: its result would exceed {VALUE_MAX} bytes")));
    }
    Ok(Value::from(s.replace(find, with)))
}

/// gtmpl's `printf`, refusing a width or precision over [`WIDTH_MAX`] (`%999999999d` would
/// allocate that many bytes before any result could be checked) and one taken from an argument.
fn printf(args: &[Value]) -> Result<Value, FuncError> {
    if let Some(Value::String(format)) = args.first() {
        check_widths(format)?;
    }
    gtmpl::funcs::printf(args)
}

/// Reads every `%` up to the verb letter that ends it (gtmpl's verbs), or to the end: a superset of
/// the verbs gtmpl formats (`%%` included), so that no width escapes the check.
fn check_widths(format: &str) -> Result<(), FuncError> {
    const VERBS: &str = "vVtTbcdoqxXUeEfFgGsp";
    for (start, _) in format.match_indices('%') {
        let spec = format[start + 1..].split(|c| VERBS.contains(c)).next().unwrap_or_default();
        if spec.contains('*') {
            return Err(FuncError::Generic(
                "printf: a width or precision from an argument (*) is not supported".into(),
            ));
        }
        let too_wide = spec
            .split(|c: char| !c.is_ascii_digit())
            .filter(|digits| !digits.is_empty())
            .any(|digits| digits.parse::<usize>().map_or(true, |n| n > WIDTH_MAX));
        if too_wide {
            return Err(FuncError::Generic(format!("printf: widths and precisions may be at most {WIDTH_MAX}")));
        }
    }
    Ok(())
}

fn sha256(args: &[Value]) -> Result<Value, FuncError> {
    arity("sha256", args, 1)?;
    Ok(Value::from(sha256_hex(string_arg("sha256", &args[0])?)))
}

fn base64_encode(args: &[Value]) -> Result<Value, FuncError> {
    arity("base64", args, 1)?;
    let s = string_arg("base64", &args[0])?;
    Ok(Value::from(base64::engine::general_purpose::STANDARD.encode(s)))
}

fn unix_time(args: &[Value]) -> Result<Value, FuncError> {
    arity("unix_time", args, 0)?;
    Ok(Value::from(Utc::now().timestamp().to_string()))
}

fn unix_time_millis(args: &[Value]) -> Result<Value, FuncError> {
    arity("unix_time_millis", args, 0)?;
    Ok(Value::from(Utc::now().timestamp_millis().to_string()))
}

/// The current time in UTC, formatted with a Go reference-time layout.
fn timestamp(args: &[Value]) -> Result<Value, FuncError> {
    arity("timestamp", args, 1)?;
    let layout = string_arg("timestamp", &args[0])?;
    Ok(Value::from(go_format(layout, &Utc::now())))
}

/// A random (version 4) UUID.
fn uuid(args: &[Value]) -> Result<Value, FuncError> {
    arity("uuid", args, 0)?;
    let mut bytes: [u8; 16] = rand::thread_rng().gen();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = hex::encode(bytes);
    Ok(Value::from(format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])))
}

/// Go's `eq`: true when the first argument equals any of the others; comparing a string, number
/// or bool with a different one of those kinds is an error.
fn go_eq(args: &[Value]) -> Result<Value, FuncError> {
    let Some((first, rest)) = args.split_first().filter(|(_, rest)| !rest.is_empty()) else {
        return Err(FuncError::AtLeastXArgs("eq".to_owned(), 2));
    };
    for other in rest {
        if go_equal(first, other)? {
            return Ok(Value::from(true));
        }
    }
    Ok(Value::from(false))
}

fn go_ne(args: &[Value]) -> Result<Value, FuncError> {
    arity("ne", args, 2)?;
    Ok(Value::from(!go_equal(&args[0], &args[1])?))
}

fn go_equal(a: &Value, b: &Value) -> Result<bool, FuncError> {
    fn basic_kind(v: &Value) -> Option<u8> {
        match v {
            Value::Bool(_) => Some(0),
            Value::Number(_) => Some(1),
            Value::String(_) => Some(2),
            _ => None,
        }
    }
    match (basic_kind(a), basic_kind(b)) {
        (Some(x), Some(y)) if x != y => {
            Err(FuncError::Generic(format!("incompatible types for comparison: {a} and {b}")))
        }
        _ => Ok(a == b),
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::super::tests::{iam, is_alphanumeric};
    use super::super::{render, TemplateError, UserKind};
    use super::*;

    #[test]
    fn if_eq_on_the_type_picks_the_branch_for_the_kind() {
        let template = r#"{{ if (eq .Type "STS") }}sts{{ else }}iam{{ end }}"#;
        assert_eq!(render(template, UserKind::Sts, "t", "p").unwrap(), "sts");
        assert_eq!(render(template, UserKind::Iam, "t", "p").unwrap(), "iam");
    }

    #[test]
    fn eq_with_several_values_is_true_when_any_matches_as_in_go() {
        let template = r#"{{ if eq .Type "STS" "IAM" }}one of them{{ else }}neither{{ end }}"#;
        assert_eq!(render(template, UserKind::Iam, "t", "p").unwrap(), "one of them");
        assert_eq!(render(template, UserKind::Sts, "t", "p").unwrap(), "one of them");
        assert_eq!(iam(r#"{{ if eq .Type "A" "B" }}yes{{ else }}no{{ end }}"#).unwrap(), "no");
    }

    #[test]
    fn eq_and_ne_refuse_to_compare_a_string_with_a_number() {
        assert!(matches!(iam("{{ if eq .Type 1 }}x{{ end }}"), Err(TemplateError::Render(_))));
        assert!(matches!(iam("{{ if ne .Type 1 }}x{{ end }}"), Err(TemplateError::Render(_))));
        assert_eq!(iam(r#"{{ if ne .Type "STS" }}not sts{{ end }}"#).unwrap(), "not sts");
    }

    #[test]
    fn printf_formats_strings_numbers_and_values() {
        assert_eq!(iam(r#"{{ printf "%s-%d-%v" .DisplayName 42 .PolicyName }}"#).unwrap(), "token-42-deploy");
    }

    #[test]
    fn random_gives_that_many_letters_and_digits() {
        let name = iam("{{ random 40 }}").unwrap();
        assert_eq!(name.len(), 40);
        assert!(is_alphanumeric(&name));
        assert_eq!(iam("{{ random 0 }}").unwrap(), "");
    }

    #[test]
    fn random_refuses_a_negative_or_huge_length_and_a_non_integer() {
        for template in ["{{ random -1 }}", "{{ random 1025 }}", r#"{{ random "5" }}"#, "{{ random }}"] {
            assert!(matches!(iam(template), Err(TemplateError::Render(_))), "{template}");
        }
    }

    #[test]
    fn truncate_keeps_at_most_n_characters() {
        assert_eq!(iam(r#"{{ "foobarbaz" | truncate 1 }}"#).unwrap(), "f");
        assert_eq!(iam(r#"{{ "foobarbaz" | truncate 8 }}"#).unwrap(), "foobarba");
        assert_eq!(iam(r#"{{ "foobarbaz" | truncate 9 }}"#).unwrap(), "foobarbaz");
        assert_eq!(iam(r#"{{ "foobarbaz" | truncate 100 }}"#).unwrap(), "foobarbaz");
        assert_eq!(iam(r#"{{ truncate 3 "foobarbaz" }}"#).unwrap(), "foo");
    }

    #[test]
    fn truncate_refuses_a_length_below_one() {
        assert!(matches!(iam(r#"{{ "foo" | truncate 0 }}"#), Err(TemplateError::Render(_))));
        assert!(matches!(iam(r#"{{ "foo" | truncate -1 }}"#), Err(TemplateError::Render(_))));
    }

    #[test]
    fn truncate_never_splits_a_multibyte_character() {
        assert_eq!(iam(r#"{{ "añb" | truncate 2 }}"#).unwrap(), "a");
    }

    #[test]
    fn truncate_sha256_matches_vaults_results() {
        let cases = [
            (9, "t4bb25641"),
            (12, "this704cd12b"),
            (22, "thisisareallyl7f978be6"),
            (23, "thisisareallylongstring"),
            (24, "thisisareallylongstring"),
            (100, "thisisareallylongstring"),
        ];
        for (max, expected) in cases {
            let template = format!(r#"{{{{ "thisisareallylongstring" | truncate_sha256 {max} }}}}"#);
            assert_eq!(iam(&template).unwrap(), expected, "truncate_sha256 {max}");
        }
    }

    #[test]
    fn truncate_sha256_refuses_a_length_of_8_or_less() {
        for max in [-1, 0, 8] {
            let template = format!(r#"{{{{ "thisisareallylongstring" | truncate_sha256 {max} }}}}"#);
            assert!(matches!(iam(&template), Err(TemplateError::Render(_))), "truncate_sha256 {max}");
        }
    }

    #[test]
    fn uppercase_and_lowercase_change_the_case() {
        assert_eq!(iam(r#"{{ "fOoBaR" | uppercase }}"#).unwrap(), "FOOBAR");
        assert_eq!(iam(r#"{{ "fOoBaR" | lowercase }}"#).unwrap(), "foobar");
    }

    #[test]
    fn replace_swaps_every_occurrence() {
        assert_eq!(iam(r#"{{ "foo.bar.baz" | replace "." "_" }}"#).unwrap(), "foo_bar_baz");
        assert_eq!(iam(r#"{{ "foobarbaz" | replace "bar" "" }}"#).unwrap(), "foobaz");
        assert_eq!(iam(r#"{{ "foobar" | replace "." "_" }}"#).unwrap(), "foobar");
    }

    #[test]
    fn sha256_gives_the_hex_digest() {
        assert_eq!(
            iam(r#"{{ "foobar" | sha256 }}"#).unwrap(),
            "c3ab8ff13720e8ad9047dd39466b3c8974e592c2fa383d4a3960714caef0c4f2"
        );
        assert_eq!(
            iam(r#"{{ "" | sha256 }}"#).unwrap(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn base64_uses_the_padded_standard_alphabet() {
        assert_eq!(iam(r#"{{ "foobar" | base64 }}"#).unwrap(), "Zm9vYmFy");
        assert_eq!(iam(r#"{{ "f?>" | base64 }}"#).unwrap(), "Zj8+");
        assert_eq!(iam(r#"{{ "fo" | base64 }}"#).unwrap(), "Zm8=");
    }

    #[test]
    fn unix_time_and_unix_time_millis_read_the_clock_when_rendering() {
        let before = Utc::now();
        let seconds: i64 = iam("{{ unix_time }}").unwrap().parse().unwrap();
        let millis: i64 = iam("{{ unix_time_millis }}").unwrap().parse().unwrap();
        let after = Utc::now();
        assert!((before.timestamp()..=after.timestamp()).contains(&seconds));
        assert!((before.timestamp_millis()..=after.timestamp_millis()).contains(&millis));
    }

    #[test]
    fn timestamp_formats_the_current_utc_time_with_a_go_layout() {
        let before = Utc::now();
        let stamp = iam(r#"{{ timestamp "2006-01-02T15:04:05Z07:00" }}"#).unwrap();
        let after = Utc::now();
        let parsed = DateTime::parse_from_rfc3339(&stamp).unwrap();
        assert!(stamp.ends_with('Z'), "{stamp}");
        assert!((before.timestamp()..=after.timestamp()).contains(&parsed.timestamp()), "{stamp}");
    }

    #[test]
    fn uuid_gives_a_random_version_4_uuid() {
        let id = iam("{{ uuid }}").unwrap();
        let groups: Vec<&str> = id.split('-').collect();
        assert_eq!(groups.iter().map(|g| g.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12], "{id}");
        assert!(id.bytes().all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{id}");
        assert!(groups[2].starts_with('4'), "{id}");
        assert!(groups[3].starts_with(['8', '9', 'a', 'b']), "{id}");
        assert_ne!(id, iam("{{ uuid }}").unwrap());
    }

    #[test]
    fn string_functions_refuse_a_number() {
        assert!(matches!(iam("{{ 5 | uppercase }}"), Err(TemplateError::Render(_))));
    }

    #[test]
    fn a_value_that_grows_past_its_bound_stops_the_render_without_echoing_it() {
        let grow = r#"{{ $x := printf "%s%s%s%s%s%s%s%s" $x $x $x $x $x $x $x $x }}"#;
        let template = format!("{{{{ $x := \"{}\" }}}}{}{{{{ $x }}}}", "a".repeat(64), grow.repeat(20));
        let started = std::time::Instant::now();
        let err = iam(&template).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "stopped quickly");
        let message = err.to_string();
        assert!(matches!(err, TemplateError::Render(_)), "{message}");
        assert!(message.contains(&VALUE_MAX.to_string()) && !message.contains("aaaa"), "{message}");
    }

    #[test]
    fn replace_refuses_a_result_past_the_bound_before_building_it() {
        let template = r#"{{ $x := "aaaaaaaaaaaaaaaa" }}{{ $y := "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" }}{{ replace "a" $y $x | replace "b" $y | replace "b" $y | truncate 8 }}"#;
        let message = iam(template).unwrap_err().to_string();
        assert!(message.contains("replace") && message.contains(&VALUE_MAX.to_string()), "{message}");
        assert_eq!(iam(r#"{{ "a-b" | replace "" "." }}"#).unwrap(), ".a.-.b.");
    }

    #[test]
    fn printf_refuses_widths_and_precisions_past_the_bound() {
        for template in [
            r#"{{ printf "%999999999d" 1 }}"#,
            r#"{{ printf "%.99999f" 1.5 }}"#,
            r#"{{ printf "%-65s" "a" }}"#,
            r#"{{ printf "%*d" 999999999 1 }}"#,
            r#"{{ printf "%[1]*d" 999999999 }}"#,
            r#"{{ printf "%99999999999999999999999d" 1 }}"#,
        ] {
            let message = iam(template).unwrap_err().to_string();
            assert!(message.contains("printf"), "{template}: {message}");
        }
        assert_eq!(iam(r#"{{ printf "%d-%.2f-%s" 42 1.5 "x" }}"#).unwrap(), "42-1.50-x");
    }

    #[test]
    fn print_println_and_urlquery_are_bounded_too() {
        let big = r#"{{ $x := printf "%s%s%s%s" (random 1024) (random 1024) (random 1024) (random 1024) }}"#;
        for call in ["print $x $x", "println $x $x"] {
            let err = iam(&format!("{big}{{{{ {call} | truncate 8 }}}}")).unwrap_err();
            assert!(err.to_string().contains(&VALUE_MAX.to_string()), "{call}: {err}");
        }
        let spaces = format!(r#"{{{{ $s := printf "%64s" "" }}}}{{{{ $t := print {}}}}}"#, "$s ".repeat(32));
        let err = iam(&format!("{spaces}{{{{ urlquery $t | truncate 8 }}}}")).unwrap_err();
        assert!(err.to_string().contains("urlquery"), "{err}");
    }
}
