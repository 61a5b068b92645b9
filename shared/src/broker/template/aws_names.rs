//! The names AWS accepts for IAM users, role sessions and federated users: their lengths and
//! alphabet, and Vault's normalisation of the names a template is given.

/// The longest IAM user name AWS accepts.
pub const IAM_USERNAME_MAX: usize = 64;
/// The longest STS federated user name AWS accepts.
pub const STS_USERNAME_MAX: usize = 32;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
