//! The listener and each connection: HTTP/1 from hyper, bounded in
//! connections, header size and wait, request time and body, with a
//! graceful stop.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, Response, StatusCode};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{watch, Semaphore};
use tower::ServiceExt;

use crate::auth::Peer;

/// Limits on what one client may hold or send.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Open connections at once; more are closed at once.
    pub connections: usize,
    /// How long a connection may take to send a request's headers (and how
    /// long an idle kept-alive connection is held).
    pub header_wait: Duration,
    /// How long a request may take to be answered (503 after).
    pub request_time: Duration,
    /// The most bytes of a request body (413 above; no page reads one).
    pub body: u64,
    /// The most bytes of a request's head (431 above).
    pub head: usize,
}

/// Where the server listens.
pub enum Listener {
    /// A Unix socket, removed at the stop.
    Unix(UnixListener, PathBuf),
    /// A TCP address.
    Tcp(TcpListener),
}

/// Binds a Unix socket at `path` with `mode`: a stale socket left by a
/// killed server is replaced; any other file there is an error.
pub fn bind_unix(path: &Path, mode: u32) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(std::io::Error::other(format!(
                "{} exists and is not a socket",
                path.display()
            )));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::other(format!(
                "{}: another server is listening there",
                path.display()
            )));
        }
        std::fs::remove_file(path)?;
    }
    // Made private, then opened to `mode`: never wider than asked.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let l = bound?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(l)
}

/// Serves `app` on `listener` until `stop` turns true, then lets the
/// requests in flight finish (at most `limits.request_time`).
pub async fn serve(
    listener: Listener,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.connections));
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<()>(1);
    loop {
        let accepted = tokio::select! {
            _ = stop.changed() => break,
            a = accept(&listener) => a,
        };
        let (io, peer) = match accepted {
            Ok(x) => x,
            // Out of descriptors or a connection reset before accept:
            // wait a little, then go on.
            Err(e) => {
                hpc_core::note!("hpc-web: accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(io);
            continue;
        };
        let app = app.clone();
        let stop = stop.clone();
        let done = done_tx.clone();
        tokio::spawn(async move {
            match io {
                Io::Unix(s) => connection(s, peer, app, limits, stop).await,
                Io::Tcp(s) => connection(s, peer, app, limits, stop).await,
            }
            drop(slot);
            drop(done);
        });
    }
    if let Listener::Unix(_, path) = &listener {
        let _ = std::fs::remove_file(path);
    }
    drop(listener);
    drop(done_tx);
    // Every connection holds a sender: all gone means all finished.
    let _ =
        tokio::time::timeout(limits.request_time + Duration::from_secs(1), done_rx.recv()).await;
    Ok(())
}

enum Io {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
}

async fn accept(l: &Listener) -> std::io::Result<(Io, Peer)> {
    match l {
        Listener::Unix(l, _) => Ok((Io::Unix(l.accept().await?.0), Peer::Unix)),
        Listener::Tcp(l) => {
            let (s, addr) = l.accept().await?;
            Ok((Io::Tcp(s), Peer::Tcp(addr.ip())))
        }
    }
}

async fn connection<S>(
    stream: S,
    peer: Peer,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        req.extensions_mut().insert(peer);
        let app = app.clone();
        async move { Ok::<_, Infallible>(answer(app, req, limits).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_wait)
        .max_buf_size(limits.head.max(8192));
    let conn = builder.serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(limits.request_time, conn).await;
        }
    }
}

/// One request: refused when its body is too large, else answered by the
/// router within the time limit.
async fn answer(app: Router, req: Request<Incoming>, limits: Limits) -> Response<Body> {
    let length = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let chunked = req.headers().contains_key(header::TRANSFER_ENCODING);
    if chunked || length.is_some_and(|n| n > limits.body) {
        return plain(StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n");
    }
    // hyper's read buffer bounds the head only loosely (a 100 KB header
    // passed it): the head as sent, counted here.
    let head = req.method().as_str().len()
        + req.uri().to_string().len()
        + req
            .headers()
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 4)
            .sum::<usize>();
    if head > limits.head {
        return plain(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request headers too large\n",
        );
    }
    let req = req.map(Body::new);
    match tokio::time::timeout(limits.request_time, app.oneshot(req)).await {
        Ok(Ok(r)) => r,
        Ok(Err(never)) => match never {},
        Err(_) => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "the request took too long\n",
        ),
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::from(text));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    crate::secure(r)
}
