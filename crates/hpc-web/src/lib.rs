//! hpc-web: on-demand reports over the history, on a web server behind the
//! centre's reverse proxy.
//!
//! - [`auth`]: the user from the proxy's header, believed only on the Unix
//!   socket or from trusted proxy addresses; admins by name or group;
//! - [`data`]: each page read through hpc-db's named queries (read-only)
//!   and rendered by hpc-render, as HTML and JSON;
//! - [`server`]: the listener and connections, bounded, with a graceful
//!   stop on SIGTERM.
//!
//! A user sees their own jobs only: another user's job is 404, as one that
//! does not exist.

pub mod auth;
pub mod data;
pub mod server;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use argh::FromArgs;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path as UrlPath, Query, Request};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hpc_core::{Error, Result};
use hpc_db::report::{read_groups, By, Groups};
use hpc_db::Store;
use hpc_render::html::{escape, page};
use serde::Deserialize;
use serde_json::json;

use crate::auth::{Admins, Net, Peer, Who};
use crate::data::{Advice, Miss, Page};
use crate::server::{Limits, Listener};

/// Serve each user their own jobs, flags, plots and advice over the history, behind a reverse proxy.
#[derive(FromArgs, Debug)]
#[argh(
    example = "hpc-web --socket /run/hpc-web/web.sock --admin-group hpcadmin",
    example = "hpc-web --listen 127.0.0.1:8080 --trust-proxy 127.0.0.1 --db /var/lib/hpc-sizer/history.db",
    note = "Pages: / (my jobs), /job/ID, /job/ID/plot.svg, /tools, /report (admins), /metrics (admins or --metrics-from); each but the plot and /metrics also as JSON under /api/ or with Accept: application/json. Stops on SIGTERM. Exit status: 0 stopped, 1 failure, 2 usage error. See hpc-web(1)."
)]
pub struct Args {
    /// the history database (default: as every tool finds it, HPC_SIZER_DB,
    /// else hpc-sizer.db in the data folder)
    #[argh(option)]
    pub db: Option<PathBuf>,
    /// user-to-group mapping of the report by group (default
    /// $HPC_SIZER_GROUPS, else $XDG_CONFIG_HOME/hpc-sizer/groups)
    #[argh(option)]
    pub groups: Option<PathBuf>,
    /// listen on this Unix socket (the default way; the proxy connects to it)
    #[argh(option)]
    pub socket: Option<PathBuf>,
    /// the socket's mode, octal (default 660: the owner and its group)
    #[argh(option, default = "String::from(\"660\")")]
    pub socket_mode: String,
    /// listen on this TCP address instead (e.g. 127.0.0.1:8080)
    #[argh(option)]
    pub listen: Option<String>,
    /// the proxy addresses or networks whose user header is believed over
    /// TCP, comma-separated (default: none)
    #[argh(option)]
    pub trust_proxy: Option<String>,
    /// the header that names the signed-in user (default X-Forwarded-User)
    #[argh(option, default = "String::from(\"X-Forwarded-User\")")]
    pub user_header: String,
    /// users who see every user and the centre's reports, comma-separated
    #[argh(option)]
    pub admins: Option<String>,
    /// a Unix group whose members are admins
    #[argh(option)]
    pub admin_group: Option<String>,
    /// addresses that may read /metrics without a user, comma-separated
    #[argh(option)]
    pub metrics_from: Option<String>,
    /// the hpc-model that advises (default: beside hpc-web, else on PATH)
    #[argh(option)]
    pub model: Option<PathBuf>,
    /// most open connections (default 16384)
    #[argh(option, default = "16384")]
    pub max_connections: usize,
    /// seconds a request may take (default 15)
    #[argh(option, default = "15")]
    pub timeout: u64,
}

