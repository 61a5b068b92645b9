//! Name rules of HCP Terraform's organizations, teams and workspaces, as parse-don't-validate
//! checks that name the offending attribute.

use super::error::AccountsError;

/// Letters, digits, `-` and `_`, between 1 and `max` characters.
pub fn check(pointer: &str, value: &str, max: usize) -> Result<(), AccountsError> {
    if value.is_empty() {
        return Err(AccountsError::invalid(pointer, "must not be empty"));
    }
    if value.chars().count() > max {
        return Err(AccountsError::invalid(pointer, format!("must be at most {max} characters")));
    }
    if !value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(AccountsError::invalid(pointer, "may contain only letters, numbers, `-` and `_`"));
    }
    Ok(())
}

pub const ORGANIZATION_NAME_MAX: usize = 64;
pub const TEAM_NAME_MAX: usize = 64;
pub const WORKSPACE_NAME_MAX: usize = 90;
pub const POOL_NAME_MAX: usize = 90;

pub fn check_email(pointer: &str, email: &str) -> Result<(), AccountsError> {
    let valid = email.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty() && domain.contains('.') && !email.contains(char::is_whitespace)
    });
    if valid {
        Ok(())
    } else {
        Err(AccountsError::invalid(pointer, "must be a valid email address"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_allow_letters_digits_dash_underscore() {
        assert!(check("/n", "my-org_2", 64).is_ok());
        assert!(check("/n", "", 64).is_err());
        assert!(check("/n", "has space", 64).is_err());
        assert!(check("/n", "dot.ted", 64).is_err());
        assert!(check("/n", &"a".repeat(65), 64).is_err());
        assert!(check_email("/e", "ops@example.com").is_ok());
        assert!(check_email("/e", "ops").is_err());
    }
}
