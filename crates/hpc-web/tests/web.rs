//! The real server on a real socket over a real SQLite history: who sees
//! what, escaping, bounds, and the history locked, deleted and replaced
//! while it serves. Each guard has a test that fails without it.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hpc_core::record::Job;
use hpc_db::Store;
use hpc_testkit::Tool;

const WEB: Tool = Tool::new(env!("CARGO_BIN_EXE_hpc-web"));

fn job(id: &str, user: &str, name: &str, end: &str) -> Job {
    Job {
        cluster: "c".into(),
        job_id: id.into(),
        job_id_raw: id.into(),
        user: Some(user.into()),
        job_name: Some(name.into()),
        partition: Some("batch".into()),
        state: "COMPLETED".into(),
        is_final: true,
        start: Some("2026-11-01T00:00:00Z".into()),
        end: Some(end.into()),
        elapsed_s: Some(3600.0),
        alloc_cpus: Some(4),
        req_mem_mb: Some(8192.0),
        max_rss_mb: Some(1024.0),
        cpu_hours_reserved: Some(4.0),
        cpu_hours_wasted: Some(3.0),
        mem_gb_hours_reserved: Some(8.0),
        mem_gb_hours_wasted: Some(7.0),
        ..Default::default()
    }
}

/// A history: ann's jobs 100 (hostile name, flagged, sampled) and 101,
/// bob's job 200.
fn history(path: &Path) {
    let mut s = Store::open(path).unwrap();
    let mut w = s.writer().unwrap();
    w.put_job(&job(
        "100",
        "ann",
        "<script>alert(1)</script>",
        "2026-11-02T00:00:00Z",
    ))
    .unwrap();
    w.put_job(&job("101", "ann", "blast", "2026-11-03T00:00:00Z"))
        .unwrap();
    w.put_job(&job(
        "200",
        "bob",
        "bobs-secret-run",
        "2026-11-04T00:00:00Z",
    ))
    .unwrap();
    w.put_line(
        "flag",
        r#"{"kind":"flag","job_id":"100","flag":"mem_overrequest","category":"misuse","value":0.1,"threshold":0.25,"reason":"<img src=x onerror=alert(2)>"}"#,
    )
    .unwrap();
    for i in 0..30 {
        let line = format!(
            r#"{{"kind":"sample","job_id":"100","host":"n1","t":{},"rss_mb":{},"cpu_cores":2.0}}"#,
            1_761_955_200 + i * 10,
            500 + i * 10
        );
        w.put_line("sample", &line).unwrap();
    }
    w.commit().unwrap();
}

struct Server {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
    db: PathBuf,
}

impl Server {
    /// A server whose admin is `root` by name, with `extra` options.
    fn start(extra: &[&str]) -> Server {
        let mut args = vec!["--admins", "root"];
        args.extend_from_slice(extra);
        Server::start_bare(&args)
    }