/// What every request reads.
pub struct App {
    db: PathBuf,
    groups: Groups,
    header: String,
    trusted: Vec<Net>,
    scrapers: Vec<Net>,
    admins: Admins,
    model: PathBuf,
    /// Advice by (user, tool), with the history's state it was made on.
    advice: Mutex<AdviceCache>,
    /// Each user's job count, with the history's state it was counted on.
    counts: Mutex<HashMap<String, (Signature, u64)>>,
    /// The metrics text and when it was made.
    metrics: Mutex<Option<Kept<String>>>,
    /// The pages that read many jobs (a user's tools, the centre's
    /// report) by what they show, with when and on what they were made.
    pages: Mutex<HashMap<String, Kept<Arc<Page>>>>,
    /// Open read-only connections to the history file they were opened on.
    pool: Mutex<Pool>,
    /// Blocking reads at once.
    readers: Arc<tokio::sync::Semaphore>,
    /// Blocking reads at once of each user (see [`READERS_PER_USER`]).
    readers_of: Mutex<HashMap<String, Arc<tokio::sync::Semaphore>>>,
}

/// Connections kept open between requests, all to one file (its device
/// and inode): a file deleted or replaced is noticed at the next request.
#[derive(Default)]
struct Pool {
    file: Option<(u64, u64)>,
    free: Vec<Store>,
}

/// Connections kept open at most (as many as blocking reads at once).
const READERS: usize = 8;

/// Blocking reads one user (or the metrics scraper) may have at once: the
/// rest of [`READERS`] is always free of that user's requests. Sixty
/// parallel requests for one user's largest job page held all eight, and
/// another user's small page waited 15 s for a 503.
const READERS_PER_USER: usize = READERS / 2;

/// How long a page of [`App::page`] is kept at most.
const PAGE_TTL: Duration = Duration::from_secs(60);

/// Entries of the small caches kept at most (then all are dropped).
const MAX_CACHED: usize = 10_000;

/// What was made, when, and on which state of the history.
type Kept<T> = (Instant, Signature, T);

/// Advice by (user, tool), with the history's state it was made on.
type AdviceCache = HashMap<(String, String), (Signature, Arc<Advice>)>;

/// The history's state as its files show it: any write changes it.
type Signature = Vec<(u64, Option<SystemTime>)>;

fn signature(db: &Path) -> Signature {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    [db.to_path_buf(), PathBuf::from(wal)]
        .iter()
        .map(|p| match std::fs::metadata(p) {
            Ok(m) => (m.len(), m.modified().ok()),
            Err(_) => (0, None),
        })
        .collect()
}

/// How long a read waits for a writer's lock before the page says busy.
const BUSY: Duration = Duration::from_secs(3);

/// How long /metrics is kept before it is read again.
const METRICS_TTL: Duration = Duration::from_secs(30);

