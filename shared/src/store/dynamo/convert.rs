//! Items between the port's JSON attributes and DynamoDB's `AttributeValue`s. Only the JSON
//! shapes have a mapping (no sets, no binary), and numbers come back as integers whenever they
//! are integral, so an item reads back as it was written.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Number, Value};

use crate::store::{now_epoch, Attrs, Item, Key, StoreError, PK, SK};

/// An item, a key or a set of placeholder values as the SDK takes and returns them.
pub(super) type Raw = HashMap<String, AttributeValue>;

pub(super) fn key_attrs(key: &Key) -> Raw {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(key.pk.clone())),
        (SK.to_owned(), AttributeValue::S(key.sk.clone())),
    ])
}

pub(super) fn raw_item(item: &Item) -> Result<Raw, StoreError> {
    let mut raw: Raw = item.attrs()?.iter().map(|(name, value)| (name.clone(), to_attribute(value))).collect();
    raw.extend(key_attrs(&item.key));
    Ok(raw)
}

pub(super) fn item_from(mut raw: Raw) -> Result<Item, StoreError> {
    let mut key_part = |name: &str| match raw.remove(name) {
        Some(AttributeValue::S(part)) => Ok(part),
        _ => Err(StoreError::Backend(format!("stored item without a string {name}"))),
    };
    let key = Key::new(key_part(PK)?, key_part(SK)?);
    Ok(Item::new(key, attrs_from(raw)?))
}

/// The item DynamoDB returned, unless it has expired (DynamoDB may keep it for days).
pub(super) fn unexpired(raw: Option<Raw>) -> Result<Option<Item>, StoreError> {
    let now = now_epoch();
    let item = raw.map(item_from).transpose()?;
    Ok(match item {
        Some(item) if item.is_expired(now)? => None,
        item => item,
    })
}

pub(super) fn attrs_from(raw: Raw) -> Result<Attrs, StoreError> {
    raw.into_iter()
        .filter(|(name, _)| name != PK && name != SK)
        .map(|(name, value)| Ok((name, from_attribute(value)?)))
        .collect()
}

pub(super) fn to_attribute(value: &Value) -> AttributeValue {
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
