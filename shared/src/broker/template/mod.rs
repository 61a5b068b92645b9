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

mod aws_names;
mod funcs;
mod go_time;

use std::collections::HashMap;
use std::io::{self, Write};

use gtmpl::error::{ExecError, ParseError};
use gtmpl::Value;

pub use aws_names::{check_name, normalize_name, IAM_USERNAME_MAX, STS_NAME_MIN, STS_USERNAME_MAX};
use funcs::{prefix, FUNCS};

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
/// The longest message of a render failure passed on (functions may quote their arguments).
const MESSAGE_MAX: usize = 256;

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

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    pub(super) fn iam(template: &str) -> Result<String, TemplateError> {
        render(template, UserKind::Iam, "token", "deploy")
    }

    pub(super) fn is_alphanumeric(s: &str) -> bool {
        s.bytes().all(|b| b.is_ascii_alphanumeric())
    }

    /// Splits "<unix time>-<rest>" and checks the time was read during the test.
    fn split_time(s: &str, before: i64, after: i64) -> &str {
        let (time, rest) = s.split_once('-').expect("a dash after the unix time");
        let time: i64 = time.parse().expect("a numeric unix time");
        assert!((before..=after).contains(&time), "{time} not within {before}..={after}");
        rest
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