impl App {
    /// The state from the command line.
    pub fn new(a: &Args) -> Result<App> {
        let usage = |e: String| Error::Usage(e);
        let nets = |s: &Option<String>| auth::parse_nets(s.as_deref().unwrap_or("")).map_err(usage);
        axum::http::HeaderName::try_from(a.user_header.as_str()).map_err(|_| {
            Error::Usage(format!(
                "--user-header '{}': not a header name",
                a.user_header
            ))
        })?;
        let admins = a
            .admins
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let model = a.model.clone().unwrap_or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(|d| d.join("hpc-model")))
                .filter(|p| p.exists())
                .unwrap_or_else(|| PathBuf::from("hpc-model"))
        });
        if let Some(g) = &a.admin_group {
            if !matches!(nix::unistd::Group::from_name(g), Ok(Some(_))) {
                hpc_core::note!(
                    "hpc-web: --admin-group {g}: no such group now; nobody is an admin by it until it exists"
                );
            }
        }
        let groups = match hpc_core::paths::groups_path(a.groups.as_deref()) {
            Some(p) => read_groups(&p).map_err(|e| Error::Usage(e.to_string()))?,
            None => Groups::new(),
        };
        Ok(App {
            db: hpc_core::paths::db_path(a.db.as_deref()),
            groups,
            header: a.user_header.to_ascii_lowercase(),
            trusted: nets(&a.trust_proxy)?,
            scrapers: nets(&a.metrics_from)?,
            admins: Admins::new(admins, a.admin_group.clone()),
            model,
            advice: Mutex::new(HashMap::new()),
            counts: Mutex::new(HashMap::new()),
            metrics: Mutex::new(None),
            pages: Mutex::new(HashMap::new()),
            pool: Mutex::new(Pool::default()),
            readers: Arc::new(tokio::sync::Semaphore::new(READERS)),
            readers_of: Mutex::new(HashMap::new()),
        })
    }

    /// A connection to the history as the path names it now: a kept one
    /// when the file is the one it was opened on, else a new one.
    fn take(&self) -> std::result::Result<(Store, (u64, u64)), Miss> {
        use std::os::unix::fs::MetadataExt;
        // The path is the admin's to see (the server's log), not every
        // user's: the page says there is none.
        let m = std::fs::metadata(&self.db).map_err(|e| {
            hpc_core::note!(
                "hpc-web: no database at {}: {e}",
                hpc_core::paths::shown(&self.db)
            );
            Miss::Unavailable(format!(
                "no database where the server reads it ({e}; its log names the path)"
            ))
        })?;
        let file = (m.dev(), m.ino());
        let kept = {
            let mut pool = lock(&self.pool);
            if pool.file != Some(file) {
                *pool = Pool {
                    file: Some(file),
                    free: Vec::new(),
                };
            }
            pool.free.pop()
        };
        let store = match kept {
            Some(s) => {
                s.check_version(&self.db)?;
                s
            }
            None => Store::open_read_only(&self.db, BUSY)?,
        };
        Ok((store, file))
    }

    /// Gives a connection back to be kept; a snapshot (an immutable one, of
    /// a history this server may only read while no writer has it open) is
    /// dropped, as it would not see what a writer adds later.
    fn give(&self, store: Store, file: (u64, u64)) {
        if store.is_snapshot() {
            return;
        }
        let mut pool = lock(&self.pool);
        if pool.file == Some(file) && pool.free.len() < READERS {
            pool.free.push(store);
        }
    }

    /// Runs `f` on a connection to the history.
    fn with_store<T>(
        &self,
        f: impl FnOnce(&Store) -> std::result::Result<T, Miss>,
    ) -> std::result::Result<T, Miss> {
        let (store, file) = self.take()?;
        let r = f(&store);
        self.give(store, file);
        r
    }

    /// The advice for (user, tool), made again when the history changed.
    fn advice(&self, user: &str, tool: &str) -> Advice {
        let sig = signature(&self.db);
        let key = (user.to_string(), tool.to_string());
        if let Some((s, a)) = lock(&self.advice).get(&key) {
            if *s == sig {
                return (**a).clone();
            }
        }
        let a = match self.with_store(|s| Ok(data::advise(s, &self.model, user, tool))) {
            Ok(a) => a,
            Err(Miss::Unavailable(why)) => Advice::None(why),
            Err(Miss::NotFound) => Advice::None("no history".into()),
        };
        cached(&self.advice, key, (sig, Arc::new(a.clone())));
        a
    }

    /// The page `key`, made by `make` unless one made on the same history
    /// less than [`PAGE_TTL`] ago is kept.
    fn page(
        &self,
        key: String,
        make: impl FnOnce() -> std::result::Result<Page, Miss>,
    ) -> std::result::Result<Arc<Page>, Miss> {
        let sig = signature(&self.db);
        if let Some((at, s0, page)) = lock(&self.pages).get(&key) {
            if at.elapsed() < PAGE_TTL && *s0 == sig {
                return Ok(page.clone());
            }
        }
        let page = Arc::new(make()?);
        cached(&self.pages, key, (Instant::now(), sig, page.clone()));
        Ok(page)
    }

    /// How many jobs `user` has, counted again when the history changed.
    fn count(&self, store: &Store, user: &str) -> std::result::Result<u64, Miss> {
        let sig = signature(&self.db);
        if let Some((s, n)) = lock(&self.counts).get(user) {
            if *s == sig {
                return Ok(*n);
            }
        }
        let n = store.job_count(Some(user))?;
        cached(&self.counts, user.to_string(), (sig, n));
        Ok(n)
    }
}

