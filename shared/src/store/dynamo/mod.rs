//! The AWS adapter: the item store on one DynamoDB table (keys `PK`/`SK`, indexes `GSI1`/`GSI2`,
//! TTL on `expires_at`). Its semantics are the SQLite adapter's, also for expired items that
//! DynamoDB has not removed yet (it may take days): they read as absent, count as absent in
//! conditions, and are cleared before an update could merge into them.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, CancellationReason, ConditionCheck, Delete, GlobalSecondaryIndex,
    IndexStatus, KeySchemaElement, KeyType, Projection, ProjectionType, Put, ReturnValue,
    ReturnValuesOnConditionCheckFailure, ScalarAttributeType, TableStatus, TimeToLiveSpecification, TimeToLiveStatus,
    TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use rand::Rng as _;
use serde_json::{Map, Number, Value};

use super::{
    now_epoch, validate_transaction, Attrs, Condition, Cursor, Index, Item, ItemStore, Key, Page, Query, StoreError,
    UpdateOp, Write, PK, SK, TTL,
};

type Raw = HashMap<String, AttributeValue>;
type Names = Option<HashMap<String, String>>;
type Values = Option<Raw>;

const CONDITION_FAILED: &str = "ConditionalCheckFailed";
/// How many times an update is retried after clearing an expired item that failed its condition.
const EXPIRED_RETRIES: usize = 3;
/// How many times a transaction is tried while it conflicts with concurrent ones.
const CONFLICT_TRIES: u32 = 8;
const THROTTLING_CODES: [&str; 4] = [
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "ThrottlingException",
    "TransactionConflictException",
];
/// An attribute no item has: an update without operations removes it, as DynamoDB's
/// transactions require an update expression.
const NO_OP_ATTR: &str = "hangar:no-op";

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

    /// Deletes `stored` (what a failed write found under `key`) if it has expired and has not
    /// been rewritten since; tells whether it had expired.
    async fn clear_if_expired(&self, key: &Key, stored: Option<Raw>) -> Result<bool, StoreError> {
        let expired = stored.map(item_from).transpose()?.is_some_and(|item| item.is_expired(now_epoch()));
        if expired {
            let mut expr = Expr::new();
            let condition = expr.expired();
            let (names, values) = expr.into_maps();
            let result = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key_attrs(key)))
                .condition_expression(condition)
                .set_expression_attribute_names(names)
                .set_expression_attribute_values(values)
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

    /// Clears the expired items that failed the transaction's updates; tells whether any had.
    async fn clear_expired_updates(
        &self,
        writes: &[Write],
        reasons: &[CancellationReason],
    ) -> Result<bool, StoreError> {
        let mut any = false;
        for (write, reason) in writes.iter().zip(reasons) {
            if let (Write::Update { key, .. }, Some(CONDITION_FAILED)) = (write, reason.code()) {
                any |= self.clear_if_expired(key, reason.item().cloned()).await?;
            }
        }
        Ok(any)
    }

    fn transact_item(&self, write: &Write) -> Result<TransactWriteItem, StoreError> {
        let mut expr = Expr::new();
        let builder = TransactWriteItem::builder();
        let builder = match write {
            Write::Put { item, condition } => {
                let condition = expr.condition(condition);
                let (names, values) = expr.into_maps();
                let put = Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(raw_item(item)))
                    .set_condition_expression(condition)
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values);
                builder.put(put.build().map_err(StoreError::backend)?)
            }
            Write::Update { key, ops, condition } => {
                let update = expr.update(ops)?;
                let condition = expr.update_condition(condition);
                let (names, values) = expr.into_maps();
                let update = Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(key_attrs(key)))
                    .update_expression(update)
                    .condition_expression(condition)
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values)
                    .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
                builder.update(update.build().map_err(StoreError::backend)?)
            }
            Write::Delete { key, condition } => {
                let condition = expr.condition(condition);
                let (names, values) = expr.into_maps();
                let delete = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(key_attrs(key)))
                    .set_condition_expression(condition)
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values);
                builder.delete(delete.build().map_err(StoreError::backend)?)
            }
            Write::Check { key, condition } => {
                let condition = match expr.condition(condition) {
                    Some(condition) => condition,
                    None => expr.always(),
                };
                let (names, values) = expr.into_maps();
                let check = ConditionCheck::builder()
                    .table_name(&self.table)
                    .set_key(Some(key_attrs(key)))
                    .condition_expression(condition)
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values);
                builder.condition_check(check.build().map_err(StoreError::backend)?)
            }
        };
        Ok(builder.build())
    }
}

