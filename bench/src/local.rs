//! Hangar in this process, on the embedded store in a temporary directory, with the store
//! wrapped in the counting adapter and the broker's AWS replaced by the fake.

use std::sync::Arc;

use hangar::app::routers;
use hangar::config::{Config, StoreKind};
use hangar::state::AppState;

use crate::api::Api;
use crate::counting::{Counters, CountingStore};
use crate::fake_cloud::FakeCloud;

pub const ADMIN_TOKEN: &str = "bench-admin-token-0123456789abcdef";
pub const ROOT_TOKEN: &str = "bench-root-token-0123456789abcdef";

pub struct Local {
    pub state: AppState,
    pub api: Api,
    pub counters: Arc<Counters>,
    pub cloud: Arc<FakeCloud>,
    _dir: tempfile::TempDir,
}

impl Local {
    pub async fn start(config: Config) -> Local {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = Config {
            store: StoreKind::Sqlite,
            data_dir: dir.path().to_path_buf(),
            admin_token: Some(ADMIN_TOKEN.into()),
            root_service_token: Some(ROOT_TOKEN.into()),
            public_url: Some("http://hangar.local".into()),
            max_agent_pools: crate::endpoints::AGENT_POOLS,
            ..config
        };
        let mut state = AppState::build(config, false).await.expect("Hangar's state builds");
        hangar::bootstrap::install_tokens(&state, hangar::bootstrap::Unconfigured::Leave)
            .await
            .expect("tokens install");
        let (store, counters) = CountingStore::wrap(state.store.clone());
        state.store = store;
        let cloud = crate::fake_cloud::install(&state).await;
        let api = Api::InProcess(routers::all(state.clone()));
        Local { state, api, counters, cloud, _dir: dir }
    }
}
