//! The cold-init baseline: the smallest `lambda_http` function, answering "hello".

use lambda_http::{service_fn, Body, Error, Request, Response};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::run(service_fn(|_: Request| async { Ok::<_, Error>(Response::new(Body::from("hello"))) })).await
}
