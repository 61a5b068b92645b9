//! Username templates as Vault's AWS secrets engine renders them. Operators port their
//! `username_template` from Vault unchanged, so the template is Go `text/template` (via `gtmpl`)
//! with the function set of Vault's `sdk/helper/template` — same names, same argument order, same
//! results, down to which part of a string `truncate_sha256` hashes. Where `gtmpl` differs from
//! Go (`eq` requires every argument to match, Go requires any), the Go behaviour is registered
//! over it, because Vault's default template branches on `eq`.
//!
//! AWS caps IAM user names at 64 characters and STS federated user names at 32; a name over the
//! cap would only fail later inside AWS after side effects began, so `render` refuses it up front.
//!
//! A template is written by whoever may write `config/root` and runs inside the server, so its
//! size, nesting, constructs, values and output are bounded before and while gtmpl runs it (see
//! `check_text` and `check_bounds`); errors never echo the rendered name.

use std::collections::HashMap;
use std::io::{self, Write};

use base64::Engine as _;
use chrono::{DateTime, Datelike, Timelike, Utc};
use gtmpl::error::{ExecError, ParseError};
use gtmpl::{Func, FuncError, Value};
use rand::distributions::Alphanumeric;
use rand::Rng;
use sha2::{Digest, Sha256};

/// What a username is rendered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserKind {
    /// An IAM user, or an assumed role's session name (`.Type` is `"IAM"`).
    Iam,
    /// A federation token's federated user name (`.Type` is `"STS"`).
    Sts,
}

impl UserKind {
    /// The value templates see as `.Type`: `"IAM"` or `"STS"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            UserKind::Iam => "IAM",
            UserKind::Sts => "STS",
        }
    }

    /// The longest username AWS accepts for this kind.
    pub const fn max_len(self) -> usize {
        match self {
            UserKind::Iam => IAM_USERNAME_MAX,
            UserKind::Sts => STS_USERNAME_MAX,
        }
    }
}

/// The longest IAM user name AWS accepts.
pub const IAM_USERNAME_MAX: usize = 64;
/// The longest STS federated user name AWS accepts.
pub const STS_USERNAME_MAX: usize = 32;

/// The default: STS → "hangar-<unix time>-<20 random>" truncated to 32; IAM → "hangar-" +
/// ("<display name>-<policy name>" truncated to 42) + "-<unix time>-<20 random>", the whole
/// truncated to 64 (Vault's default with the service prefix `hangar`).
pub const DEFAULT_USERNAME_TEMPLATE: &str = concat!(
    r#"{{ if (eq .Type "STS") }}"#,
    r#"{{ printf "hangar-%s-%s" (unix_time) (random 20) | truncate 32 }}"#,
    r#"{{ else }}"#,
    r#"{{ printf "hangar-%s-%s-%s" (printf "%s-%s" (.DisplayName) (.PolicyName) | truncate 42) (unix_time) (random 20) | truncate 64 }}"#,
    r#"{{ end }}"#,
);

/// Why a username could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The template does not parse, names an unknown function, or is empty.
    #[error("invalid username_template: {0}")]
    Invalid(String),
    /// The template parsed but failed while rendering (a function rejected its arguments, an
    /// unknown field, an incomparable `eq`).
    #[error("username_template failed: {0}")]
    Render(String),
    /// The rendered name is longer than AWS accepts for its kind. The name itself is left out: it
    /// may carry what the template made of the caller's names, and it is not the caller's to see.
    #[error("the generated username is {len} characters; {kind} usernames may have at most {max}")]
    TooLong {
        /// Its length in bytes (characters, for the ASCII names AWS accepts).
        len: usize,
        /// The cap for `kind`.
        max: usize,
        /// `"IAM"` or `"STS"`.
        kind: &'static str,
    },
}

/// The largest `random N` allowed: far beyond any username, small enough that a typo cannot
/// exhaust the function's memory.
const RANDOM_MAX: i64 = 1024;