/// A mutex's value, also after a panic elsewhere (the caches stay usable).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Puts `value` in a cache, dropping every entry first when it is full.
fn cached<K: std::hash::Hash + Eq, V>(m: &Mutex<HashMap<K, V>>, key: K, value: V) {
    let mut c = lock(m);
    if c.len() >= MAX_CACHED {
        c.clear();
    }
    c.insert(key, value);
}

/// The routes.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(jobs_page))
        .route("/api/jobs", get(jobs_page))
        .route("/job/{id}", get(job_page))
        .route("/api/job/{id}", get(job_page))
        .route("/job/{id}/plot.svg", get(plot_svg))
        .route("/tools", get(tools_page))
        .route("/api/tools", get(tools_page))
        .route("/report", get(report_page))
        .route("/api/report", get(report_page))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        // Every answer, the router's own (405, a bad path's 400) too.
        .layer(axum::middleware::map_response(|r: Response| async move {
            secure(r)
        }))
        .with_state(app)
}

type St = axum::extract::State<Arc<App>>;

/// What a page answers in.
fn wants_json(uri: &Uri, headers: &HeaderMap) -> bool {
    uri.path().starts_with("/api/")
        || headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("application/json") && !a.contains("text/html"))
}

/// The headers every answer carries: no script, style inline only, not
/// framed, not sniffed, not cached (the server's own answers before the
/// router too, see `server::plain`).
pub(crate) fn secure(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    r
}

/// The relative way back to the root from `uri` (pages link relatively,
/// so the server works under any prefix of the proxy).
fn base(uri: &Uri) -> String {
    let depth = uri.path().matches('/').count().saturating_sub(1);
    if depth == 0 {
        "./".into()
    } else {
        "../".repeat(depth)
    }
}

fn nav(who: &Who, base: &str) -> String {
    let b = escape(base);
    let mut s =
        format!("<p class=nav><a href=\"{b}\">My jobs</a> | <a href=\"{b}tools\">My tools</a>");
    if who.admin {
        s.push_str(&format!(" | <a href=\"{b}report\">Report</a>"));
    }
    s.push_str(&format!(" | signed in as {}</p>\n", escape(&who.user)));
    s
}

fn error_response(status: StatusCode, message: &str, json: bool) -> Response {
    let r = if json {
        (status, axum::Json(json!({ "error": message }))).into_response()
    } else {
        let body = format!("<h1>{}</h1>\n<p>{}</p>\n", status.as_u16(), escape(message));
        (
            status,
            axum::response::Html(page(&format!("{status}"), &body)),
        )
            .into_response()
    };
    r
}

fn miss(m: Miss, json: bool) -> Response {
    match m {
        Miss::NotFound => error_response(StatusCode::NOT_FOUND, "no such page or job", json),
        Miss::Unavailable(why) => error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the history cannot be read now: {why}"),
            json,
        ),
    }
}

/// Who asks, or the 401 answer.
fn who(app: &App, req: &Request) -> std::result::Result<Who, Box<Response>> {
    let peer = req
        .extensions()
        .get::<Peer>()
        .copied()
        .unwrap_or(Peer::Tcp([0, 0, 0, 0].into()));
    let json = wants_json(req.uri(), req.headers());
    match auth::user_of(req.headers(), &app.header, peer, &app.trusted) {
        Ok(user) => Ok(Who {
            admin: app.admins.contains(&user),
            user,
        }),
        Err(r) => Err(Box::new(error_response(
            StatusCode::UNAUTHORIZED,
            &r.reason(&app.header),
            json,
        ))),
    }
}