#[async_trait]
impl ItemStore for DynamoStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
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

    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
        let mut expr = Expr::new();
        let condition = expr.condition(&condition);
        let (names, values) = expr.into_maps();
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(raw_item(&item)))
            .set_condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .send()
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn update(&self, key: &Key, ops: Vec<UpdateOp>, condition: Condition) -> Result<Item, StoreError> {
        let mut cleared = 0;
        loop {
            let mut expr = Expr::new();
            let update = expr.update(&ops)?;
            let guard = expr.update_condition(&condition);
            let (names, values) = expr.into_maps();
            let result = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key_attrs(key)))
                .update_expression(update)
                .condition_expression(guard)
                .set_expression_attribute_names(names)
                .set_expression_attribute_values(values)
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
        let mut expr = Expr::new();
        let condition = expr.condition(&condition);
        let (names, values) = expr.into_maps();
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key_attrs(key)))
            .set_condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
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
        let (part_attr, sort_attr) = query.index.map_or((PK, SK), Index::key_attrs);
        let mut expr = Expr::new();
        let (part, part_value) = (expr.name(part_attr), expr.value(AttributeValue::S(query.partition.clone())));
        let mut key_condition = format!("{part} = {part_value}");
        if !query.sk_prefix.is_empty() {
            let (sort, prefix) = (expr.name(sort_attr), expr.value(AttributeValue::S(query.sk_prefix.clone())));
            key_condition += &format!(" AND begins_with({sort}, {prefix})");
        }
        let (names, values) = expr.into_maps();
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
                .key_condition_expression(&key_condition)
                .set_expression_attribute_names(names.clone())
                .set_expression_attribute_values(values.clone())
                .scan_index_forward(!query.reverse)
                .limit(i32::try_from(want).unwrap_or(i32::MAX))
                .consistent_read(query.index.is_none())
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(classify)?;
            for raw in out.items.unwrap_or_default() {
                let item = item_from(raw)?;
                if !item.is_expired(now) {
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

/// The placeholders of one request's expressions. Each is added when first used, so none is
/// left unused (which DynamoDB rejects).
struct Expr {
    now: i64,
    now_used: bool,
    names: Vec<String>,
    values: Vec<AttributeValue>,
}

/// The net effect of a sequence of update operations on one attribute.
enum Effect {
    Set(Value),
    Remove,
    Add(i64),
}

impl Expr {
    fn new() -> Self {
        Self { now: now_epoch(), now_used: false, names: Vec::new(), values: Vec::new() }
    }

    fn name(&mut self, attr: &str) -> String {
        let position = self.names.iter().position(|name| name == attr).unwrap_or_else(|| {
            self.names.push(attr.to_owned());
            self.names.len() - 1
        });
        format!("#n{position}")
    }

    fn value(&mut self, value: AttributeValue) -> String {
        self.values.push(value);
        format!(":v{}", self.values.len() - 1)
    }

    fn into_maps(self) -> (Names, Values) {
        let names: HashMap<_, _> =
            self.names.into_iter().enumerate().map(|(i, name)| (format!("#n{i}"), name)).collect();
        let mut values: Raw = self.values.into_iter().enumerate().map(|(i, v)| (format!(":v{i}"), v)).collect();
        if self.now_used {
            values.insert(":now".into(), AttributeValue::N(self.now.to_string()));
        }
        ((!names.is_empty()).then_some(names), (!values.is_empty()).then_some(values))
    }

    /// The stored item is absent or has not expired.
    fn unexpired(&mut self) -> String {
        let ttl = self.name(TTL);
        self.now_used = true;
        format!("(attribute_not_exists({ttl}) OR {ttl} > :now)")
    }

    /// The stored item has expired (and so counts as absent).
    fn expired(&mut self) -> String {
        let ttl = self.name(TTL);
        self.now_used = true;
        format!("{ttl} <= :now")
    }

    fn always(&mut self) -> String {
        let pk = self.name(PK);
        format!("(attribute_exists({pk}) OR attribute_not_exists({pk}))")
    }

    fn never(&mut self) -> String {
        let pk = self.name(PK);
        format!("(attribute_exists({pk}) AND attribute_not_exists({pk}))")
    }

    /// The condition as an expression, `None` when it always holds. Exact on expired items:
    /// they count as absent, as in [`Condition::holds`].
    fn condition(&mut self, condition: &Condition) -> Option<String> {
        Some(match condition {
            Condition::Always => return None,
            Condition::Exists => {
                let pk = self.name(PK);
                format!("(attribute_exists({pk}) AND {})", self.unexpired())
            }
            Condition::NotExists => {
                let pk = self.name(PK);
                format!("(attribute_not_exists({pk}) OR {})", self.expired())
            }
            Condition::Equals(name, Value::Null) => {
                let (name, null) = (self.name(name), self.value(AttributeValue::S("NULL".into())));
                format!("(attribute_type({name}, {null}) AND {})", self.unexpired())
            }
            Condition::Equals(name, value) => {
                let (name, value) = (self.name(name), self.value(to_attribute(value)));
                format!("({name} = {value} AND {})", self.unexpired())
            }
            Condition::Below(name, bound) => {
                let (name, number) = (self.name(name), self.value(AttributeValue::S("N".into())));
                let bound_value = self.value(AttributeValue::N(bound.to_string()));
                // DynamoDB finds a comparison across types false; moto fails on it, so test the type first.
                let below = format!("(attribute_type({name}, {number}) AND {name} < {bound_value})");
                if *bound > 0 {
                    format!("(attribute_not_exists({name}) OR {below} OR {})", self.expired())
                } else {
                    format!("({below} AND {})", self.unexpired())
                }
            }
            Condition::And(all) => {
                let parts: Vec<_> = all.iter().filter_map(|c| self.condition(c)).collect();
                if parts.is_empty() {
                    return None;
                }
                format!("({})", parts.join(" AND "))
            }
            Condition::Or(any) => {
                if any.iter().any(always_holds) {
                    return None;
                }
                if any.is_empty() {
                    return Some(self.never());
                }
                let parts: Vec<_> = any.iter().filter_map(|c| self.condition(c)).collect();
                format!("({})", parts.join(" OR "))
            }
        })
    }

    /// An update's condition: also false on an expired item, which the caller then clears, so
    /// the update starts from nothing as it would in the SQLite adapter.
    fn update_condition(&mut self, condition: &Condition) -> String {
        match self.condition(condition) {
            Some(condition) => format!("{condition} AND {}", self.unexpired()),
            None => self.unexpired(),
        }
    }

    /// The update expression of `ops`, applied in order (DynamoDB allows one action per
    /// attribute, so consecutive operations on one attribute are merged first).
    fn update(&mut self, ops: &[UpdateOp]) -> Result<String, StoreError> {
        let mut effects: Vec<(&str, Effect)> = Vec::new();
        for op in ops {
            let name = match op {
                UpdateOp::Set(name, _) | UpdateOp::Remove(name) | UpdateOp::Add(name, _) => name.as_str(),
            };
            let slot = effects.iter().position(|(n, _)| *n == name);
            let effect = match (op, slot.map(|i| &effects[i].1)) {
                (UpdateOp::Set(_, value), _) => Effect::Set(value.clone()),
                (UpdateOp::Remove(_), _) => Effect::Remove,
                (UpdateOp::Add(_, delta), None) => Effect::Add(*delta),
                (UpdateOp::Add(_, delta), Some(Effect::Remove)) => Effect::Set(Value::from(*delta)),
                (UpdateOp::Add(_, delta), Some(Effect::Add(prior))) => Effect::Add(add(*prior, *delta, name)?),
                (UpdateOp::Add(_, delta), Some(Effect::Set(value))) => {
                    let prior = value
                        .as_i64()
                        .ok_or_else(|| StoreError::Backend(format!("ADD on non-numeric attribute {name}")))?;
                    Effect::Set(Value::from(add(prior, *delta, name)?))
                }
            };
            match slot {
                Some(i) => effects[i].1 = effect,
                None => effects.push((name, effect)),
            }
        }
        let (mut set, mut remove, mut add_clauses) = (Vec::new(), Vec::new(), Vec::new());
        for (name, effect) in effects {
            let name = self.name(name);
            match effect {
                Effect::Set(value) => set.push(format!("{name} = {}", self.value(to_attribute(&value)))),
                Effect::Remove => remove.push(name),
                Effect::Add(delta) => {
                    add_clauses.push(format!("{name} {}", self.value(AttributeValue::N(delta.to_string()))))
                }
            }
        }
        if set.is_empty() && remove.is_empty() && add_clauses.is_empty() {
            remove.push(self.name(NO_OP_ATTR));
        }
        let clauses = [("SET", set), ("REMOVE", remove), ("ADD", add_clauses)];
        let clauses: Vec<_> = clauses
            .into_iter()
            .filter(|(_, actions)| !actions.is_empty())
            .map(|(keyword, actions)| format!("{keyword} {}", actions.join(", ")))
            .collect();
        Ok(clauses.join(" "))
    }
}

fn add(a: i64, b: i64, name: &str) -> Result<i64, StoreError> {
    a.checked_add(b).ok_or_else(|| StoreError::Backend(format!("ADD overflows attribute {name}")))
}

fn always_holds(condition: &Condition) -> bool {
    match condition {
        Condition::Always => true,
        Condition::And(all) => all.iter().all(always_holds),
        Condition::Or(any) => any.iter().any(always_holds),
        _ => false,
    }
}

fn key_attrs(key: &Key) -> Raw {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(key.pk.clone())),
        (SK.to_owned(), AttributeValue::S(key.sk.clone())),
    ])
}

