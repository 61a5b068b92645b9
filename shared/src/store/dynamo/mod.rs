//! The AWS adapter: the item store on one DynamoDB table (keys `PK`/`SK`, indexes `GSI1`/`GSI2`,
//! TTL on `expires_at`). Its semantics are the SQLite adapter's, also for expired items that
//! DynamoDB has not removed yet (it may take days): they read as absent, count as absent in
//! conditions, and are cleared before an update could merge into them.

mod convert;
mod cursor;
mod expression;
mod table;
mod transaction;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{KeysAndAttributes, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;

use super::{
    now_epoch, validate_transaction, Condition, Item, ItemStore, Key, Page, Query, StoreError, UpdateOp, Write,
};
use convert::{attrs_from, item_from, key_attrs, raw_item, unexpired, Raw};
use cursor::{cursor_at, start_key};
use expression::Expressions;
use transaction::{backoff, cancellation_reasons};

const CONDITION_FAILED: &str = "ConditionalCheckFailed";
/// How many times an update is retried after clearing an expired item that failed its condition.
const EXPIRED_RETRIES: usize = 3;
/// How many times a transaction is tried while it conflicts with concurrent ones.
const CONFLICT_TRIES: u32 = 8;
/// The most keys one BatchGetItem call reads.
const BATCH_GET_KEYS: usize = 100;
const THROTTLING_CODES: [&str; 4] = [
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "ThrottlingException",
    "TransactionConflictException",
];

/// The item store on a DynamoDB table.
#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
}

impl DynamoStore {
    /// A store on `table`, which must exist (see [`DynamoStore::create_table_if_missing`]).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    /// Deletes `stored` (what a failed write found under `key`) if it has expired and has not
    /// been rewritten since; tells whether it had expired.
    async fn clear_if_expired(&self, key: &Key, stored: Option<Raw>) -> Result<bool, StoreError> {
        let stored = stored.map(item_from).transpose()?;
        let expired = stored.map(|item| item.is_expired(now_epoch())).transpose()? == Some(true);
        if expired {
            let expr = Expressions::expired();
            let result = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key_attrs(key)))
                .set_condition_expression(expr.condition)
                .set_expression_attribute_names(expr.names)
                .set_expression_attribute_values(expr.values)
                .send()
                .await
                .map_err(classify);
            if let Err(e) = result {
                if !e.is_condition_failed() {
                    return Err(e);
                }
            }
        }
        Ok(expired)
    }
}

/// Whether DynamoDB could hold an item at `key`: a partition key of at most 2,048 bytes and a sort
/// key of at most 1,024. A read of any other key (one built from a request's overlong path) names
/// no item, and asking would fail the whole call, a batch with other keys included.
fn storable(key: &Key) -> bool {
    key.pk.len() <= 2048 && key.sk.len() <= 1024
}

