//! Provisioning for local runs and tests (dev-server `--init`, the contract suites), where no SAM
//! stack has created the table: the template's keys, indexes and TTL, billed on demand.

use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, IndexStatus, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TableStatus, TimeToLiveSpecification, TimeToLiveStatus,
};

use super::{classify, error_code, DynamoStore};
use crate::store::{Index, StoreError, PK, SK, TTL};

impl DynamoStore {
    /// Creates the table (on-demand, with both indexes) unless it exists, waits until it is
    /// active, and enables TTL where the service supports it.
    pub async fn create_table_if_missing(&self) -> Result<(), StoreError> {
        match self.client.describe_table().table_name(&self.table).send().await {
            Ok(_) => {}
            Err(e) if error_code(&e) == Some("ResourceNotFoundException") => self.create_table().await?,
            Err(e) => return Err(classify(e)),
        }
        self.wait_until_active().await?;
        if let Err(e) = self.enable_ttl().await {
            tracing::warn!(table = %self.table, error = %e, "TTL not enabled: expired items stay stored, hidden");
        }
        Ok(())
    }

    async fn create_table(&self) -> Result<(), StoreError> {
        let string_attr = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(StoreError::backend)
        };
        let key = |name: &str, key_type: KeyType| {
            KeySchemaElement::builder().attribute_name(name).key_type(key_type).build().map_err(StoreError::backend)
        };
        let mut request = self
            .client
            .create_table()
            .table_name(&self.table)
            .billing_mode(BillingMode::PayPerRequest)
            .key_schema(key(PK, KeyType::Hash)?)
            .key_schema(key(SK, KeyType::Range)?)
            .attribute_definitions(string_attr(PK)?)
            .attribute_definitions(string_attr(SK)?);
        for index in Index::ALL {
            let (pk, sk) = index.key_attrs();
            let gsi = GlobalSecondaryIndex::builder()
                .index_name(index.name())
                .key_schema(key(pk, KeyType::Hash)?)
                .key_schema(key(sk, KeyType::Range)?)
                .projection(Projection::builder().projection_type(ProjectionType::All).build())
                .build()
                .map_err(StoreError::backend)?;
            request = request
                .attribute_definitions(string_attr(pk)?)
                .attribute_definitions(string_attr(sk)?)
                .global_secondary_indexes(gsi);
        }
        match request.send().await {
            Err(e) if error_code(&e) != Some("ResourceInUseException") => Err(classify(e)),
            _ => Ok(()),
        }
    }

    async fn wait_until_active(&self) -> Result<(), StoreError> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
        let mut pause = Duration::from_millis(100);
        loop {
            let out = self.client.describe_table().table_name(&self.table).send().await.map_err(classify)?;
            let active = out.table().is_some_and(|table| {
                table.table_status() == Some(&TableStatus::Active)
                    && table
                        .global_secondary_indexes()
                        .iter()
                        .all(|gsi| gsi.index_status().is_none_or(|status| *status == IndexStatus::Active))
            });
            if active {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(StoreError::Backend(format!("table {} did not become active", self.table)));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    async fn enable_ttl(&self) -> Result<(), StoreError> {
        let current = self.client.describe_time_to_live().table_name(&self.table).send().await.map_err(classify)?;
        let status = current.time_to_live_description().and_then(|d| d.time_to_live_status());
        if matches!(status, Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)) {
            return Ok(());
        }
        let spec = TimeToLiveSpecification::builder()
            .attribute_name(TTL)
            .enabled(true)
            .build()
            .map_err(StoreError::backend)?;
        let request = self.client.update_time_to_live().table_name(&self.table).time_to_live_specification(spec);
        request.send().await.map_err(classify)?;
        Ok(())
    }
}
