//! The errors a new user meets in the first hour, each against a real port, server or
//! command: `mcpbench run` exits 2 without a panic, names where the target is written (the
//! scenario's line, or the flag that set it) and the one likely cause with its fix.

use std::path::Path;
use std::sync::Arc;

use mcpbench::server::{Config, policy::Policy, tls};
use tokio::io::AsyncWriteExt;

use crate::support::raw_http::{self, ThreadServer, read_request};
use crate::support::{DEAD_PORT, launch, mcpbench, scratch, self_signed};

const LOAD: &str =
    "[load]\nconcurrency = 1\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n";

/// Runs `first.toml` (its `[target]` table holding `target`, on line 3 on) with `args`;
/// its error, after checking the run was refused as a set-up error and nothing was run.
fn refused(dir: &Path, target: &str, args: &[&str]) -> String {
    let text = format!("name = \"first\"\n[target]\n{target}\n{LOAD}");
    std::fs::write(dir.join("first.toml"), text).unwrap();
    let root = dir.join("results");
    let mut all = vec![
        "run",
        "first.toml",
        "--results-root",
        root.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let (code, out, err) = mcpbench(&all, dir);
    assert_eq!(code, 2, "a set-up error: {out}{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!root.exists(), "nothing was run: {err}");
    err
}

/// Asserts `err` holds every one of `parts`.
fn says(err: &str, parts: &[&str]) {
    for p in parts {
        assert!(err.contains(p), "`{p}` missing from:\n{err}");
    }
}

/// A plain HTTP server answering every request with `status`, `content_type` and `body`.
fn answering(status: &'static str, content_type: &'static str, body: &'static str) -> ThreadServer {
    raw_http::start(1, move |mut s| async move {
        let mut buf = Vec::new();
        while read_request(&mut s, &mut buf).await.is_some() {
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if s.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        }
    })
}

#[test]
fn a_closed_port_says_nothing_listens_there_and_where_the_url_is_written() {
    let dir = scratch();
    let url = format!("url = \"http://127.0.0.1:{DEAD_PORT}/mcp\"");
    let cause = "is not usable: nothing listens on 127.0.0.1:0 (connection refused)\n  \
                 hint: is the server started? is the port right?";
    for args in [&[][..], &["--concurrency", "2"]] {
        // Overrides of other keys do not move the line.
        let err = refused(dir.path(), &url, args);
        says(
            &err,
            &[
                "first.toml:3:7: `target.url`: target http://127.0.0.1:0/mcp",
                cause,
            ],
        );
        assert!(!err.contains("TLS failure"), "one cause, not all: {err}");
    }
    let err = refused(dir.path(), &url, &["--url", "http://127.0.0.1:0/other"]);
    says(
        &err,
        &[
            "error: --url http://127.0.0.1:0/other: `target.url`: ",
            cause,
        ],
    );
}

#[test]
fn a_host_name_that_does_not_resolve_is_named() {
    let dir = scratch();
    let err = refused(dir.path(), "url = \"http://no-such-host.invalid/mcp\"", &[]);
    says(
        &err,
        &[
            "first.toml:3:7: `target.url`: ",
            "the host name `no-such-host.invalid` does not resolve",
            "hint: is the host name right?",
        ],
    );
}

#[test]
fn tls_failures_say_which_and_what_to_do() {
    let dir = scratch();
    let plain = launch(Config::default());
    let err = refused(
        dir.path(),
        &format!("url = \"https://{}/mcp\"", plain.mcp_addr),
        &[],
    );
    says(
        &err,
        &[
            "the server does not speak TLS there",
            "hint: does it serve plain HTTP? then the URL starts with http://",
        ],
    );
    let (cert, key) = self_signed(dir.path());
    let secure = launch(Config {
        tls: Some(tls::load_pem(&cert, &key).expect("PEM loads")),
        ..Config::default()
    });
    let err = refused(
        dir.path(),
        &format!("url = \"https://localhost:{}/mcp\"", secure.mcp_addr.port()),
        &[],
    );
    says(
        &err,
        &[
            "first.toml:3:7: `target.url`: ",
            "the server's certificate is not trusted",
            "`[target.tls] ca = \"ca.pem\"`",
            "`[target.tls] insecure = true`",
        ],
    );
    let err = refused(
        dir.path(),
        &format!("url = \"http://{}/mcp\"", secure.mcp_addr),
        &[],
    );
    says(
        &err,
        &[
            "the answer is not HTTP",
            "does the server speak TLS there? then the URL starts with https://",
        ],
    );
}

#[test]
fn a_server_that_accepts_and_never_answers_is_told_from_a_closed_port() {
    let dir = scratch();
    let silent = raw_http::start(1, |s| async move {
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        drop(s);
    });
    // The session opening gets at least 5s, however short the request timeout.
    let err = refused(
        dir.path(),
        &format!("url = \"http://{}/mcp\"", silent.addr),
        &["--set", "load.timeout=1s"],
    );
    says(
        &err,
        &[
            "first.toml:3:7: `target.url`: ",
            "the server accepted the connection but sent no answer within 5s",
        ],
    );
}

#[test]
fn a_web_server_does_not_look_like_an_mcp_endpoint() {
    let dir = scratch();
    let page = "<!DOCTYPE HTML><html><head><title>Error response</title><style>body { margin: 0 }</style></head><body><h1>Unsupported method ('POST')</h1></body></html>";
    let web = answering("501 Not Implemented", "text/html", page);
    let err = refused(dir.path(), &format!("url = \"http://{}/\"", web.addr), &[]);
    says(
        &err,
        &[
            "this does not look like an MCP endpoint (HTTP 501 text/html); the server said: \
             Error response Unsupported method ('POST')",
            "hint: is the path /mcp?",
        ],
    );
    assert!(!err.contains('<'), "the page's text, not its HTML: {err}");
    let site = answering("200 OK", "text/html; charset=utf-8", "<p>Welcome</p>");
    let err = refused(
        dir.path(),
        &format!("url = \"http://{}/mcp\"", site.addr),
        &[],
    );
    says(
        &err,
        &[
            "this does not look like an MCP endpoint (HTTP 200 text/html; charset=utf-8: \
             expected application/json or text/event-stream)",
            "hint: is this the MCP server's address and port?",
        ],
    );
    // The mock backend is a REST server: no MCP there.
    let rest = launch(Config::default());
    let err = refused(
        dir.path(),
        &format!("url = \"{}/mcp\"", rest.backend_url),
        &[],
    );
    says(
        &err,
        &["this does not look like an MCP endpoint (HTTP 404 application/json)"],
    );
}

#[test]
fn a_wrong_path_transport_or_missing_token_gets_its_fix() {
    let dir = scratch();
    let server = launch(Config {
        policy: Some(Arc::new(
            Policy::parse("[[tenant]]\nname = \"a\"\ntokens = [\"t-1\"]\n").unwrap(),
        )),
        ..Config::default()
    });
    let a = server.mcp_addr;
    let token = ["-H", "Authorization: Bearer t-1"];
    let cases: &[(String, &[&str], &[&str])] = &[
        (
            format!("url = \"http://{a}/mcp\""),
            &[],
            &[
                "HTTP 401: the server wants credentials",
                "hint: send them: `-H 'Authorization: Bearer …'`, or `[target.headers]`",
            ],
        ),
        (
            format!("url = \"http://{a}/nope\""),
            &token,
            &[
                "HTTP 404: nothing is served at /nope",
                "hint: is the path right? MCP servers usually answer at /mcp",
            ],
        ),
        (
            format!("url = \"http://{a}/sse\""),
            &token,
            &[
                "HTTP 405: /sse takes no POST",
                "add `transport = \"sse\"` to [target]",
            ],
        ),
        (
            format!("url = \"http://{a}/mcp\"\ntransport = \"sse\""),
            &token,
            &[
                "GET /mcp was answered HTTP 405",
                "remove `transport = \"sse\"` from [target]",
            ],
        ),
    ];
    for (target, args, parts) in cases {
        let err = refused(dir.path(), target, args);
        says(&err, &["first.toml:3:7: `target.url`: "]);
        says(&err, parts);
    }
}

#[test]
fn stdio_commands_that_cannot_serve_say_why() {
    let dir = scratch();
    let err = refused(dir.path(), "command = [\"no-such-mcp-server\"]", &[]);
    says(
        &err,
        &[
            "first.toml:3:11: `target.command`: ",
            "the command `no-such-mcp-server` is not found on PATH",
            "hint: is it installed?",
        ],
    );
    let script = dir.path().join("crash.py");
    std::fs::write(
        &script,
        "import sys\nprint('ModuleNotFoundError: No module named mcp', file=sys.stderr)\nsys.exit(3)\n",
    )
    .unwrap();
    let err = refused(dir.path(), "command = [\"python3\", \"crash.py\"]", &[]);
    says(
        &err,
        &[
            "the command `python3 crash.py` ended before answering; it exited (exit status: 3); \
             its stderr ends: ModuleNotFoundError: No module named mcp",
            "hint: run it by hand",
        ],
    );
    let err = refused(dir.path(), "command = [\"./crash.py\"]", &[]);
    says(
        &err,
        &[
            "the command `./crash.py` cannot be run (permission denied)",
            "command = [\"python3\", \"./crash.py\"]",
        ],
    );
}