#[async_trait]
impl ItemStore for DynamoStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        if !storable(key) {
            return Ok(None);
        }
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key_attrs(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(classify)?;
        unexpired(out.item)
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, StoreError> {
        let mut found = std::collections::HashMap::new();
        // BatchGetItem takes at most 100 distinct keys and may leave some unprocessed.
        let distinct: Vec<&Key> =
            keys.iter().filter(|key| storable(key)).collect::<std::collections::HashSet<_>>().into_iter().collect();
        for chunk in distinct.chunks(BATCH_GET_KEYS) {
            let mut wanted = KeysAndAttributes::builder()
                .set_keys(Some(chunk.iter().map(|key| key_attrs(key)).collect()))
                .consistent_read(true)
                .build()
                .map_err(StoreError::backend)?;
            let mut tries = 0;
            loop {
                let out =
                    self.client.batch_get_item().request_items(&self.table, wanted).send().await.map_err(classify)?;
                for raw in out.responses.and_then(|mut tables| tables.remove(&self.table)).unwrap_or_default() {
                    if let Some(item) = unexpired(Some(raw))? {
                        found.insert(item.key.clone(), item);
                    }
                }
                match out.unprocessed_keys.and_then(|mut tables| tables.remove(&self.table)) {
                    Some(rest) if !rest.keys().is_empty() => {
                        tries += 1;
                        if tries == CONFLICT_TRIES {
                            return Err(StoreError::Throttled);
                        }
                        backoff(tries).await;
                        wanted = rest;
                    }
                    _ => break,
                }
            }
        }
        Ok(keys.iter().map(|key| found.get(key).cloned()).collect())
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
        let expr = Expressions::conditional(&condition);
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(raw_item(&item)?))
            .set_condition_expression(expr.condition)
            .set_expression_attribute_names(expr.names)
            .set_expression_attribute_values(expr.values)
            .send()
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn update(&self, key: &Key, ops: Vec<UpdateOp>, condition: Condition) -> Result<Item, StoreError> {
        let mut cleared = 0;
        loop {
            let expr = Expressions::update(&ops, &condition)?;
            let result = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key_attrs(key)))
                .set_update_expression(expr.update)
                .set_condition_expression(expr.condition)
                .set_expression_attribute_names(expr.names)
                .set_expression_attribute_values(expr.values)
                .return_values(ReturnValue::AllNew)
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .send()
                .await;
            let err = match result {
                Ok(out) => return Ok(Item::new(key.clone(), attrs_from(out.attributes.unwrap_or_default())?)),
                Err(err) => err,
            };
            let Some(UpdateItemError::ConditionalCheckFailedException(failed)) = err.as_service_error() else {
                return Err(classify(err));
            };
            if cleared == EXPIRED_RETRIES || !self.clear_if_expired(key, failed.item().cloned()).await? {
                return Err(StoreError::ConditionFailed { write: None });
            }
            cleared += 1;
        }
    }

    async fn delete(&self, key: &Key, condition: Condition) -> Result<Option<Item>, StoreError> {
        let expr = Expressions::conditional(&condition);
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key_attrs(key)))
            .set_condition_expression(expr.condition)
            .set_expression_attribute_names(expr.names)
            .set_expression_attribute_values(expr.values)
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(classify)?;
        unexpired(out.attributes)
    }

    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        if query.limit == 0 {
            return Ok(Page::default());
        }
        let mut start = query.cursor.as_ref().map(|cursor| start_key(cursor, &query)).transpose()?;
        let expr = Expressions::key_condition(&query);
        let now = now_epoch();
        let mut items = Vec::new();
        // One item past the limit tells whether there is a next page, as in the SQLite adapter.
        loop {
            let want = query.limit + 1 - items.len();
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(query.index.map(|index| index.name().to_owned()))
                .set_key_condition_expression(expr.condition.clone())
                .set_expression_attribute_names(expr.names.clone())
                .set_expression_attribute_values(expr.values.clone())
                .scan_index_forward(!query.reverse)
                .limit(i32::try_from(want).unwrap_or(i32::MAX))
                .consistent_read(query.index.is_none())
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(classify)?;
            for raw in out.items.unwrap_or_default() {
                let item = item_from(raw)?;
                if !item.is_expired(now)? {
                    items.push(item);
                }
            }
            if items.len() > query.limit {
                items.truncate(query.limit);
                let next = items.last().map(|last| cursor_at(last, query.index)).transpose()?;
                return Ok(Page { items, next });
            }
            match out.last_evaluated_key {
                Some(key) => start = Some(key),
                None => return Ok(Page { items, next: None }),
            }
        }
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        validate_transaction(&writes)?;
        if writes.is_empty() {
            return Ok(());
        }
        let (mut conflicts, mut cleared) = (0, 0);
        loop {
            let items = writes.iter().map(|write| self.transact_item(write)).collect::<Result<Vec<_>, _>>()?;
            let err = match self.client.transact_write_items().set_transact_items(Some(items)).send().await {
                Ok(_) => return Ok(()),
                Err(err) => err,
            };
            let Some(reasons) = cancellation_reasons(&err) else {
                return Err(classify(err));
            };
            let codes: Vec<&str> = reasons.iter().map(|reason| reason.code().unwrap_or("None")).collect();
            if let Some(failed) = codes.iter().position(|code| *code == CONDITION_FAILED) {
                if cleared < EXPIRED_RETRIES && self.clear_expired_updates(&writes, &reasons).await? {
                    cleared += 1;
                    continue;
                }
                return Err(StoreError::ConditionFailed { write: Some(failed) });
            }
            if codes.contains(&"TransactionConflict") {
                conflicts += 1;
                if conflicts == CONFLICT_TRIES {
                    return Err(StoreError::Throttled);
                }
                backoff(conflicts).await;
                continue;
            }
            if codes.iter().any(|code| ["ThrottlingError", "ProvisionedThroughputExceeded"].contains(code)) {
                return Err(StoreError::Throttled);
            }
            return Err(StoreError::Backend(DisplayErrorContext(&err).to_string()));
        }
    }
}

fn error_code<E: ProvideErrorMetadata>(err: &SdkError<E>) -> Option<&str> {
    err.as_service_error().and_then(ProvideErrorMetadata::code)
}

fn classify<E>(err: SdkError<E>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match error_code(&err) {
        Some("ConditionalCheckFailedException") => StoreError::ConditionFailed { write: None },
        Some(code) if THROTTLING_CODES.contains(&code) => StoreError::Throttled,
        _ => StoreError::Backend(DisplayErrorContext(&err).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_past_dynamodbs_limits_name_no_item() {
        assert!(storable(&Key::new("p".repeat(2048), "s".repeat(1024))));
        assert!(!storable(&Key::new("p".repeat(2049), "s")));
        assert!(!storable(&Key::new("p", "s".repeat(1025))));
    }
}