fn raw_item(item: &Item) -> Raw {
    let mut raw: Raw = item.attrs.iter().map(|(name, value)| (name.clone(), to_attribute(value))).collect();
    raw.extend(key_attrs(&item.key));
    raw
}

fn item_from(mut raw: Raw) -> Result<Item, StoreError> {
    let mut key_part = |name: &str| match raw.remove(name) {
        Some(AttributeValue::S(part)) => Ok(part),
        _ => Err(StoreError::Backend(format!("stored item without a string {name}"))),
    };
    let key = Key::new(key_part(PK)?, key_part(SK)?);
    Ok(Item::new(key, attrs_from(raw)?))
}

fn unexpired(raw: Option<Raw>) -> Result<Option<Item>, StoreError> {
    let now = now_epoch();
    Ok(raw.map(item_from).transpose()?.filter(|item| !item.is_expired(now)))
}

fn attrs_from(raw: Raw) -> Result<Attrs, StoreError> {
    raw.into_iter()
        .filter(|(name, _)| name != PK && name != SK)
        .map(|(name, value)| Ok((name, from_attribute(value)?)))
        .collect()
}

fn to_attribute(value: &Value) -> AttributeValue {
    match value {
        Value::Null => AttributeValue::Null(true),
        Value::Bool(b) => AttributeValue::Bool(*b),
        Value::Number(n) => AttributeValue::N(n.to_string()),
        Value::String(s) => AttributeValue::S(s.clone()),
        Value::Array(list) => AttributeValue::L(list.iter().map(to_attribute).collect()),
        Value::Object(map) => AttributeValue::M(map.iter().map(|(k, v)| (k.clone(), to_attribute(v))).collect()),
    }
}