/// Who asks, whether they want JSON, and the way back to the root: what
/// every page handler starts from (or the 401 answer).
fn asked(app: &App, req: &Request) -> std::result::Result<(Who, bool, String), Box<Response>> {
    let who = who(app, req)?;
    Ok((who, wants_json(req.uri(), req.headers()), base(req.uri())))
}

/// The query of a page that reads one.
type Asked = std::result::Result<Query<Params>, QueryRejection>;

/// [`asked`], and the page's query: one that cannot be read is a 400 in
/// the asker's format, once the asker is known (a 401 before).
fn asked_with(
    app: &App,
    req: &Request,
    q: Asked,
) -> std::result::Result<(Who, bool, String, Params), Box<Response>> {
    let (who, json, base) = asked(app, req)?;
    match q {
        Ok(Query(p)) => Ok((who, json, base, p)),
        Err(e) => Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            &format!("the query: {}", e.body_text()),
            json,
        ))),
    }
}

/// Runs a blocking read of the history for `asker`. The permits are held
/// until the read ends, also when the request gave up waiting for it, so
/// that at most [`READERS`] reads run at once, [`READERS_PER_USER`] of
/// them one asker's.
async fn read<T: Send + 'static>(
    app: &Arc<App>,
    asker: &str,
    f: impl FnOnce(&App, &Store) -> std::result::Result<T, Miss> + Send + 'static,
) -> std::result::Result<T, Miss> {
    let theirs = {
        let mut of = lock(&app.readers_of);
        if of.len() >= MAX_CACHED {
            // Only askers with a read in flight are still held elsewhere.
            of.retain(|_, s| Arc::strong_count(s) > 1);
        }
        of.entry(asker.to_owned())
            .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(READERS_PER_USER)))
            .clone()
    };
    let unavailable = |e: tokio::sync::AcquireError| Miss::Unavailable(e.to_string());
    let own = theirs.acquire_owned().await.map_err(unavailable)?;
    let permit = app
        .readers
        .clone()
        .acquire_owned()
        .await
        .map_err(unavailable)?;
    let app = app.clone();
    tokio::task::spawn_blocking(move || {
        let r = app.with_store(|store| f(&app, store));
        drop((permit, own));
        r
    })
    .await
    .map_err(|e| Miss::Unavailable(e.to_string()))?
}

fn answer(p: &Page, who: &Who, base: &str, json: bool) -> Response {
    if json {
        return axum::Json(&p.json).into_response();
    }
    let body = format!("{}{}", nav(who, base), p.body);
    axum::response::Html(page(&p.title, &body)).into_response()
}

/// Query parameters of the pages.
#[derive(Deserialize, Default)]
struct Params {
    user: Option<String>,
    page: Option<u64>,
    per: Option<u64>,
    days: Option<u64>,
    by: Option<String>,
}

/// The user whose pages are shown: oneself, or for an admin anyone named.
fn subject(who: &Who, p: &Params) -> std::result::Result<String, Miss> {
    match &p.user {
        Some(u) if *u != who.user && !who.admin => Err(Miss::NotFound),
        Some(u) if !u.is_empty() => Ok(u.clone()),
        _ => Ok(who.user.clone()),
    }
}

async fn jobs_page(state: St, q: Asked, req: Request) -> Response {
    let app = state.0;
    let (who, json, base, p) = match asked_with(&app, &req, q) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let user = match subject(&who, &p) {
        Ok(u) => u,
        Err(m) => return miss(m, json),
    };
    let (page, per) = (p.page.unwrap_or(1), p.per.unwrap_or(50));
    let b = base.clone();
    match read(&app, &who.user, move |app, s| {
        let total = app.count(s, &user)?;
        data::jobs(s, &user, total, (page, per), &b, json)
    })
    .await
    {
        Ok(p) => answer(&p, &who, &base, json),
        Err(m) => miss(m, json),
    }
}

