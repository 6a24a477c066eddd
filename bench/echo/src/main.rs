//! The floor for bench/http.py: an HTTP/1.1 server (hyper on tokio) that parses each POST
//! body as JSON (sonic-rs, or serde_json with `--serde`), writes the value back and answers
//! it as application/json; `GET /healthz` answers `{"status":"ok"}`.
//!
//! `echo --port N [--threads N] [--serde]`: one process, a tokio runtime of N worker
//! threads, listening on 127.0.0.1:N.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

/// Which JSON library parses and writes the body.
#[derive(Clone, Copy)]
enum Json {
    Sonic,
    Serde,
}

impl Json {
    /// The whole body parsed into the library's value, then that value serialized.
    fn echo(self, body: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Json::Sonic => {
                let value: sonic_rs::Value =
                    sonic_rs::from_slice(body).map_err(|e| e.to_string())?;
                sonic_rs::to_vec(&value).map_err(|e| e.to_string())
            }
            Json::Serde => {
                let value: serde_json::Value =
                    serde_json::from_slice(body).map_err(|e| e.to_string())?;
                serde_json::to_vec(&value).map_err(|e| e.to_string())
            }
        }
    }
}

struct Options {
    port: u16,
    threads: usize,
    json: Json,
}

/// The command line, by hand: three flags do not need an argument parser's build time.
fn options() -> Result<Options, String> {
    let mut options = Options {
        port: 0,
        threads: 1,
        json: Json::Sonic,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--serde" => options.json = Json::Serde,
            "--port" | "--threads" => {
                let value = args.next().ok_or(format!("{flag} needs a value"))?;
                let bad = |_| format!("{flag}: not a number: {value}");
                if flag == "--port" {
                    options.port = value.parse().map_err(bad)?;
                } else {
                    options.threads = value.parse().map_err(bad)?;
                }
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    if options.port == 0 || options.threads == 0 {
        return Err("usage: echo --port N [--threads N] [--serde]".into());
    }
    Ok(options)
}

fn answer(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

async fn handle(
    request: Request<Incoming>,
    json: Json,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.method() == Method::GET {
        return Ok(answer(StatusCode::OK, &b"{\"status\":\"ok\"}"[..]));
    }
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return Ok(answer(
                StatusCode::BAD_REQUEST,
                format!("{{\"error\":{:?}}}", e.to_string()),
            ))
        }
    };
    Ok(match json.echo(&body) {
        Ok(out) => answer(StatusCode::OK, out),
        Err(e) => answer(StatusCode::BAD_REQUEST, format!("{{\"error\":{e:?}}}")),
    })
}

async fn serve(listener: TcpListener, json: Json) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                eprintln!("accept: {e}");
                continue;
            }
        };
        // as uvicorn does: a response leaves at once, not after Nagle's wait for more
        if let Err(e) = stream.set_nodelay(true) {
            eprintln!("TCP_NODELAY: {e}");
        }
        tokio::spawn(async move {
            let service = service_fn(move |request| handle(request, json));
            // a client hanging up mid-request ends here too: said, not counted
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                eprintln!("connection: {e}");
            }
        });
    }
}

fn main() {
    let options = options().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    // a multi-thread runtime for every N, so 1 and 2 threads differ only in the workers
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads)
        .enable_io()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let address = SocketAddr::from(([127, 0, 0, 1], options.port));
        let listener = TcpListener::bind(address).await.unwrap_or_else(|e| {
            eprintln!("bind {address}: {e}");
            std::process::exit(1)
        });
        // SIGTERM (bench/http.py's stop) ends the process through exit(), whose handlers
        // write an instrumented build's profile (echo-pgo's training run); a kill would not
        let mut terminate = signal(SignalKind::terminate()).expect("a SIGTERM handler");
        tokio::spawn(async move {
            terminate.recv().await;
            std::process::exit(0)
        });
        // on a worker, not on this (main) thread: every connection is served by the N workers
        tokio::spawn(serve(listener, options.json))
            .await
            .expect("the accept loop");
    });
}
