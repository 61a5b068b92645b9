//! The pieces of a DynamoDB transaction: each port write as a `TransactWriteItem`, and the
//! reading of a cancelled transaction's reasons, which say per write whether its condition
//! failed (perhaps only on an expired item, to be cleared and retried) or it conflicted.

use std::time::Duration;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    CancellationReason, ConditionCheck, Delete, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use rand::Rng as _;

use super::convert::{key_attrs, raw_item};
use super::expression::Expressions;
use super::{DynamoStore, CONDITION_FAILED};
use crate::store::{StoreError, Write};

impl DynamoStore {
    pub(super) fn transact_item(&self, write: &Write) -> Result<TransactWriteItem, StoreError> {
        let builder = TransactWriteItem::builder();
        let builder = match write {
            Write::Put { item, condition } => {
                let expr = Expressions::conditional(condition);
                let put = Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(raw_item(item)?))
                    .set_condition_expression(expr.condition)
                    .set_expression_attribute_names(expr.names)
                    .set_expression_attribute_values(expr.values);
                builder.put(put.build().map_err(StoreError::backend)?)
            }
            Write::Update { key, ops, condition } => {
                let expr = Expressions::update(ops, condition)?;
                let update = Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(key_attrs(key)))
                    .set_update_expression(expr.update)
                    .set_condition_expression(expr.condition)
                    .set_expression_attribute_names(expr.names)
                    .set_expression_attribute_values(expr.values)
                    .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
                builder.update(update.build().map_err(StoreError::backend)?)
            }
            Write::Delete { key, condition } => {
                let expr = Expressions::conditional(condition);
                let delete = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(key_attrs(key)))
                    .set_condition_expression(expr.condition)
                    .set_expression_attribute_names(expr.names)
                    .set_expression_attribute_values(expr.values);
                builder.delete(delete.build().map_err(StoreError::backend)?)
            }
            Write::Check { key, condition } => {
                let expr = Expressions::check(condition);
                let check = ConditionCheck::builder()
                    .table_name(&self.table)
                    .set_key(Some(key_attrs(key)))
                    .set_condition_expression(expr.condition)
                    .set_expression_attribute_names(expr.names)
                    .set_expression_attribute_values(expr.values);
                builder.condition_check(check.build().map_err(StoreError::backend)?)
            }
        };
        Ok(builder.build())
    }

    /// Clears the expired items that failed the transaction's updates; tells whether any had.
    pub(super) async fn clear_expired_updates(
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
}

/// Why each write of a cancelled transaction failed (code `None` for the writes that did not).
pub(super) fn cancellation_reasons(err: &SdkError<TransactWriteItemsError>) -> Option<Vec<CancellationReason>> {
    match err.as_service_error()? {
        TransactWriteItemsError::TransactionCanceledException(e) => Some(e.cancellation_reasons().to_vec()),
        _ => None,
    }
}

/// A pause that grows with `attempt`, jittered so that conflicting transactions drift apart.
pub(super) async fn backoff(attempt: u32) {
    let ceiling = 10u64 << attempt.min(5);
    let millis = rand::thread_rng().gen_range(ceiling / 2..=ceiling);
    tokio::time::sleep(Duration::from_millis(millis)).await;
}
