//! Page cursors as DynamoDB start keys. A cursor holds exactly the `LastEvaluatedKey` DynamoDB
//! would report at a page's last item; one that comes back must be a position of its own query
//! (the same key attributes, the same partition), so a cursor from another query is refused
//! rather than handed to DynamoDB.

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Value};

use super::convert::Raw;
use crate::store::{Cursor, Index, Item, Query, StoreError, PK, SK};

/// Where the next page starts: the key attributes of the page's last item, exactly what
/// DynamoDB's `LastEvaluatedKey` would hold there.
pub(super) fn cursor_at(last: &Item, index: Option<Index>) -> Result<Cursor, StoreError> {
    let mut position = Map::new();
    position.insert(PK.into(), last.key.pk.clone().into());
    position.insert(SK.into(), last.key.sk.clone().into());
    if let Some(index) = index {
        let (pk, sk) = last.index_key(index)?.ok_or_else(|| StoreError::backend("index item without its keys"))?;
        let (pk_attr, sk_attr) = index.key_attrs();
        position.insert(pk_attr.into(), pk.into());
        position.insert(sk_attr.into(), sk.into());
    }
    Ok(Cursor::encode(&position))
}

/// The `ExclusiveStartKey` a cursor stands for, checked to be one of this query's positions.
pub(super) fn start_key(cursor: &Cursor, query: &Query) -> Result<Raw, StoreError> {
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