async fn job_page(state: St, UrlPath(id): UrlPath<String>, req: Request) -> Response {
    let app = state.0;
    let (who, json, base) = match asked(&app, &req) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let user = (!who.admin).then(|| who.user.clone());
    match read(&app, &who.user, move |app, s| {
        data::job(s, &id, user.as_deref(), &|u, t| app.advice(u, t))
    })
    .await
    {
        Ok(p) => answer(&p, &who, &base, json),
        Err(m) => miss(m, json),
    }
}

async fn plot_svg(state: St, UrlPath(id): UrlPath<String>, req: Request) -> Response {
    let app = state.0;
    let who = match who(&app, &req) {
        Ok(w) => w,
        Err(r) => return *r,
    };
    let user = (!who.admin).then(|| who.user.clone());
    match read(&app, &who.user, move |_, s| {
        data::plot(s, &id, user.as_deref())
    })
    .await
    {
        Ok(svg) => ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response(),
        Err(m) => miss(m, false),
    }
}

async fn tools_page(state: St, q: Asked, req: Request) -> Response {
    let app = state.0;
    let (who, json, base, p) = match asked_with(&app, &req, q) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let user = match subject(&who, &p) {
        Ok(u) => u,
        Err(m) => return miss(m, json),
    };
    let key = format!("tools {user} {base}");
    match read(&app, &who.user, move |app, s| {
        app.page(key, || data::tools(s, &user, &|u, t| app.advice(u, t)))
    })
    .await
    {
        Ok(p) => answer(&p, &who, &base, json),
        Err(m) => miss(m, json),
    }
}

async fn report_page(state: St, q: Asked, req: Request) -> Response {
    let app = state.0;
    let (who, json, base, p) = match asked_with(&app, &req, q) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    if !who.admin {
        return miss(Miss::NotFound, json);
    }
    let by: Vec<By> = match p.by.as_deref() {
        None | Some("") => data::report_by(),
        Some(list) => match list
            .split(',')
            .map(str::parse)
            .collect::<std::result::Result<Vec<By>, _>>()
        {
            Ok(b) => b,
            Err(e) => return error_response(StatusCode::BAD_REQUEST, &format!("by: {e}"), json),
        },
    };
    let days = p.days.unwrap_or(30).min(36_500);
    let b = base.clone();
    let key = format!("report {by:?} {days} {b}");
    match read(&app, &who.user, move |app, s| {
        app.page(key, || data::report(s, &by, &app.groups, days, &b))
    })
    .await
    {
        Ok(p) => answer(&p, &who, &base, json),
        Err(m) => miss(m, json),
    }
}

async fn metrics(state: St, req: Request) -> Response {
    let app = state.0;
    let peer = req.extensions().get::<Peer>().copied();
    let scraper =
        matches!(peer, Some(Peer::Tcp(ip)) if app.scrapers.iter().any(|n| n.contains(ip)));
    // The scraper's reads are counted apart from any user's (no user name
    // holds a NUL).
    let asker = if scraper {
        String::from("\0metrics")
    } else {
        match who(&app, &req) {
            Ok(w) if w.admin => w.user,
            Ok(_) => return miss(Miss::NotFound, false),
            Err(r) => return *r,
        }
    };
    let made = read(&app, &asker, |app, s| {
        let sig = signature(&app.db);
        let mut m = lock(&app.metrics);
        if let Some((at, s0, text)) = &*m {
            if at.elapsed() < METRICS_TTL && *s0 == sig {
                return Ok(text.clone());
            }
        }
        let text = data::metrics(s)?;
        *m = Some((Instant::now(), sig, text.clone()));
        Ok(text)
    })
    .await;
    match made {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(m) => miss(m, false),
    }
}

async fn not_found(state: St, req: Request) -> Response {
    let json = wants_json(req.uri(), req.headers());
    // Who asks is checked first, so a page that does not exist and one
    // that is not theirs answer alike.
    if let Err(r) = who(&state.0, &req) {
        return *r;
    }
    miss(Miss::NotFound, json)
}

