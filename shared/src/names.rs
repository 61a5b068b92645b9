//! The name rule of HCP Terraform's resources (organizations, teams, workspaces, agent pools,
//! modules): letters, digits, `-` and `_`, with a length limit, and for registry names no `-` or
//! `_` at either end. One checker; each family says which member of the request broke it.

/// A kind of name: how long it may be and whether punctuation may stand at its ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameRule {
    pub max_chars: usize,
    pub punctuation_at_ends: bool,
}

pub const ORGANIZATION: NameRule = NameRule { max_chars: 64, punctuation_at_ends: true };
pub const TEAM: NameRule = NameRule { max_chars: 64, punctuation_at_ends: true };
pub const WORKSPACE: NameRule = NameRule { max_chars: 90, punctuation_at_ends: true };
pub const AGENT_POOL: NameRule = NameRule { max_chars: 90, punctuation_at_ends: true };
/// Module names and public namespaces.
pub const REGISTRY: NameRule = NameRule { max_chars: 64, punctuation_at_ends: false };

/// Which part of the rule a name breaks; its text completes "the name …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most {0} characters")]
    TooLong(usize),
    #[error("may contain only letters, numbers, `-` and `_`")]
    Characters,
    #[error("must not start or end with `-` or `_`")]
    Ends,
    #[error("must be a valid email address")]
    Email,
}

/// Whether Terraform reads `value` unchanged as a provider's namespace or type in a source
/// address: 1 to 64 lowercase letters, digits and dashes, no dash first or last nor two in a row
/// (it lowercases what else it takes, and refuses `_`).
pub fn is_provider_part(value: &str) -> bool {
    (1..=64).contains(&value.len())
        && value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !value.starts_with('-')
        && !value.ends_with('-')
        && !value.contains("--")
}

pub fn check(value: &str, rule: NameRule) -> Result<(), NameError> {
    if value.is_empty() {
        return Err(NameError::Empty);
    }
    if value.chars().count() > rule.max_chars {
        return Err(NameError::TooLong(rule.max_chars));
    }
    if !value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(NameError::Characters);
    }
    if !rule.punctuation_at_ends && (value.starts_with(['-', '_']) || value.ends_with(['-', '_'])) {
        return Err(NameError::Ends);
    }
    Ok(())
}

/// An address with a local part, an `@` and a dotted domain, without white space.
pub fn check_email(email: &str) -> Result<(), NameError> {
    let valid = email.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty() && domain.contains('.') && !email.contains(char::is_whitespace)
    });
    valid.then_some(()).ok_or(NameError::Email)
}

/// Whether a character could make text display as something else: a control character or a
/// bidirectional formatting one (Trojan Source, CVE-2021-42574).
pub fn deceptive(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_allow_letters_digits_dash_underscore() {
        assert!(check("my-org_2", ORGANIZATION).is_ok());
        assert_eq!(check("", ORGANIZATION), Err(NameError::Empty));
        assert_eq!(check("has space", ORGANIZATION), Err(NameError::Characters));
        assert_eq!(check("dot.ted", TEAM), Err(NameError::Characters));
        assert_eq!(check(&"a".repeat(65), ORGANIZATION), Err(NameError::TooLong(64)));
        assert!(check(&"a".repeat(90), WORKSPACE).is_ok());
        assert!(check("-edge", ORGANIZATION).is_ok());
        assert_eq!(check("-edge", REGISTRY), Err(NameError::Ends));
        assert_eq!(check("edge_", REGISTRY), Err(NameError::Ends));
        assert!(check_email("ops@example.com").is_ok());
        assert_eq!(check_email("ops"), Err(NameError::Email));
    }
}
