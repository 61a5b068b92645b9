//! Page-number pagination (`page[number]`, `page[size]`) and its envelope: `links` self / first /
//! prev / next / last as URLs and `meta.pagination`, with nulls at the ends.

use serde_json::{json, Value};

use super::{ApiError, QueryParams};
use crate::store::{Item, ItemStore, Query, StoreError};

pub const DEFAULT_PAGE_SIZE: usize = 20;
pub const MAX_PAGE_SIZE: usize = 100;

/// The page a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    pub number: usize,
    pub size: usize,
}

impl PageRequest {
    /// Reads `page[number]` (≥ 1, default 1) and `page[size]` (≥ 1, default 20; larger than 100
    /// is served as 100, as HCP Terraform does). A page number past the end, however large, is
    /// an empty page, as HCP Terraform answers it.
    pub fn from_query(params: &QueryParams) -> Result<Self, ApiError> {
        let read = |name: &'static str, default: usize| -> Result<usize, ApiError> {
            match params.non_empty(name) {
                None => Ok(default),
                Some(raw) => whole_number(raw).filter(|n| *n >= 1).ok_or_else(|| {
                    ApiError::invalid_parameter(name, format!("{name} must be a whole number of at least 1"))
                }),
            }
        };
        Ok(Self { number: read("page[number]", 1)?, size: read("page[size]", DEFAULT_PAGE_SIZE)?.min(MAX_PAGE_SIZE) })
    }

    /// How many items come before this page; past every list, `usize::MAX`.
    pub fn offset(&self) -> usize {
        self.number.saturating_sub(1).saturating_mul(self.size)
    }

    /// Takes this page out of an in-memory list (already filtered and sorted).
    pub fn slice<T>(&self, all: Vec<T>) -> Vec<T> {
        all.into_iter().skip(self.offset()).take(self.size).collect()
    }

    /// Reads this page of a store query: skips the earlier pages with cursors, then reads one page.
    pub async fn fetch(&self, store: &dyn ItemStore, query: Query) -> Result<Vec<Item>, StoreError> {
        let mut query = query;
        let mut to_skip = self.offset();
        while to_skip > 0 {
            let page = store.query(query.clone().limit(to_skip.min(1000))).await?;
            to_skip = to_skip.saturating_sub(page.items.len());
            match page.next {
                Some(next) => query.cursor = Some(next),
                None => return Ok(Vec::new()),
            }
        }
        Ok(store.query(query.limit(self.size)).await?.items)
    }
}

/// A paging parameter (`page[number]`, `offset`, `limit`) as a whole number: digits only, `None`
/// otherwise. One too large for `usize` is `usize::MAX`, which names a page past any list: an
/// empty page, never an overflow.
pub fn whole_number(raw: &str) -> Option<usize> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(raw.parse().unwrap_or(usize::MAX))
}

/// What the envelope needs: where the collection lives, the caller's other parameters, the
/// page served and the total.
#[derive(Debug, Clone)]
pub struct Paginated {
    /// The collection's absolute URL without a query string.
    pub url: String,
    pub params: Vec<(String, String)>,
    pub page: PageRequest,
    pub total: usize,
}

impl Paginated {
    pub fn new(url: String, params: &QueryParams, page: PageRequest, total: usize) -> Self {
        Self { url, params: params.without(&["page[number]", "page[size]"]), page, total }
    }

    pub fn total_pages(&self) -> usize {
        self.total.div_ceil(self.page.size).max(1)
    }

    fn prev(&self) -> Option<usize> {
        (self.page.number > 1).then(|| (self.page.number - 1).min(self.total_pages()))
    }

    fn next(&self) -> Option<usize> {
        (self.page.number < self.total_pages()).then(|| self.page.number + 1)
    }

    fn url_of(&self, number: usize) -> String {
        let mut params = vec![
            ("page[number]".to_owned(), number.to_string()),
            ("page[size]".to_owned(), self.page.size.to_string()),
        ];
        params.extend(self.params.iter().cloned());
        let query = serde_urlencoded::to_string(&params).expect("pairs of strings encode");
        format!("{}?{query}", self.url)
    }