/// The longest template text, in bytes. The default template is about 300.
pub const TEMPLATE_MAX: usize = 4096;
/// The most `{{` a template may hold: its actions, each `if`, `with`, `else` and `end` included.
/// The default template has 5.
pub const ACTIONS_MAX: usize = 64;
/// The most `(` a template may hold: its parenthesized pipelines. The default template has 8.
pub const PARENS_MAX: usize = 64;
/// The most bytes a function takes (all arguments together) or returns.
pub const VALUE_MAX: usize = 4096;
/// The most bytes a template may write: far beyond any user name AWS accepts.
pub const OUTPUT_MAX: usize = 1024;
/// The widest width or precision `printf` accepts.
const WIDTH_MAX: usize = 64;
/// The longest message of a render failure passed on (functions may quote their arguments).
const MESSAGE_MAX: usize = 256;

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
const FUNCS: &[(&str, Func)] = bounded![
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

/// Checks a template parses and stays within its bounds (for config/root writes), without
/// rendering it for real.
///
/// Unknown functions are parse errors, as in Go; unknown fields and bad arguments only show at
/// render time.
pub fn validate(template: &str) -> Result<(), TemplateError> {
    on_template_stack(|| compile(template).map(drop))
}

/// Renders the username for `kind`, display name and policy (role) name; enforces the cap for the
/// kind (64 IAM, 32 STS) with TooLong.
///
/// As Vault does, every character of the display and policy names outside `[A-Za-z0-9+=,.@_-]`
/// becomes `_` before the template sees it, so names built from them are valid AWS user names.
pub fn render(template: &str, kind: UserKind, display_name: &str, policy_name: &str) -> Result<String, TemplateError> {
    on_template_stack(|| render_here(template, kind, display_name, policy_name))
}

/// The stack gtmpl runs on. A debug build spends about 25 KiB per nesting level, so the deepest
/// template the counts allow ([`ACTIONS_MAX`] + [`PARENS_MAX`] levels) needs about 3 MiB; the
/// tests render it on a quarter of this. Only the pages used are committed.
pub const STACK: usize = 16 * 1024 * 1024;

/// Runs `work` on a thread of its own with a [`STACK`]-sized stack, and waits for it.
///
/// The thread does not contain a stack overflow — that aborts the process from any thread — so
/// the counts in [`check_text`] bound the recursion; the thread gives that bounded recursion a
/// stack of known size, whatever the caller (a tokio worker's 2 MiB) has already used. gtmpl
/// starts a thread per parse anyway, for its lexer. A panic inside gtmpl fails this render only.
fn on_template_stack<T: Send>(work: impl FnOnce() -> Result<T, TemplateError> + Send) -> Result<T, TemplateError> {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new().name("username-template".to_owned()).stack_size(STACK);
        let handle = thread
            .spawn_scoped(scope, work)
            .map_err(|_| TemplateError::Render("no thread is available to render the template".to_owned()))?;
        handle.join().map_err(|_| TemplateError::Render("the template could not be rendered".to_owned()))?
    })
}

fn render_here(template: &str, kind: UserKind, display_name: &str, policy_name: &str) -> Result<String, TemplateError> {
    let compiled = compile(template)?;
    let data = HashMap::from([
        ("Type".to_owned(), Value::from(kind.as_str())),
        ("DisplayName".to_owned(), Value::from(normalize_name(display_name))),
        ("PolicyName".to_owned(), Value::from(normalize_name(policy_name))),
    ]);
    let mut output = Output(Vec::new());
    compiled.execute(&mut output, &gtmpl::Context::from(Value::Object(data))).map_err(|err| match err {
        ExecError::NoFiledFor(field, _) => {
            TemplateError::Render(format!("no field .{field}; templates see .Type, .DisplayName and .PolicyName"))
        }
        ExecError::IOError(_) => TemplateError::Render(format!("the template writes more than {OUTPUT_MAX} bytes")),
        other => TemplateError::Render(prefix(&other.to_string(), MESSAGE_MAX).to_owned()),
    })?;
    let name = String::from_utf8(output.0)
        .map_err(|_| TemplateError::Render("the template writes bytes that are not UTF-8".to_owned()))?;
    let max = kind.max_len();
    if name.len() > max {
        return Err(TemplateError::TooLong { len: name.len(), max, kind: kind.as_str() });
    }
    Ok(name)
}