fn from_attribute(value: AttributeValue) -> Result<Value, StoreError> {
    Ok(match value {
        AttributeValue::Null(_) => Value::Null,
        AttributeValue::Bool(b) => Value::Bool(b),
        AttributeValue::N(n) => number(&n)?,
        AttributeValue::S(s) => Value::String(s),
        AttributeValue::L(list) => Value::Array(list.into_iter().map(from_attribute).collect::<Result<_, _>>()?),
        AttributeValue::M(map) => Value::Object(
            map.into_iter().map(|(k, v)| Ok((k, from_attribute(v)?))).collect::<Result<Map<_, _>, StoreError>>()?,
        ),
        other => return Err(StoreError::Backend(format!("unsupported attribute value {other:?}"))),
    })
}

/// A DynamoDB number as JSON: an integer when it is integral, else a float.
fn number(raw: &str) -> Result<Value, StoreError> {
    if let Ok(int) = raw.parse::<i64>() {
        return Ok(int.into());
    }
    if let Ok(int) = raw.parse::<u64>() {
        return Ok(int.into());
    }
    let float: f64 = raw.parse().map_err(|_| StoreError::Backend(format!("invalid stored number {raw}")))?;
    if float.fract() == 0.0 && float.abs() < i64::MAX as f64 {
        return Ok((float as i64).into());
    }
    Number::from_f64(float)
        .map(Value::Number)
        .ok_or_else(|| StoreError::Backend(format!("invalid stored number {raw}")))
}

