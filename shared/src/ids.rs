//! Resource ids (`team-…`, `ws-…`) and random secrets.

use rand::{distributions::Alphanumeric, rngs::OsRng, Rng};

/// `len` random alphanumeric characters from the operating system's generator.
pub fn random_token(len: usize) -> String {
    OsRng.sample_iter(&Alphanumeric).take(len).map(char::from).collect()
}

/// A new resource id with the given prefix, e.g. `new_id("ws")` → `ws-6a1ZkG3pQv8TnY2r`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", random_token(16))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_their_prefix_and_differ() {
        let (a, b) = (new_id("ws"), new_id("ws"));
        assert!(a.starts_with("ws-") && a.len() == 19);
        assert_ne!(a, b);
    }
}