fn compile(template: &str) -> Result<gtmpl::Template, TemplateError> {
    if template.is_empty() {
        return Err(TemplateError::Invalid("the template is empty".to_owned()));
    }
    check_text(template)?;
    let mut compiled = gtmpl::Template::with_name("username_template");
    compiled.add_funcs(FUNCS);
    compiled.parse(template).map_err(|err| match err {
        // gtmpl's context repeats the template's name and miscounts its lines.
        ParseError::WithContext(_, message) => TemplateError::Invalid(message),
        other => TemplateError::Invalid(other.to_string()),
    })?;
    check_bounds(&compiled)?;
    Ok(compiled)
}

/// The bounds that hold before gtmpl sees the text: its length, and the counts of `{{` and `(`.
///
/// gtmpl takes no limits: its parser and evaluator recurse once per nested action or parenthesis,
/// and it follows `{{template}}` calls 100 000 deep, far past any thread's stack. A stack
/// overflow aborts the whole process whichever thread it happens on, so a thread with a small
/// stack would not contain it; the recursion has to be bounded before it starts. Every nesting
/// level opens with `{{` (`if`, `with`, `else if`, `range`) or `(`, so counting these characters
/// in the raw text bounds the depth whatever gtmpl's lexer makes of them (one inside a string
/// literal counts too: a conservative bound that needs no second lexer to agree with gtmpl's).
fn check_text(template: &str) -> Result<(), TemplateError> {
    if template.len() > TEMPLATE_MAX {
        let len = template.len();
        return Err(TemplateError::Invalid(format!("the template is {len} bytes; at most {TEMPLATE_MAX} are allowed")));
    }
    let actions = template.as_bytes().windows(2).filter(|pair| pair == b"{{").count();
    if actions > ACTIONS_MAX {
        return Err(TemplateError::Invalid(format!(
            "the template has {actions} actions ({{{{); at most {ACTIONS_MAX} are allowed"
        )));
    }
    let parens = template.bytes().filter(|&b| b == b'(').count();
    if parens > PARENS_MAX {
        return Err(TemplateError::Invalid(format!(
            "the template has {parens} parentheses; at most {PARENS_MAX} are allowed"
        )));
    }
    Ok(())
}

/// The bounds on the parsed template: one template, no `define`, `block` or `template` (the only
/// way to call, and so to recurse) and no `range` (the only loop). Every node then runs at most
/// once, so a render takes at most as many steps as the text has nodes; the functions bound each
/// value ([`within_bounds`]) and [`Output`] the text written.
///
/// gtmpl's syntax tree is private, so the check reads its derived `Debug` text, in which every
/// node is named by its variant: a string literal that spells a marker is refused too, never the
/// reverse. The tests pin each construct, so a gtmpl release that renamed a node fails them.
fn check_bounds(compiled: &gtmpl::Template) -> Result<(), TemplateError> {
    const CALLS: &str = "define, block and template are not supported in username_template";
    if compiled.tree_set.len() != 1 {
        return Err(TemplateError::Invalid(CALLS.to_owned()));
    }
    let tree = format!("{:?}", compiled.tree_set.values().map(|tree| &tree.root).collect::<Vec<_>>());
    if tree.contains("Template(TemplateNode {") {
        return Err(TemplateError::Invalid(CALLS.to_owned()));
    }
    if tree.contains("Range(BranchNode {") {
        return Err(TemplateError::Invalid("range is not supported in username_template".to_owned()));
    }
    Ok(())
}

