//! The warm-request baseline: a bare hyper HTTP/1.1 server answering "hello" on the address
//! given as its only argument (port 0 picks one); it prints the address it listens on.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{server::conn::http1, service::service_fn, Response};
use hyper_util::rt::TokioIo;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let address = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:0".into());
    let listener = tokio::net::TcpListener::bind(&address).await?;
    println!("{}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            let hello =
                service_fn(|_| async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hello")))) });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), hello).await;
        });
    }
}
