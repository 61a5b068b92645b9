//! Query strings, with bracketed names (`page[size]`, `filter[provider]`) accepted whether or
//! not the client percent-encoded the brackets.

use axum::extract::{FromRequestParts, RawQuery};
use axum::http::request::Parts;

use super::ApiError;

/// The decoded `name=value` pairs of the query string, in order.
#[derive(Debug, Clone, Default)]
pub struct QueryParams(Vec<(String, String)>);

impl QueryParams {
    pub fn parse(raw: &str) -> Result<Self, ApiError> {
        serde_urlencoded::from_str(raw)
            .map(QueryParams)
            .map_err(|e| ApiError::bad_request(format!("malformed query string: {e}")))
    }

    /// The first value of a parameter.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// A parameter that, when present, must not be empty after trimming.
    pub fn non_empty(&self, name: &str) -> Option<&str> {
        self.get(name).map(str::trim).filter(|v| !v.is_empty())
    }

    /// A 422 naming the first of `names` the query carries: a filter Hangar does not apply is
    /// refused, never ignored (an ignored filter would answer everything).
    pub fn refuse(&self, names: &[&str], why: &str) -> Result<(), ApiError> {
        match names.iter().find(|name| self.non_empty(name).is_some()) {
            Some(name) => Err(ApiError::invalid_parameter(*name, why)),
            None => Ok(()),
        }
    }

    /// Whether `include` asks for `name`, the one inclusion the route can give; any other is
    /// refused, as JSON:API asks of a server that cannot include it.
    pub fn includes(&self, name: &str) -> Result<bool, ApiError> {
        Ok(!self.inclusions(&[name])?.is_empty())
    }

    /// The inclusions `include` asks for, each one of `allowed`; any other is refused.
    pub fn inclusions<'a>(&self, allowed: &[&'a str]) -> Result<Vec<&'a str>, ApiError> {
        let Some(include) = self.non_empty("include") else { return Ok(Vec::new()) };
        let mut asked = Vec::new();
        for wanted in include.split(',') {
            match allowed.iter().find(|name| **name == wanted.trim()) {
                Some(name) => asked.push(*name),
                None => {
                    return Err(ApiError::bad_request(format!(
                        "`include`: `{}` cannot be included; {} can.",
                        wanted.trim(),
                        allowed.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
                    )))
                }
            }
        }
        Ok(asked)
    }

    /// Every pair except the named ones (for links that keep the caller's filters).
    pub fn without(&self, names: &[&str]) -> Vec<(String, String)> {
        self.0.iter().filter(|(n, _)| !names.contains(&n.as_str())).cloned().collect()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let RawQuery(raw) =
            RawQuery::from_request_parts(parts, state).await.map_err(|e| ApiError::bad_request(e.to_string()))?;
        QueryParams::parse(raw.as_deref().unwrap_or(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracketed_names_work_encoded_or_not() {
        let plain = QueryParams::parse("page[size]=5&filter[provider]=aws").unwrap();
        let encoded = QueryParams::parse("page%5Bsize%5D=5&filter%5Bprovider%5D=aws").unwrap();
        for params in [plain, encoded] {
            assert_eq!(params.get("page[size]"), Some("5"));
            assert_eq!(params.get("filter[provider]"), Some("aws"));
        }
    }
}
