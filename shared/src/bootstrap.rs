//! The bootstrap tokens, installed once per start: the site-admin token of the management APIs
//! and the broker's root service token. Each has one record in the store, so a start configured
//! with a new value replaces the old one (which stops working at once), a start with the same
//! value changes nothing (a root token revoked through `revoke-self` stays revoked), and a root
//! service token configured as `none` leaves the broker without one. A start that is not given a
//! token (a function without its secret) leaves it as it is; dev-server also generates the ones
//! that were never configured nor generated before.

use crate::state::{AppState, BootError};

/// What to do about a bootstrap token that is not configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unconfigured {
    /// Leave it as it is (the functions: only those given a token's secret install it).
    Leave,
    /// Generate one on the first start and hand it back to be shown once (dev-server).
    Generate,
}

/// The secrets generated at this start, if any (they are never shown again).
#[derive(Debug, Default)]
pub struct Generated {
    pub admin_token: Option<String>,
    pub root_service_token: Option<String>,
}

/// What the configuration says about the root service token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootSetting<'a> {
    /// Not given to this process.
    Unset,
    /// This secret.
    Secret(&'a str),
    /// No root token at all: the broker is managed through the tokens it issued.
    Disabled,
}

/// The value that stands for "no root service token" (`HANGAR_ROOT_SERVICE_TOKEN=none`, or the
/// secret's value in AWS, where a secret cannot be empty).
pub const NO_ROOT_TOKEN: &str = "none";

/// Reads the configured root service token (`HANGAR_ROOT_SERVICE_TOKEN`, or its secret in AWS):
/// `none` (any case) disables it; surrounding whitespace is not part of a token.
pub fn root_setting(configured: Option<&str>) -> RootSetting<'_> {
    match configured.map(str::trim) {
        None | Some("") => RootSetting::Unset,
        Some(value) if value.eq_ignore_ascii_case(NO_ROOT_TOKEN) => RootSetting::Disabled,
        Some(secret) => RootSetting::Secret(secret),
    }
}

/// Installs (hashed) or replaces the configured tokens, removes a root token configured as
/// `none`, then generates the missing ones when asked to. Logs what changed, never a secret.
pub async fn install_tokens(state: &AppState, unconfigured: Unconfigured) -> Result<Generated, BootError> {
    use crate::auth::{self, AdminInstall};
    use crate::broker::tokens::{self, RootInstall};
    let store = state.store.as_ref();
    let broker = |e: crate::broker::BrokerError| BootError::Bootstrap(e.to_string());
    let now = chrono::Utc::now().timestamp();
    let mut generated = Generated::default();
    let admin = match state.config.admin_token.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(secret) => auth::install_admin_token(store, secret).await?,
        None if unconfigured == Unconfigured::Generate && !auth::admin_token_exists(store).await? => {
            let secret = auth::new_secret();
            auth::install_admin_token(store, &secret).await?;
            generated.admin_token = Some(secret);
            AdminInstall::Unchanged
        }
        None => AdminInstall::Unchanged,
    };
    if admin == AdminInstall::Installed {
        tracing::info!("site-admin token installed; the one installed before, if any, no longer works");
    }
    if let Some(secret) = state.config.runner_token.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        install_runner_token(state, secret).await?;
    }
    let installed = match root_setting(state.config.root_service_token.as_deref()) {
        RootSetting::Secret(secret) => tokens::install_root(store, Some(secret), now).await.map_err(broker)?,
        RootSetting::Disabled => tokens::install_root(store, None, now).await.map_err(broker)?,
        RootSetting::Unset
            if unconfigured == Unconfigured::Generate && !tokens::root_configured(store).await.map_err(broker)? =>
        {
            let secret = format!("hvs.{}", crate::ids::random_token(24));
            let installed = tokens::install_root(store, Some(&secret), now).await.map_err(broker)?;
            generated.root_service_token = Some(secret);
            installed
        }
        RootSetting::Unset => RootInstall::Unchanged,
    };
    match installed {
        RootInstall::Unchanged => {}
        RootInstall::Installed => tracing::info!("root service token installed"),
        RootInstall::Rotated => tracing::info!("root service token rotated; the previous secret no longer works"),
        RootInstall::Removed => {
            tracing::info!("no root service token: the broker is managed through the tokens it issued")
        }
        RootInstall::Deferred => {}
    }
    if installed.leaves_work() {
        // The revocation of a replaced or removed root finishes in the scheduled job.
        state.work.notify_one();
    }
    Ok(generated)
}

/// Installs the token Hangar's own runners register with, and the site's pool they register to.
pub async fn install_runner_token(state: &AppState, secret: &str) -> Result<(), BootError> {
    let store = state.store.as_ref();
    crate::agents::pool::ensure_site_pool(store).await?;
    if crate::auth::install_runner_token(store, secret).await? == crate::auth::AdminInstall::Installed {
        tracing::info!("the runners' token installed; the one installed before, if any, no longer works");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_in_any_case_disables_the_root_token_and_blank_is_unset() {
        assert_eq!(root_setting(None), RootSetting::Unset);
        assert_eq!(root_setting(Some("  \n")), RootSetting::Unset);
        for none in ["none", "NONE", " None\n"] {
            assert_eq!(root_setting(Some(none)), RootSetting::Disabled, "{none:?}");
        }
        assert_eq!(root_setting(Some(" hvs.abc\n")), RootSetting::Secret("hvs.abc"));
        assert_eq!(root_setting(Some("nonesuch")), RootSetting::Secret("nonesuch"));
    }
}
