//! Write conditions, evaluated by the SQLite adapter in Rust and translated by the DynamoDB
//! adapter into a condition expression.

use serde_json::Value;

use super::Attrs;

#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    Always,
    /// The item exists.
    Exists,
    /// No item has this key (`attribute_not_exists(PK)`).
    NotExists,
    /// The attribute exists and equals the value.
    Equals(String, Value),
    /// The numeric attribute is below the bound; a missing attribute counts as 0.
    Below(String, i64),
    And(Vec<Condition>),
    Or(Vec<Condition>),
}

impl Condition {
    pub fn equals(name: impl Into<String>, value: impl Into<Value>) -> Self {
        Condition::Equals(name.into(), value.into())
    }

    pub fn and(self, other: Condition) -> Self {
        match self {
            Condition::Always => other,
            Condition::And(mut all) => {
                all.push(other);
                Condition::And(all)
            }
            first => Condition::And(vec![first, other]),
        }
    }

    /// Whether the condition holds on the stored item's attributes (`None` when absent).
    pub fn holds(&self, stored: Option<&Attrs>) -> bool {
        match self {
            Condition::Always => true,
            Condition::Exists => stored.is_some(),
            Condition::NotExists => stored.is_none(),
            Condition::Equals(name, value) => stored.and_then(|attrs| attrs.get(name)) == Some(value),
            Condition::Below(name, bound) => match stored.and_then(|attrs| attrs.get(name)) {
                None => 0 < *bound,
                Some(v) => v.as_f64().is_some_and(|n| n < *bound as f64),
            },
            Condition::And(all) => all.iter().all(|c| c.holds(stored)),
            Condition::Or(any) => any.iter().any(|c| c.holds(stored)),
        }
    }
}