    /// A server with only `extra` options beside the socket and database.
    fn start_bare(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        history(&db);
        let socket = dir.path().join("web.sock");
        let child = WEB
            .command(&[
                "--socket",
                socket.to_str().unwrap(),
                "--db",
                db.to_str().unwrap(),
                "--model",
                "/nonexistent/hpc-model",
            ])
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(&socket).is_err() {
            assert!(Instant::now() < deadline, "the server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Server {
            child,
            socket,
            _dir: dir,
            db,
        }
    }

    /// GET `path` as `user` (no header with `None`): (status, body).
    fn get(&self, path: &str, user: Option<&str>) -> (u16, String) {
        let s = UnixStream::connect(&self.socket).unwrap();
        request(s, path, user, &[])
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request on `s` (HTTP/1.1, closed after): (status, body).
fn request<S: Read + Write>(
    mut s: S,
    path: &str,
    user: Option<&str>,
    extra: &[&str],
) -> (u16, String) {
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    if let Some(u) = user {
        head.push_str(&format!("X-Forwarded-User: {u}\r\n"));
    }
    for h in extra {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|b| b.1.to_string())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn a_user_sees_their_own_jobs_and_never_anothers() {
    let srv = Server::start(&[]);
    let (st, page) = srv.get("/", Some("ann"));
    assert_eq!(st, 200, "{page}");
    assert!(page.contains("href=\"./job/101\""), "{page}");
    assert!(!page.contains("bobs-secret-run"));
    // Another user's job, plot and JSON answer as a job that does not exist.
    let missing = srv.get("/job/999", Some("ann"));
    assert_eq!(missing.0, 404);
    for path in [
        "/job/200",
        "/api/job/200",
        "/job/200/plot.svg",
        "/?user=bob",
        "/api/jobs?user=bob",
        "/tools?user=bob",
    ] {
        let (st, body) = srv.get(path, Some("ann"));
        assert_eq!(st, 404, "{path}: {body}");
        assert!(!body.contains("bobs-secret-run"), "{path}");
    }
    assert_eq!(
        srv.get("/job/200", Some("ann")).1,
        missing.1,
        "the same answer as a missing job"
    );
    // Her own job: its panels, flag and record.
    let (st, page) = srv.get("/job/100", Some("ann"));
    assert_eq!(st, 200);
    assert!(page.contains("<svg"), "the job's panels");
    assert!(page.contains("mem_overrequest"));
    let (st, svg) = srv.get("/job/100/plot.svg", Some("ann"));
    assert_eq!(st, 200);
    assert!(svg.starts_with("<svg"));
    // An admin sees every user's.
    assert_eq!(srv.get("/job/200", Some("root")).0, 200);
    assert!(srv
        .get("/?user=bob", Some("root"))
        .1
        .contains("bobs-secret-run"));
    // The centre's report and metrics are for admins only.
    assert_eq!(srv.get("/report", Some("ann")).0, 404);
    assert_eq!(srv.get("/metrics", Some("ann")).0, 404);
    let (st, report) = srv.get("/report?days=0", Some("root"));
    assert_eq!(st, 200);
    assert!(report.contains("By partition"));
    let (st, m) = srv.get("/metrics", Some("root"));
    assert_eq!(st, 200);
    assert!(
        m.contains("hpc_sizer_partition_jobs{partition=\"batch\"} 3"),
        "{m}"
    );
    assert!(m.ends_with("# EOF\n"));
}

#[test]
fn a_job_id_another_users_job_has_too_shows_none_of_its_records() {
    // Records are kept by job id alone. Ann's job 300 on cluster a and
    // bob's job 300 on cluster b (or ids that wrapped): ann's page showed
    // bob's flag, samples and analysis (his script), and her list his flag.
    let srv = Server::start(&[]);
    {
        let mut s = Store::open(&srv.db).unwrap();
        let mut w = s.writer().unwrap();
        let mut mine = job("300", "ann", "hers", "2026-11-05T00:00:00Z");
        mine.cluster = "a".into();
        w.put_job(&mine).unwrap();
        let mut his = job("300", "bob", "his", "2026-11-06T00:00:00Z");
        his.cluster = "b".into();
        w.put_job(&his).unwrap();
        w.put_line(
            "flag",
            r#"{"kind":"flag","job_id":"300","flag":"bobs_flag","category":"misuse","value":1,"threshold":0.5,"reason":"bobs reason"}"#,
        )
        .unwrap();
        w.put_line(
            "analysis",
            r#"{"kind":"analysis","job_id":"300","user":"bob","script":"SECRET_TOKEN=hunter2","script_sha256":"00","request":{},"tool":"bobtool"}"#,
        )
        .unwrap();
        w.put_line(
            "sample",
            r#"{"kind":"sample","job_id":"300","host":"bobnode","t":1762300000,"rss_mb":5}"#,
        )
        .unwrap();
        w.commit().unwrap();
    }
    for path in [
        "/api/job/300",
        "/job/300",
        "/job/300/plot.svg",
        "/api/jobs",
        "/",
        "/tools",
    ] {
        let (_, body) = srv.get(path, Some("ann"));
        for secret in ["hunter2", "bobs_flag", "bobnode", "bobtool"] {
            assert!(!body.contains(secret), "{path} shows {secret}: {body}");
        }
    }
    let (st, body) = srv.get("/api/job/300", Some("ann"));
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["withheld"], serde_json::json!(["300"]), "{body}");
    assert!(srv
        .get("/job/300", Some("ann"))
        .1
        .contains("another user's job too"));
    // Her other jobs keep theirs; an admin sees both runs' records.
    assert!(srv
        .get("/job/100", Some("ann"))
        .1
        .contains("mem_overrequest"));
    let (_, all) = srv.get("/api/job/300", Some("root"));
    assert!(
        all.contains("hunter2") && all.contains("bobs_flag"),
        "{all}"
    );
}

#[test]
fn a_long_series_is_thinned_over_the_whole_run() {
    // 50,000 samples of ann's job 101: the page read every one (a million
    // took 7 s and 218 MB a request) and the JSON carried the first 20,000,
    // the run's first 40 %.
    let srv = Server::start(&[]);
    let t0 = 1_762_000_000;
    {
        let mut s = Store::open(&srv.db).unwrap();
        let mut w = s.writer().unwrap();
        for i in 0..50_000 {
            let line = format!(
                r#"{{"kind":"sample","job_id":"101","host":"n1","t":{},"rss_mb":{}}}"#,
                t0 + i,
                100 + i % 7
            );
            w.put_line("sample", &line).unwrap();
        }
        w.commit().unwrap();
    }
    let (st, body) = srv.get("/api/job/101", Some("ann"));
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["samples_total"], 50_000);
    let ts: Vec<i64> = v["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["t"].as_f64().unwrap() as i64)
        .collect();
    assert!((10_000..=20_000).contains(&ts.len()), "{}", ts.len());
    assert_eq!(ts[0], t0);
    assert!(
        *ts.last().unwrap() >= t0 + 49_990,
        "the run's end: {:?}",
        ts.last()
    );
    assert!(
        ts.windows(2).all(|w| w[1] - w[0] == 3),
        "evenly, in time order"
    );
    let (st, page) = srv.get("/job/101", Some("ann"));
    assert_eq!(st, 200);
    assert!(page.contains("<svg"));
}

#[test]
fn json_carries_the_records_the_cli_prints() {
    let srv = Server::start(&[]);
    let (st, body) = srv.get("/api/jobs", Some("ann"));
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["total"], 2);
    assert_eq!(v["jobs"][0]["kind"], "job");
    assert_eq!(v["jobs"][0]["job_id"], "101", "newest first");
    // A page far past the last is empty, not an error.
    let (st, body) = srv.get("/api/jobs?page=18446744073709551615&per=200", Some("ann"));
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["jobs"].as_array().map(Vec::len), Some(0));
    // The same page by Accept.
    let s = UnixStream::connect(&srv.socket).unwrap();
    let (st, body) = request(s, "/job/100", Some("ann"), &["Accept: application/json"]);
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["flags"][0]["flag"], "mem_overrequest");
    assert_eq!(v["samples_total"], 30);
    assert!(v["advice"]["error"]
        .as_str()
        .unwrap()
        .contains("cannot run"));
}