/// Where the next page starts: the key attributes of the page's last item, exactly what
/// DynamoDB's `LastEvaluatedKey` would hold there.
fn cursor_at(last: &Item, index: Option<Index>) -> Result<Cursor, StoreError> {
    let mut position = Map::new();
    position.insert(PK.into(), last.key.pk.clone().into());
    position.insert(SK.into(), last.key.sk.clone().into());
    if let Some(index) = index {
        let (pk, sk) = last.index_key(index).ok_or_else(|| StoreError::backend("index item without its keys"))?;
        let (pk_attr, sk_attr) = index.key_attrs();
        position.insert(pk_attr.into(), pk.into());
        position.insert(sk_attr.into(), sk.into());
    }
    Ok(Cursor::encode(&position))
}

/// The `ExclusiveStartKey` a cursor stands for, checked to be one of this query's positions.
fn start_key(cursor: &Cursor, query: &Query) -> Result<Raw, StoreError> {
    let position = cursor.decode()?;
    let mut expected = vec![PK, SK];
    if let Some(index) = query.index {
        let (pk_attr, sk_attr) = index.key_attrs();
        expected.extend([pk_attr, sk_attr]);
    }
    let partition_attr = query.index.map_or(PK, |index| index.key_attrs().0);
    if position.len() != expected.len() || position.get(partition_attr) != Some(&Value::from(query.partition.as_str()))
    {
        return Err(StoreError::InvalidCursor);
    }
    expected
        .into_iter()
        .map(|name| match position.get(name) {
            Some(Value::String(part)) => Ok((name.to_owned(), AttributeValue::S(part.clone()))),
            _ => Err(StoreError::InvalidCursor),
        })
        .collect()
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

/// Why each write of a cancelled transaction failed (code `None` for the writes that did not).
fn cancellation_reasons(err: &SdkError<TransactWriteItemsError>) -> Option<Vec<CancellationReason>> {
    match err.as_service_error()? {
        TransactWriteItemsError::TransactionCanceledException(e) => Some(e.cancellation_reasons().to_vec()),
        _ => None,
    }
}

async fn backoff(attempt: u32) {
    let ceiling = 10u64 << attempt.min(5);
    let millis = rand::thread_rng().gen_range(ceiling / 2..=ceiling);
    tokio::time::sleep(Duration::from_millis(millis)).await;
}