/// Where a render writes: refuses to grow past [`OUTPUT_MAX`], which stops the render.
struct Output(Vec<u8>);

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.0.len() + buf.len() > OUTPUT_MAX {
            return Err(io::Error::other("the output bound is reached"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

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

/// Every character outside AWS's name alphabet (`[\w+=,.@-]`) as `_`: Vault's
/// `normalizeDisplayName`, which it also applies to a requested `role_session_name`.
pub fn normalize_name(name: &str) -> String {
    name.chars().map(|c| if is_name_char(c) { c } else { '_' }).collect()
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "+=,.@_-".contains(c)
}

/// The shortest role session name and federated user name STS accepts.
pub const STS_NAME_MIN: usize = 2;

/// Whether `name` is one AWS accepts as `what` (an IAM user name: 1 to 64 characters, a role
/// session name: 2 to 64, a federated user name: 2 to 32, all of `[\w+=,.@-]`). A template may
/// render anything, and AWS must not be sent an empty or malformed name: IAM's `UserName=""`
/// would name the caller itself. The message does not echo the name (it may carry a secret).
pub fn check_name(what: &str, name: &str, min: usize, max: usize) -> Result<(), String> {
    let len = name.chars().count();
    if len < min || len > max {
        return Err(format!("the {what} must be {min} to {max} characters long; it has {len}"));
    }
    if !name.chars().all(is_name_char) {
        return Err(format!("the {what} may hold only letters, digits and +=,.@_-"));
    }
    Ok(())
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
fn prefix(s: &str, max: usize) -> &str {
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
fn go_format(layout: &str, t: &DateTime<Utc>) -> String {
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

    fn iam(template: &str) -> Result<String, TemplateError> {
        render(template, UserKind::Iam, "token", "deploy")
    }

    #[test]
    fn names_are_checked_against_awss_lengths_and_alphabet_and_normalised_as_vault_does() {
        assert!(check_name("IAM user name", "a", 1, IAM_USERNAME_MAX).is_ok());
        assert!(check_name("IAM user name", "", 1, IAM_USERNAME_MAX).unwrap_err().contains("1 to 64"));
        assert!(check_name("role session name", "a", STS_NAME_MIN, 64).is_err());
        assert!(check_name("federated user name", &"f".repeat(33), STS_NAME_MIN, STS_USERNAME_MAX).is_err());
        assert!(check_name("IAM user name", "a b", 1, 64).unwrap_err().contains("letters"));
        assert!(check_name("IAM user name", "a+b=c,d.e@f_g-h", 1, 64).is_ok());
        assert_eq!(normalize_name("ci job/42 (ü)"), "ci_job_42____");
    }

    fn is_alphanumeric(s: &str) -> bool {
        s.bytes().all(|b| b.is_ascii_alphanumeric())
    }

    /// Splits "<unix time>-<rest>" and checks the time was read during the test.
    fn split_time(s: &str, before: i64, after: i64) -> &str {
        let (time, rest) = s.split_once('-').expect("a dash after the unix time");
        let time: i64 = time.parse().expect("a numeric unix time");
        assert!((before..=after).contains(&time), "{time} not within {before}..={after}");
        rest
    }

    fn reference_time() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2009, 11, 10, 23, 4, 5).unwrap() + chrono::Duration::nanoseconds(123_450_000)
    }

    #[test]
    fn the_default_template_gives_sts_a_prefix_the_time_and_random_characters_cut_to_32() {
        let before = Utc::now().timestamp();
        let name = render(DEFAULT_USERNAME_TEMPLATE, UserKind::Sts, "token", "deploy").unwrap();
        let after = Utc::now().timestamp();
        assert_eq!(name.len(), STS_USERNAME_MAX, "{name}");
        let rest = name.strip_prefix("hangar-").expect("the hangar- prefix");
        let random = split_time(rest, before, after);
        assert_eq!(random.len(), 32 - "hangar-".len() - 11, "20 random characters, cut by the cap: {name}");
        assert!(is_alphanumeric(random), "{name}");
    }

    #[test]
    fn the_default_template_gives_iam_the_display_and_policy_names_the_time_and_20_random_characters() {
        let before = Utc::now().timestamp();
        let name = iam(DEFAULT_USERNAME_TEMPLATE).unwrap();
        let after = Utc::now().timestamp();
        let rest = name.strip_prefix("hangar-token-deploy-").expect("prefix, display and policy names");
        let random = split_time(rest, before, after);
        assert_eq!(random.len(), 20, "{name}");
        assert!(is_alphanumeric(random), "{name}");
        assert!(name.len() <= IAM_USERNAME_MAX);
    }

    #[test]
    fn the_default_template_cuts_long_display_and_policy_names_to_42_and_the_whole_name_to_64() {
        let display = "d".repeat(40);
        let before = Utc::now().timestamp();
        let name = render(DEFAULT_USERNAME_TEMPLATE, UserKind::Iam, &display, "a-long-role-name").unwrap();
        let after = Utc::now().timestamp();
        assert_eq!(name.len(), IAM_USERNAME_MAX, "{name}");
        let middle = &format!("{display}-a-long-role-name")[..42];
        let rest = name.strip_prefix(&format!("hangar-{middle}-")).expect("the names cut to 42");
        let random = split_time(rest, before, after);
        assert_eq!(random.len(), 64 - 7 - 42 - 1 - 11);
        assert!(is_alphanumeric(random));
    }

    #[test]
    fn the_default_template_makes_a_different_name_each_time() {
        assert_ne!(iam(DEFAULT_USERNAME_TEMPLATE).unwrap(), iam(DEFAULT_USERNAME_TEMPLATE).unwrap());
    }

    #[test]
    fn the_default_template_validates() {
        validate(DEFAULT_USERNAME_TEMPLATE).unwrap();
    }

    #[test]
    fn characters_aws_rejects_in_display_and_policy_names_become_underscores() {
        let name = render(
            "{{ .DisplayName }}/{{ .PolicyName }}",
            UserKind::Iam,
            "token for Jane Doe's CI",
            "rôle+a=b,c.d@e_f-g",
        );
        assert_eq!(name.unwrap(), "token_for_Jane_Doe_s_CI/r_le+a=b,c.d@e_f-g");
    }

    #[test]
    fn both_kinds_see_their_type_and_the_names() {
        let template = "{{ .Type }}-{{ .DisplayName }}-{{ .PolicyName }}";
        assert_eq!(render(template, UserKind::Iam, "t", "p").unwrap(), "IAM-t-p");
        assert_eq!(render(template, UserKind::Sts, "t", "p").unwrap(), "STS-t-p");
    }

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
    fn a_pipeline_passes_each_value_as_the_last_argument_of_the_next_function() {
        let name = render(
            r#"{{ .DisplayName | replace "-" "_" | uppercase | truncate 7 }}"#,
            UserKind::Iam,
            "ci-bot-token",
            "p",
        );
        assert_eq!(name.unwrap(), "CI_BOT_");
        assert_eq!(
            iam(r#"{{ printf "%s.%s" .DisplayName .PolicyName | truncate 8 | lowercase }}"#).unwrap(),
            "token.de"
        );
    }

    #[test]
    fn trim_markers_drop_the_surrounding_whitespace() {
        assert_eq!(iam("  {{- .DisplayName -}}  \n").unwrap(), "token");
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
    fn a_template_that_does_not_parse_is_invalid_with_gtmpls_message() {
        let err = validate("{{ nosuch 3 }}").unwrap_err();
        assert_eq!(err.to_string(), "invalid username_template: function nosuch not defined");
        for template in ["{{ if }}", "{{ .DisplayName", "{{ if true }}x", "{{ end }}", "{{ nosuch 3 }}", ""] {
            assert!(matches!(validate(template), Err(TemplateError::Invalid(_))), "validate {template:?}");
            assert!(matches!(iam(template), Err(TemplateError::Invalid(_))), "render {template:?}");
        }
    }

    #[test]
    fn validate_does_not_catch_what_only_fails_at_render_time() {
        validate("{{ .NoSuchField }}").unwrap();
        let err = iam("{{ .NoSuchField }}").unwrap_err();
        assert!(matches!(err, TemplateError::Render(_)));
        assert_eq!(
            err.to_string(),
            "username_template failed: no field .NoSuchField; templates see .Type, .DisplayName and .PolicyName"
        );
    }

    #[test]
    fn an_iam_name_over_64_characters_is_too_long() {
        assert_eq!(iam("{{ random 64 }}").unwrap().len(), 64);
        match iam("{{ random 65 }}") {
            Err(TemplateError::TooLong { len: 65, max: 64, kind: "IAM" }) => {}
            other => panic!("expected TooLong, got {other:?}"),
        }
    }

    #[test]
    fn too_long_never_echoes_the_rendered_name() {
        let err = iam(r#"{{ printf "%s-%s" .DisplayName (random 70) }}"#).unwrap_err();
        let message = err.to_string();
        assert!(!message.contains("token-"), "{message}");
        assert_eq!(message, "the generated username is 76 characters; IAM usernames may have at most 64");
    }

    fn refused(template: &str) -> String {
        match validate(template) {
            Err(TemplateError::Invalid(message)) => {
                assert!(matches!(iam(template), Err(TemplateError::Invalid(_))), "render refuses {template:?} too");
                message
            }
            other => panic!("expected {template:?} to be refused, got {other:?}"),
        }
    }

    #[test]
    fn templates_that_define_or_call_templates_are_refused_before_they_run() {
        for template in [
            r#"{{define "x"}}{{template "x"}}{{end}}{{template "x"}}"#,
            r#"{{template "username_template"}}"#,
            r#"{{block "x" .}}{{template "x" .}}{{end}}"#,
            r#"{{define "x"}}a{{end}}{{ .DisplayName }}"#,
            r#"{{ if true }}{{ else }}{{ with . }}{{ template "x" }}{{ end }}{{ end }}"#,
        ] {
            let message = refused(template);
            assert!(message.contains("define, block and template"), "{template}: {message}");
        }
    }

    #[test]
    fn range_is_refused_so_that_every_action_runs_at_most_once() {
        let message = refused("{{ range . }}{{ range . }}{{ range . }}x{{ end }}{{ end }}{{ end }}");
        assert!(message.contains("range"), "{message}");
    }

    #[test]
    fn a_string_that_spells_a_refused_node_is_refused_too_never_the_reverse() {
        refused(r#"{{ "Range(BranchNode {" }}"#);
        assert_eq!(iam(r#"{{ "template range define" }}"#).unwrap(), "template range define");
    }

    #[test]
    fn deep_nesting_is_refused_before_gtmpl_parses_it() {
        let parens = format!("{{{{ {}.DisplayName{} }}}}", "(".repeat(100_000), ")".repeat(100_000));
        let message = refused(&parens[..TEMPLATE_MAX.min(parens.len())]);
        assert!(message.contains("parentheses"), "{message}");
        let ifs = format!("{}x{}", "{{if true}}".repeat(100), "{{end}}".repeat(100));
        let message = refused(&ifs);
        assert!(message.contains("actions"), "{message}");
    }

    #[test]
    fn a_template_longer_than_its_bound_is_refused() {
        let message = refused(&"x".repeat(TEMPLATE_MAX + 1));
        assert!(message.contains(&format!("at most {TEMPLATE_MAX}")), "{message}");
        assert!(validate(&format!("{{{{ .DisplayName }}}}{}", "x".repeat(TEMPLATE_MAX - 20))).is_ok());
    }

    /// The deepest nestings the bounds allow (nested `if`s, and a chain of `else if`, each nested in
    /// the one before, around as many parentheses), rendered on a quarter of the stack that
    /// `render` gives them.
    #[test]
    fn the_deepest_templates_the_bounds_allow_render_on_a_quarter_of_their_stack() {
        let parens = format!("{{{{ {}.DisplayName{} }}}}", "(".repeat(PARENS_MAX), ")".repeat(PARENS_MAX));
        let ifs = (ACTIONS_MAX - 1) / 2;
        let nested = format!("{}{parens}{}", "{{ if true }}".repeat(ifs), "{{ end }}".repeat(ifs));
        let chain = format!(
            "{{{{ if false }}}}{}{{{{ else }}}}{parens}{{{{ end }}}}",
            "{{ else if false }}".repeat(ACTIONS_MAX - 4)
        );
        for template in [nested, chain] {
            validate(&template).unwrap();
            let rendered = std::thread::Builder::new()
                .stack_size(STACK / 4)
                .spawn(move || render_here(&template, UserKind::Iam, "token", "deploy"))
                .expect("a thread")
                .join()
                .expect("no overflow");
            assert_eq!(rendered.unwrap(), "token");
        }
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
    fn output_past_its_bound_stops_the_render() {
        let template = "{{ random 1000 }}{{ random 1000 }}{{ random 1000 }}";
        let err = iam(template).unwrap_err();
        assert!(matches!(err, TemplateError::Render(_)), "{err}");
        assert_eq!(
            err.to_string(),
            format!("username_template failed: the template writes more than {OUTPUT_MAX} bytes")
        );
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

    #[test]
    fn an_sts_name_over_32_characters_is_too_long() {
        let template = r#"{{ printf "%s-%s" .DisplayName (random 30) }}"#;
        let err = render(template, UserKind::Sts, "token", "deploy").unwrap_err();
        match &err {
            TemplateError::TooLong { len: 36, max: 32, kind: "STS", .. } => {}
            other => panic!("expected TooLong, got {other:?}"),
        }
        let message = err.to_string();
        assert!(message.ends_with("is 36 characters; STS usernames may have at most 32"), "{message}");
        assert!(render(r#"{{ random 32 }}"#, UserKind::Sts, "t", "p").is_ok());
    }
}