#[test]
fn hostile_names_are_text() {
    let srv = Server::start(&[]);
    let (_, page) = srv.get("/", Some("ann"));
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!page.contains("<script>"));
    let (_, page) = srv.get("/job/100", Some("ann"));
    assert!(page.contains("&lt;img src=x onerror=alert(2)&gt;"));
    assert!(!page.contains("<img"));
    // A hostile user name in the header is refused or escaped, never markup.
    let (st, page) = srv.get("/", Some("<b>x</b>"));
    assert!(st == 200 || st == 401, "{st}");
    assert!(!page.contains("<b>x</b>"));
}

#[test]
fn the_header_is_believed_only_from_the_socket_or_a_trusted_proxy() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    history(&db);
    let addr = format!("127.0.0.1:{port}");
    let mut child = WEB
        .command(&[
            "--listen",
            &addr,
            "--db",
            db.to_str().unwrap(),
            "--trust-proxy",
            "10.9.9.9",
            "--metrics-from",
            "127.0.0.1",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let get = |path: &str, user: Option<&str>| {
        request(
            std::net::TcpStream::connect(&addr).unwrap(),
            path,
            user,
            &[],
        )
    };
    // 127.0.0.1 is not the trusted proxy: its header is refused.
    let (st, body) = get("/", Some("ann"));
    assert_eq!(st, 401, "{body}");
    assert!(!body.contains("blast"));
    assert_eq!(get("/api/job/100", Some("root")).0, 401);
    assert_eq!(get("/", None).0, 401);
    // A scraper address reads /metrics without a user.
    let (st, m) = get("/metrics", None);
    assert_eq!(st, 200);
    assert!(m.contains("hpc_sizer_state_jobs"));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn paths_outside_the_pages_are_not_found() {
    let srv = Server::start(&[]);
    for p in [
        "/../../etc/passwd",
        "/job/..%2F..%2F..%2Fetc%2Fpasswd",
        "/job/%2e%2e/%2e%2e/etc/passwd",
        "/static/../../etc/passwd",
        "/job/100/../../../../etc/passwd",
    ] {
        let (st, body) = srv.get(p, Some("ann"));
        assert!(st == 404 || st == 400, "{p}: {st}");
        assert!(!body.contains("root:x:0:0"), "{p}");
    }
}

#[test]
fn a_large_request_is_refused_and_the_server_goes_on() {
    let srv = Server::start(&[]);
    let mut s = UnixStream::connect(&srv.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let size = 20 * 1024 * 1024;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nX-Forwarded-User: ann\r\nContent-Length: {size}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    // The answer comes before the body is sent; sending it may then fail.
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..20 {
        if s.write_all(&chunk).is_err() {
            break;
        }
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    // A header block larger than the limit.
    let big = format!("X-Pad: {}", "b".repeat(200 * 1024));
    let (st, _) = request(
        UnixStream::connect(&srv.socket).unwrap(),
        "/",
        Some("ann"),
        &[&big],
    );
    assert!(st == 431 || st == 0, "{st}");
    // One past the 64 KiB limit by a third: hyper's buffer took it whole.
    let big = format!("X-Pad: {}", "b".repeat(100_000));
    let (st, _) = request(
        UnixStream::connect(&srv.socket).unwrap(),
        "/",
        Some("ann"),
        &[&big],
    );
    assert_eq!(st, 431);
    assert_eq!(srv.get("/", Some("ann")).0, 200);
}

#[test]
fn ten_thousand_idle_connections_do_not_stop_the_pages() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    let want = 10_400;
    if hard < want {
        eprintln!("skipped: the open-file limit {hard} is below {want}");
        return;
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    let srv = Server::start(&[]);
    let mut idle = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        idle.push(UnixStream::connect(&srv.socket).unwrap());
    }
    let t = Instant::now();
    let (st, _) = srv.get("/", Some("ann"));
    assert_eq!(st, 200);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let rss = std::fs::read_to_string(format!("/proc/{}/status", srv.child.id())).unwrap();
    let kb: u64 = rss
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(kb < 200 * 1024, "{kb} kB with 10,000 idle connections");
    drop(idle);
}

#[test]
fn a_locked_deleted_or_replaced_history_is_a_clear_page_and_the_server_goes_on() {
    let srv = Server::start(&[]);
    // Locked: a writer holds an exclusive lock on a rollback-journal copy.
    {
        let c = rusqlite::Connection::open(&srv.db).unwrap();
        c.execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; DELETE FROM flags;")
            .unwrap();
        let t = Instant::now();
        let (st, body) = srv.get("/", Some("ann"));
        assert_eq!(st, 503, "{body}");
        assert!(body.contains("cannot be read now"), "{body}");
        assert!(t.elapsed() < Duration::from_secs(12));
        c.execute_batch("ROLLBACK").unwrap();
    }
    assert_eq!(srv.get("/", Some("ann")).0, 200);
    // Deleted.
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", srv.db.display()));
    }
    let (st, body) = srv.get("/", Some("ann"));
    assert_eq!(st, 503);
    assert!(body.contains("no database"), "{body}");
    // The path is the admin's to see, in the server's log, not every user's.
    let dir = srv.db.parent().unwrap().to_string_lossy().into_owned();
    assert!(!body.contains(&dir), "{body}");
    // Replaced by another history: the new one is served.
    {
        let mut s = Store::open(&srv.db).unwrap();
        let mut w = s.writer().unwrap();
        w.put_job(&job("300", "ann", "fresh-run", "2026-11-05T00:00:00Z"))
            .unwrap();
        w.commit().unwrap();
    }
    let (st, body) = srv.get("/", Some("ann"));
    assert_eq!(st, 200);
    assert!(
        body.contains("fresh-run") && !body.contains("blast"),
        "{body}"
    );
    // A newer schema: said, never migrated.
    rusqlite::Connection::open(&srv.db)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let (st, body) = srv.get("/", Some("ann"));
    assert_eq!(st, 503);
    assert!(body.contains("newer than this build"), "{body}");
    let v: u32 = rusqlite::Connection::open(&srv.db)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, 99, "the server never writes the history");
}

#[test]
fn sigterm_stops_it_and_removes_the_socket() {
    let mut srv = Server::start(&[]);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(srv.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let st = srv.child.wait().unwrap();
    assert!(st.success(), "{st:?}");
    assert!(!srv.socket.exists());
}

#[test]
fn sigterm_does_not_wait_for_reads_past_the_timeout() {
    // Reads in flight on a history another process holds locked wait for
    // SQLite's busy timeout (3 s) after their requests gave up (503 at
    // --timeout 1): the stop waited for every one of them.
    let srv = Server::start(&["--timeout", "1"]);
    let lock = rusqlite::Connection::open(&srv.db).unwrap();
    lock.execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE;")
        .unwrap();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let s = UnixStream::connect(&srv.socket).unwrap();
            std::thread::spawn(move || request(s, "/api/jobs", Some("ann"), &[]))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut srv = srv;
    let t0 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(srv.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let st = srv.child.wait().unwrap();
    let took = t0.elapsed();
    assert!(st.success(), "{st:?}");
    for c in clients {
        let _ = c.join();
    }
    drop(lock);
    // The timeout and a second: the reads' 3 s are not waited for.
    assert!(took < Duration::from_millis(2200), "{took:?}");
}

#[test]
fn every_answer_carries_the_security_headers() {
    // The router's own answers (405 for a POST, 400 for a bad path) and
    // /metrics went without them.
    let srv = Server::start(&[]);
    let raw = |head: String| {
        let mut s = UnixStream::connect(&srv.socket).unwrap();
        s.write_all(head.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).to_lowercase()
    };
    let user = "X-Forwarded-User: ann\r\nConnection: close\r\n";
    for head in [
        format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n{user}\r\n"),
        format!("GET /job/%ff HTTP/1.1\r\nHost: x\r\n{user}\r\n"),
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Forwarded-User: root\r\nConnection: close\r\n\r\n"
            .to_string(),
        format!("GET /api/job/100 HTTP/1.1\r\nHost: x\r\n{user}\r\n"),
    ] {
        let out = raw(head.clone());
        let (headers, _) = out.split_once("\r\n\r\n").unwrap();
        for h in [
            "content-security-policy:",
            "x-content-type-options: nosniff",
            "cache-control: private, no-store",
        ] {
            assert!(headers.contains(h), "{head}: {headers}");
        }
    }
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let srv = Server::start(&[]);
    let again = WEB
        .command(&[
            "--socket",
            srv.socket.to_str().unwrap(),
            "--db",
            srv.db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("another server is listening"));
    // A plain file is never removed.
    let file = srv.db.with_extension("txt");
    std::fs::write(&file, "keep").unwrap();
    let o = WEB
        .command(&["--socket", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    let _ = Command::new("true").status();
}

#[test]
fn help_matches_the_man_page() {
    let help = WEB.help(&[]);
    let flags = WEB.assert_help_in_man(&help);
    assert!(flags.len() >= 10, "{flags:?}");
}

#[test]
fn admins_by_unix_group_and_the_report_by_mapped_group() {
    let dir = tempfile::tempdir().unwrap();
    let groups = dir.path().join("groups");
    std::fs::write(&groups, "# user group\nann physics\n").unwrap();
    // root's primary group is root (gid 0) on every system.
    let srv = Server::start_bare(&[
        "--admin-group",
        "root",
        "--groups",
        groups.to_str().unwrap(),
    ]);
    assert_eq!(srv.get("/report", Some("ann")).0, 404);
    let (st, body) = srv.get("/api/report?days=0&by=group", Some("root"));
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let rows = v["reports"].as_array().unwrap();
    let physics = rows
        .iter()
        .find(|r| r["group"] == "physics")
        .expect("ann's group");
    assert_eq!(physics["jobs"], 2);
    assert!(
        rows.iter()
            .any(|r| r["group"] == "(none)" && r["jobs"] == 1),
        "{rows:?}"
    );
    drop(srv);
    // Another group's name makes nobody an admin.
    let srv = Server::start_bare(&["--admin-group", "no-such-group-hpc-web"]);
    assert_eq!(srv.get("/report", Some("root")).0, 404);
    // A mapping file that cannot be read is a usage error at start.
    let o = WEB
        .command(&[
            "--socket",
            "/nonexistent/s",
            "--groups",
            "/nonexistent/groups",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A query that cannot be read is a 400 in the asker's format once the
/// asker is known, and a 401 before (it was a plain-text 400 to anyone,
/// /api/ too); a user name in UTF-8 signs in (zoë got a 401).
#[test]
fn a_bad_query_is_answered_after_the_user_and_in_their_format() {
    let s = Server::start(&[]);
    let (code, _) = s.get("/api/jobs?page=abc", None);
    assert_eq!(code, 401);
    let (code, body) = s.get("/api/jobs?page=abc", Some("ann"));
    assert_eq!(code, 400, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(v["error"].as_str().unwrap().contains("page"), "{body}");
    let (code, body) = s.get("/tools?days=x", Some("ann"));
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("<h1>400</h1>"), "{body}");
    let (code, body) = s.get("/api/jobs", Some("zoë"));
    assert_eq!(code, 200, "{body}");
}

/// A misspelled --admin-group made nobody an admin in silence.
#[test]
fn an_admin_group_that_does_not_exist_is_said() {
    let mut s = Server::start_bare(&["--admin-group", "no-such-group-hpc"]);
    assert_eq!(s.get("/report", Some("ann")).0, 404);
    s.child.kill().unwrap();
    let mut err = String::new();
    s.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("--admin-group no-such-group-hpc: no such group now"),
        "{err}"
    );
}