/// Raises the open-file limit to its hard limit (each connection is one).
fn more_files() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// Runs the server until SIGTERM or SIGINT.
pub fn main_with(args: Args) -> Result<()> {
    let app = Arc::new(App::new(&args)?);
    let mode = u32::from_str_radix(&args.socket_mode, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| {
            Error::Usage(format!(
                "--socket-mode '{}': an octal mode such as 660",
                args.socket_mode
            ))
        })?;
    if args.socket.is_some() == args.listen.is_some() {
        return Err(Error::Usage(
            "give one of --socket PATH or --listen ADDRESS:PORT".into(),
        ));
    }
    if args.timeout == 0 || args.max_connections == 0 {
        return Err(Error::Usage(
            "--timeout and --max-connections must be positive".into(),
        ));
    }
    more_files();
    let limits = Limits {
        connections: args.max_connections,
        header_wait: Duration::from_secs(10),
        request_time: Duration::from_secs(args.timeout),
        body: 64 * 1024,
        head: 64 * 1024,
    };
    // Say at start what the pages will say on each request.
    if let Err(e) = Store::open_read_only(&app.db, BUSY) {
        hpc_core::note!("hpc-web: warning: {e}; pages say so until it is fixed");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(16)
        .build()?;
    let served = rt.block_on(async move {
        let listener = match (&args.socket, &args.listen) {
            (Some(path), _) => Listener::Unix(server::bind_unix(path, mode)?, path.clone()),
            (_, Some(addr)) => Listener::Tcp(tokio::net::TcpListener::bind(addr.as_str()).await?),
            _ => unreachable!("checked above"),
        };
        let (tx, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            let _ = tx.send(true);
        });
        eprintln!(
            "hpc-web: serving {}",
            match (&args.socket, &args.listen) {
                (Some(p), _) => hpc_core::paths::shown(p),
                (_, Some(a)) => a.clone(),
                _ => String::new(),
            }
        );
        server::serve(listener, router(app), limits, rx).await?;
        Ok::<_, Error>(())
    });
    // Reads whose requests gave up may still wait on SQLite (a locked
    // history): they are not waited for (dropping the runtime would).
    rt.shutdown_timeout(Duration::from_millis(100));
    served
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An app over an empty history in `dir`.
    fn app(dir: &Path) -> Arc<App> {
        let db = dir.join("h.db");
        Store::open(&db).unwrap();
        let args = Args::from_args(&["hpc-web"], &["--db", db.to_str().unwrap()]).unwrap();
        Arc::new(App::new(&args).unwrap())
    }

    /// One user's reads hold at most half the readers: another user's
    /// read runs while the first's pile up. (Sixty requests for one user's
    /// largest job page held all eight, and another's page waited 15 s for
    /// a 503.)
    #[test]
    fn one_users_reads_leave_readers_for_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(dir.path());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(16)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (go, wait) = std::sync::mpsc::channel::<()>();
            let wait = Arc::new(Mutex::new(wait));
            let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let mut ann = Vec::new();
            for _ in 0..READERS {
                let (app, wait, started) = (app.clone(), wait.clone(), started.clone());
                ann.push(tokio::spawn(async move {
                    read(&app, "ann", move |_, _| {
                        started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let _ = lock(&wait).recv();
                        Ok(())
                    })
                    .await
                }));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            let bob = tokio::time::timeout(
                Duration::from_secs(5),
                read(&app, "bob", |_, _| Ok("bob's page")),
            )
            .await;
            assert_eq!(bob.ok().and_then(|r| r.ok()), Some("bob's page"));
            assert_eq!(
                started.load(std::sync::atomic::Ordering::SeqCst),
                READERS_PER_USER,
                "ann's reads at once"
            );
            for _ in 0..READERS {
                go.send(()).unwrap();
            }
            for a in ann {
                assert!(a.await.unwrap().is_ok());
            }
        });
    }
}
