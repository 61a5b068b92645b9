//! The cold-first-response baseline: the smallest `lambda_http` function that does what every
//! Hangar read does at least once, one DynamoDB GetItem per request, with its client built at
//! init from the environment as a function's would be. The item is named by the environment:
//! `BENCH_TABLE`, and the values of its `PK` and `SK` attributes in `BENCH_PK` and `BENCH_SK`.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::{service_fn, Body, Error, Request, Response};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let variable = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
    let (table, pk, sk) = (variable("BENCH_TABLE")?, variable("BENCH_PK")?, variable("BENCH_SK")?);
    lambda_http::run(service_fn(|_: Request| {
        let read = client
            .get_item()
            .table_name(&table)
            .key("PK", AttributeValue::S(pk.clone()))
            .key("SK", AttributeValue::S(sk.clone()));
        async move {
            let item = read.send().await?;
            let status = if item.item().is_some() { 200 } else { 404 };
            Ok::<_, Error>(Response::builder().status(status).body(Body::from("hello"))?)
        }
    }))
    .await
}
