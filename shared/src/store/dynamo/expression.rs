//! The port's conditions, update operations and queries as DynamoDB expressions. Every attribute
//! name and value goes through a placeholder, so no attribute can clash with a reserved word,
//! and expired items count as absent here as in the SQLite adapter, although DynamoDB still
//! holds them.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;

use super::convert::{to_attribute, Raw};
use crate::store::{now_epoch, Condition, Index, Query, StoreError, UpdateOp, PK, SK, TTL};

/// An attribute no item has: an update without operations removes it, as DynamoDB's
/// transactions require an update expression.
const NO_OP_ATTR: &str = "hangar:no-op";

/// The expressions of one request, with the placeholders they use, ready for the SDK's
/// `set_…` builder methods.
pub(super) struct Expressions {
    pub(super) update: Option<String>,
    pub(super) condition: Option<String>,
    pub(super) names: Option<HashMap<String, String>>,
    pub(super) values: Option<Raw>,
}

impl Expressions {
    /// A put's or a delete's: `condition`, none when it always holds.
    pub(super) fn conditional(condition: &Condition) -> Self {
        let mut expr = Expr::new();
        let condition = expr.condition(condition);
        expr.finish(None, condition)
    }

    /// A condition check's, which must have a condition even when `condition` always holds.
    pub(super) fn check(condition: &Condition) -> Self {
        let mut expr = Expr::new();
        let condition = match expr.condition(condition) {
            Some(condition) => condition,
            None => expr.always(),
        };
        expr.finish(None, Some(condition))
    }

    /// An update's: `ops`, if `condition` holds and the stored item has not expired.
    pub(super) fn update(ops: &[UpdateOp], condition: &Condition) -> Result<Self, StoreError> {
        let mut expr = Expr::new();
        let update = expr.update(ops)?;
        let condition = expr.update_condition(condition);
        Ok(expr.finish(Some(update), Some(condition)))
    }

    /// A delete's that removes the stored item only if it has expired.
    pub(super) fn expired() -> Self {
        let mut expr = Expr::new();
        let condition = expr.expired();
        expr.finish(None, Some(condition))
    }

    /// A query's key condition (in `condition`): the partition, and the sort key prefix if any.
    pub(super) fn key_condition(query: &Query) -> Self {
        let (part_attr, sort_attr) = query.index.map_or((PK, SK), Index::key_attrs);
        let mut expr = Expr::new();
        let (part, part_value) = (expr.name(part_attr), expr.value(AttributeValue::S(query.partition.clone())));
        let mut key_condition = format!("{part} = {part_value}");
        if !query.sk_prefix.is_empty() {
            let (sort, prefix) = (expr.name(sort_attr), expr.value(AttributeValue::S(query.sk_prefix.clone())));
            key_condition += &format!(" AND begins_with({sort}, {prefix})");
        }
        expr.finish(None, Some(key_condition))
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

    fn finish(self, update: Option<String>, condition: Option<String>) -> Expressions {
        let names: HashMap<_, _> =
            self.names.into_iter().enumerate().map(|(i, name)| (format!("#n{i}"), name)).collect();
        let mut values: Raw = self.values.into_iter().enumerate().map(|(i, v)| (format!(":v{i}"), v)).collect();
        if self.now_used {
            values.insert(":now".into(), AttributeValue::N(self.now.to_string()));
        }
        Expressions {
            update,
            condition,
            names: (!names.is_empty()).then_some(names),
            values: (!values.is_empty()).then_some(values),
        }
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
