//! Resource ids (`team-…`, `ws-…`) and random secrets.

use rand::{distributions::Alphanumeric, rngs::OsRng, Rng};

/// `len` random alphanumeric characters from the operating system's generator.
pub fn random_token(len: usize) -> String {
    OsRng.sample_iter(&Alphanumeric).take(len).map(char::from).collect()
}

/// How many random characters follow a resource id's prefix.
pub const ID_CHARS: usize = 16;

/// The prefix of an organization's id (organizations are addressed by name, so it is no
/// [`Kind`]); a team token's secret carries the id's random part (`auth::new_team_secret`).
pub const ORGANIZATION_PREFIX: &str = "org";

/// A new resource id with the given prefix, e.g. `new_id("ws")` → `ws-6a1ZkG3pQv8TnY2r`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", random_token(ID_CHARS))
}

/// The kinds of resource addressed by their own id (`/teams/team-…`), each known by its id's
/// prefix. An id names at most one kind, so a request can be refused before anything is read
/// when its id is not of the kind the route serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Team,
    Workspace,
    AgentPool,
    AgentToken,
    Agent,
    OAuthClient,
    OAuthToken,
    Module,
    StateVersion,
    Variable,
    TeamAccess,
    ConfigurationVersion,
    Run,
}

impl Kind {
    const ALL: [Kind; 13] = [
        Kind::Team,
        Kind::Workspace,
        Kind::AgentPool,
        Kind::AgentToken,
        Kind::Agent,
        Kind::OAuthClient,
        Kind::OAuthToken,
        Kind::Module,
        Kind::StateVersion,
        Kind::Variable,
        Kind::TeamAccess,
        Kind::ConfigurationVersion,
        Kind::Run,
    ];

    /// The prefix of this kind's ids, before the dash.
    pub const fn prefix(self) -> &'static str {
        match self {
            Kind::Team => "team",
            Kind::Workspace => "ws",
            Kind::AgentPool => "apool",
            Kind::AgentToken => "at",
            Kind::Agent => "agent",
            Kind::OAuthClient => "oc",
            Kind::OAuthToken => "ot",
            Kind::Module => "mod",
            Kind::StateVersion => "sv",
            Kind::Variable => "var",
            Kind::TeamAccess => "tws",
            Kind::ConfigurationVersion => "cv",
            Kind::Run => "run",
        }
    }

    /// The kind `id` names: its prefix, a dash and something after it.
    pub fn of(id: &str) -> Option<Kind> {
        let (prefix, rest) = id.split_once('-')?;
        Self::ALL.into_iter().find(|kind| kind.prefix() == prefix).filter(|_| !rest.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_names_one_kind_by_its_prefix() {
        assert_eq!(Kind::of(&new_id("team")), Some(Kind::Team));
        assert_eq!(Kind::of("agent-x"), Some(Kind::Agent));
        assert_eq!(Kind::of("at-x"), Some(Kind::AgentToken));
        for other in ["team-", "team", "teams-x", "org-x", "", "-x", "nonsense"] {
            assert_eq!(Kind::of(other), None, "{other}");
        }
    }

    #[test]
    fn ids_carry_their_prefix_and_differ() {
        let (a, b) = (new_id("ws"), new_id("ws"));
        assert!(a.starts_with("ws-") && a.len() == 19);
        assert_ne!(a, b);
    }
}
