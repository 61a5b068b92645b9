//! A closed-loop HTTP/1.1 load generator on loopback: `connections` keep-alive connections, each
//! sending its next request as soon as the last answer is read; latencies are kept for the
//! requests that start inside the measured window (after a warm-up).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::TokioIo;

use crate::stats::Samples;

pub struct Load {
    pub connections: usize,
    pub warmup: Duration,
    pub window: Duration,
}

pub struct Outcome {
    pub latencies: Samples,
    pub requests_per_second: f64,
}

impl Load {
    pub async fn run(&self, address: SocketAddr, path: &str, headers: &[(&'static str, String)]) -> Outcome {
        let start = Instant::now() + self.warmup;
        let end = start + self.window;
        let workers: Vec<_> = (0..self.connections)
            .map(|_| {
                let (path, headers) = (path.to_owned(), headers.to_vec());
                tokio::spawn(async move { worker(address, path, headers, start, end).await })
            })
            .collect();
        let mut latencies = Samples::default();
        for worker in workers {
            latencies.extend(worker.await.expect("a load worker"));
        }
        let requests_per_second = latencies.len() as f64 / self.window.as_secs_f64();
        Outcome { latencies, requests_per_second }
    }
}

async fn worker(
    address: SocketAddr,
    path: String,
    headers: Vec<(&'static str, String)>,
    start: Instant,
    end: Instant,
) -> Vec<Duration> {
    let mut connection = Connection::open(address).await;
    let mut latencies = Vec::new();
    loop {
        let began = Instant::now();
        if began >= end {
            return latencies;
        }
        connection.get(&path, &headers).await;
        if began >= start {
            latencies.push(began.elapsed());
        }
    }
}

/// One keep-alive HTTP/1.1 connection, one request at a time.
pub struct Connection {
    address: SocketAddr,
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
}

impl Connection {
    pub async fn open(address: SocketAddr) -> Connection {
        let stream = tokio::net::TcpStream::connect(address).await.expect("a connection");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("a handshake");
        tokio::spawn(connection);
        Connection { address, sender }
    }

    /// GETs `path`, checks it succeeded, and returns the body (read whole).
    pub async fn get(&mut self, path: &str, headers: &[(&'static str, String)]) -> Bytes {
        let mut request = Request::get(path).header("Host", self.address.to_string());
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request.body(Empty::<Bytes>::new()).expect("a request");
        self.sender.ready().await.expect("the connection stays open");
        let response = self.sender.send_request(request).await.expect("an answer");
        let status = response.status();
        let body = response.into_body().collect().await.expect("a body").to_bytes();
        assert!(status.is_success(), "GET {path}: {status} {}", String::from_utf8_lossy(&body));
        body
    }
}