    pub fn links(&self) -> Value {
        json!({
            "self": self.url_of(self.page.number),
            "first": self.url_of(1),
            "prev": self.prev().map(|n| self.url_of(n)),
            "next": self.next().map(|n| self.url_of(n)),
            "last": self.url_of(self.total_pages()),
        })
    }

    pub fn meta(&self) -> Value {
        json!({
            "current-page": self.page.number,
            "page-size": self.page.size,
            "prev-page": self.prev(),
            "next-page": self.next(),
            "total-pages": self.total_pages(),
            "total-count": self.total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(raw: &str) -> Result<PageRequest, ApiError> {
        PageRequest::from_query(&QueryParams::parse(raw).unwrap())
    }

    #[test]
    fn defaults_and_bounds() {
        assert_eq!(page("").unwrap(), PageRequest { number: 1, size: 20 });
        assert_eq!(page("page%5Bsize%5D=500").unwrap().size, 100);
        assert_eq!(page("page[number]=0").unwrap_err().status().as_u16(), 422);
        assert_eq!(page("page[size]=abc").unwrap_err().source, Some(("parameter", "page[size]".into())));
        assert_eq!(page("page[number]=-1").unwrap_err().status().as_u16(), 422);
        assert_eq!(page("page[number]=2.5").unwrap_err().status().as_u16(), 422);
    }

    #[test]
    fn a_page_past_every_list_is_empty_however_large_its_number() {
        for number in ["18446744073709551615", "99999999999999999999999999"] {
            let far = page(&format!("page[number]={number}&page[size]=100")).unwrap();
            assert_eq!(far.offset(), usize::MAX);
            assert!(far.slice(vec![1, 2, 3]).is_empty());
            let envelope = Paginated::new("https://h/x".into(), &QueryParams::parse("").unwrap(), far, 3);
            assert_eq!(envelope.meta()["next-page"], Value::Null);
            assert_eq!(envelope.meta()["prev-page"], 1);
        }
        assert_eq!(page("page[size]=18446744073709551615").unwrap().size, MAX_PAGE_SIZE);
    }

    #[test]
    fn envelope_has_nulls_at_the_ends() {
        let params = QueryParams::parse("q=net&page[size]=2").unwrap();
        let first = Paginated::new("https://h/api/v2/x".into(), &params, PageRequest { number: 1, size: 2 }, 5);
        let meta = first.meta();
        assert_eq!(meta["total-pages"], 3);
        assert_eq!(meta["prev-page"], Value::Null);
        assert_eq!(meta["next-page"], 2);
        let links = first.links();
        assert_eq!(links["prev"], Value::Null);
        assert_eq!(links["next"], "https://h/api/v2/x?page%5Bnumber%5D=2&page%5Bsize%5D=2&q=net");
        let last = Paginated::new("https://h/x".into(), &params, PageRequest { number: 3, size: 2 }, 5);
        assert_eq!(last.meta()["next-page"], Value::Null);
        assert_eq!(last.links()["next"], Value::Null);
        assert_eq!(last.meta()["prev-page"], 2);
    }
}

/// What a list handler needs from its request: the query parameters, the page asked for, and
/// the collection's absolute URL for the envelope's links.
#[derive(Debug, Clone)]
pub struct Listing {
    pub params: QueryParams,
    pub page: PageRequest,
    url: String,
}

impl Listing {
    /// The pagination envelope for this page of a collection of `total` items.
    pub fn envelope(&self, total: usize) -> Paginated {
        Paginated::new(self.url.clone(), &self.params, self.page, total)
    }
}

impl axum::extract::FromRequestParts<crate::state::AppState> for Listing {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &crate::state::AppState,
    ) -> Result<Self, Self::Rejection> {
        let super::BaseUrl(base) = super::BaseUrl::from_request_parts(parts, state).await?;
        let params = QueryParams::from_request_parts(parts, state).await?;
        let page = PageRequest::from_query(&params)?;
        Ok(Listing { url: format!("{base}{}", parts.uri.path()), params, page })
    }
}
