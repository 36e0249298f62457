//! The instruction-count gate: the hot path's cost in instructions, counted by callgrind, against
//! a committed baseline. Unlike seconds on a shared 2-core machine, these counts repeat to a
//! fraction of a percent, so CI can fail on a regression without flaking.
//!
//! ```text
//! cargo bench --bench icount                        # measure every case, compare, exit 1 on a regression
//! cargo bench --bench icount -- --save-baseline     # measure and rewrite the baseline
//! cargo bench --bench icount -- --case NAME --iters N   # run one case (what callgrind runs)
//! ```
//!
//! Each case is set up outside [`icount_measured`], which callgrind alone counts
//! (`--toggle-collect`); a case runs at two iteration counts and the difference divided by the
//! difference in iterations is its marginal cost per operation, with one-time work (first-use
//! initialisation, buffer growth) cancelled out. The baseline is
//! `results/baselines/icount.json`; a case more than its tolerance above it is a regression.
//! Counts belong to a machine type (simd-json and memchr pick their code by CPU features) and a
//! toolchain: after an intended change, or on new CI hardware, rewrite the baseline with
//! `--save-baseline` and commit it with the reason. Needs valgrind (`apt install valgrind`).

#[path = "common/messages.rs"]
mod messages;

use std::hint::black_box;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpbench::client::request::RequestTemplate;
use mcpbench::driver::schedule::Arrivals;
use mcpbench::metrics::outcome::Outcome;
use mcpbench::metrics::recorder::{Phase, Recorder};
use mcpbench::protocol::jsonrpc::{Codec, decode};
use mcpbench::protocol::version::Revision;
use mcpbench::scenario::plan::{Arrival, Profile};
use mcpbench::transport::net::NetTarget;
use mcpbench::transport::sse_decoder::SseDecoder;
use mcpbench::transport::streamable_http::HttpSession;
use mcpbench::transport::{CallSpec, Endpoint, Session, TransportKind};
use rand::SeedableRng;
use rand::rngs::SmallRng;

/// A case's work, set up and ready: one call is one operation.
type Work = Box<dyn FnMut()>;

struct Case {
    name: String,
    /// Iterations of the two runs whose difference is measured.
    iters: (u64, u64),
    make: Box<dyn Fn() -> Work>,
}

/// Allowed growth over the baseline before the gate fails, in percent. Repeated counts of one
/// binary differ by well under 0.5 % (hash seeds, timer-dependent paths in the whole request);
/// rebuilds after unrelated edits moved unchanged code by up to 2.3 % with four codegen units,
/// hence one unit in the bench profile and this margin.
const TOLERANCE_PCT: f64 = 3.0;
/// Differences below this many instructions are never a regression (tiny cases).
const TOLERANCE_ABS: f64 = 10.0;

const BASELINE: &str = "results/baselines/icount.json";

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (size, msg) in messages::sized() {
        for codec in [Codec::Scan, Codec::SerdeJson, Codec::SimdJson] {
            let msg = msg.clone();
            cases.push(Case {
                name: format!("decode/{}/{size}", codec_name(codec)),
                iters: (200, 1200),
                make: Box::new(move || {
                    let msg = msg.clone();
                    let mut buf = Vec::with_capacity(msg.len());
                    Box::new(move || {
                        buf.clear();
                        buf.extend_from_slice(msg.as_bytes());
                        black_box(decode(codec, &mut buf).is_ok());
                    })
                }),
            });
        }
    }
    cases.push(Case {
        name: "sse/priming_plus_response".into(),
        iters: (200, 1200),
        make: Box::new(|| {
            let stream = messages::sse_stream();
            let mut d = SseDecoder::default();
            Box::new(move || {
                d.reset();
                let mut n = 0;
                let _ = d.feed(stream.as_bytes(), |e| {
                    n += e.data.len();
                    ControlFlow::Continue(())
                });
                black_box(n);
            })
        }),
    });
    cases.push(Case {
        name: "request_body/tools_call_with_generators".into(),
        iters: (200, 1200),
        make: Box::new(|| {
            let plan = mcpbench::scenario::parse("bench.toml", messages::GENERATED_CALL, &|_| None)
                .expect("the bench scenario parses");
            let template = RequestTemplate::new(&plan.workload[0], Revision::V2025_11_25);
            let mut rng = SmallRng::seed_from_u64(1);
            let mut out = Vec::with_capacity(256);
            let mut id = 0u64;
            Box::new(move || {
                out.clear();
                id += 1;
                template.write(&plan.workload[0], &mut out, id, &mut rng);
                black_box(out.len());
            })
        }),
    });
    cases.push(Case {
        name: "recorder/record_ok".into(),
        iters: (200, 1200),
        make: Box::new(|| {
            let mut r = Recorder::new(4);
            let mut i = 0u64;
            Box::new(move || {
                i = i.wrapping_add(7919);
                r.started(1, Phase::Measured);
                let latency = Duration::from_micros(100 + i % 5000);
                r.record(1, Phase::Measured, Outcome::Ok, latency);
            })
        }),
    });
    for arrival in [Arrival::Uniform, Arrival::Poisson] {
        cases.push(Case {
            name: format!("schedule/{}_ramp", format!("{arrival:?}").to_lowercase()),
            iters: (200, 1200),
            make: Box::new(move || {
                // A ramp and a plateau: the quadratic inverse, then the linear one.
                let profile = Profile {
                    start: 100.0,
                    stages: vec![
                        (Duration::from_secs(10), 20_000.0),
                        (Duration::from_secs(60), 20_000.0),
                    ],
                };
                let mut arrivals = Arrivals::new(&profile, arrival, 0, 2, 7);
                Box::new(move || {
                    black_box(arrivals.next_at().expect("the profile outlasts the case"));
                })
            }),
        });
    }
    for (name, http2, plain) in [
        ("h1", false, false),
        ("h2", true, false),
        ("h1_event_loop", false, true),
    ] {
        cases.push(Case {
            name: format!("whole_request/streamable_http_json_{name}"),
            iters: (100, 400),
            make: Box::new(move || whole_request(http2, plain)),
        });
    }
    cases
}

fn codec_name(c: Codec) -> &'static str {
    match c {
        Codec::Scan => "scan",
        Codec::SerdeJson => "serde_json",
        Codec::SimdJson => "simd_json",
    }
}

/// One `tools/call echo` round trip: the client session and the reference server on one
/// current-thread runtime over loopback TCP (HTTP/1.1, or HTTP/2 with prior knowledge), so
/// callgrind counts both sides in one thread. `plain`: the call as the workers' event loop
/// makes it (begun, then polled until its plain answer is in), not as a future.
fn whole_request(http2: bool, plain: bool) -> Work {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a loopback port");
    let addr = listener.local_addr().expect("bound");
    rt.spawn(mcpbench::server::serve(
        listener,
        mcpbench::server::Config::default(),
        std::future::pending(),
    ));
    let revision = Revision::V2025_11_25;
    let timeout = Duration::from_secs(10);
    let ep = Endpoint {
        timing: None,
        sessions_per_connection: 1,
        replicas: Vec::new(),
        id_base: 0,
        children: Default::default(),
        kind: TransportKind::StreamableHttp,
        net: Some(NetTarget {
            addr,
            tls: None,
            connect_timeout: timeout,
            source: None,
        }),
        host: addr.to_string(),
        path: "/mcp".into(),
        extra_headers: Vec::new(),
        headers: Vec::new(),
        http2,
        command: None,
        protocol: revision,
        codec: Codec::Scan,
        max_body: 4 << 20,
        timeout,
    };
    let mut session = HttpSession::new(Arc::new(ep));
    let opened = rt.block_on(session.open());
    assert_eq!(opened.outcome, Outcome::Ok, "the session opens");
    let text = "[load]\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"hello from mcpbench\" }\n";
    let plan = mcpbench::scenario::parse("bench.toml", text, &|_| None).expect("parses");
    let template = RequestTemplate::new(&plan.workload[0], revision);
    let spec = CallSpec::new("tools/call", Some("echo"), revision);
    let mut rng = SmallRng::seed_from_u64(1);
    Box::new(move || {
        let write = |out: &mut Vec<u8>, id| {
            template.write(&plan.workload[0], out, id, &mut rng);
        };
        let reply = if plain {
            let now = Instant::now();
            assert!(session.can_begin(now), "the session takes plain calls");
            let mut begun = session.begin_call(&spec, write);
            let answer = rt.block_on(std::future::poll_fn(|cx| session.poll_call(cx, &mut begun)));
            answer.expect("a plain answer")
        } else {
            rt.block_on(session.call(&spec, write))
        };
        assert_eq!(reply.outcome, Outcome::Ok, "echo answers");
    })
}

/// What callgrind counts (`--toggle-collect`): `iters` operations of a case.
#[inline(never)]
fn icount_measured(work: &mut dyn FnMut(), iters: u64) {
    for _ in 0..iters {
        work();
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let all = cases();
    if let Some(name) = value("--case") {
        let Some(case) = all.iter().find(|c| c.name == name) else {
            eprintln!("icount: no case {name:?}; --list shows them");
            return ExitCode::from(2);
        };
        let iters = value("--iters").and_then(|n| n.parse().ok()).unwrap_or(1);
        let mut work = (case.make)();
        icount_measured(&mut *work, iters);
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|a| a == "--list") {
        for c in &all {
            println!("{}", c.name);
        }
        return ExitCode::SUCCESS;
    }
    // Anything else cargo or criterion-style flags pass (`--bench`, `--quick`…) is ignored.
    match gate(&all, args.iter().any(|a| a == "--save-baseline")) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("icount: {e}");
            ExitCode::from(2)
        }
    }
}

/// Measures every case under callgrind; compares with (or rewrites) the baseline. `Ok(false)`
/// on a regression.
fn gate(cases: &[Case], save: bool) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let version = Command::new("valgrind")
        .arg("--version")
        .output()
        .map_err(|e| format!("valgrind is needed (apt install valgrind): {e}"))?;
    let valgrind = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let baseline_path = root.join(BASELINE);
    let baseline: serde_json::Value = if save {
        serde_json::Value::Null
    } else {
        let text = std::fs::read_to_string(&baseline_path).map_err(|e| {
            format!(
                "{}: {e} (create it with `cargo bench --bench icount -- --save-baseline`)",
                baseline_path.display()
            )
        })?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", baseline_path.display()))?
    };
    let dir = std::env::temp_dir().join(format!("mcpbench-icount-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut measured = serde_json::Map::new();
    let mut ok = true;
    println!("| case | baseline | now | change | verdict |");
    println!("|---|---:|---:|---:|---|");
    for case in cases {
        let a = count(&exe, &dir, &case.name, case.iters.0)?;
        let b = count(&exe, &dir, &case.name, case.iters.1)?;
        let per_op = (b as f64 - a as f64) / (case.iters.1 - case.iters.0) as f64;
        measured.insert(case.name.clone(), serde_json::json!(per_op.round() as u64));
        let base = baseline
            .pointer("/instructions_per_operation")
            .and_then(|m| m.get(&case.name))
            .and_then(serde_json::Value::as_f64);
        let (change, verdict) = match base {
            _ if save => (String::new(), "saved"),
            None => {
                ok = false;
                (
                    String::new(),
                    "not in the baseline: run with --save-baseline",
                )
            }
            Some(base) => {
                let pct = (per_op - base) / base.max(1.0) * 100.0;
                let over = per_op - base > TOLERANCE_ABS && pct > TOLERANCE_PCT;
                let under = base - per_op > TOLERANCE_ABS && -pct > TOLERANCE_PCT;
                ok &= !over;
                (
                    format!("{pct:+.2}%"),
                    if over {
                        "REGRESSED"
                    } else if under {
                        "improved (update the baseline)"
                    } else {
                        "unchanged"
                    },
                )
            }
        };
        let base = base.map_or("-".to_string(), |b| format!("{b:.0}"));
        println!(
            "| {} | {base} | {per_op:.0} | {change} | {verdict} |",
            case.name
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!();
    println!(
        "instructions per operation (callgrind, marginal over two iteration counts); tolerance +{TOLERANCE_PCT}% and {TOLERANCE_ABS} instructions; {valgrind}"
    );
    if save {
        let doc = serde_json::json!({
            "about": "Instructions per operation of the hot path, counted by callgrind: the CI gate's baseline. Rewrite with `cargo bench --bench icount -- --save-baseline` after an intended change, and say why in the commit.",
            "command": "cargo bench --bench icount -- --save-baseline",
            "machine": machine(),
            "valgrind": valgrind,
            "rustc": rustc(),
            "date": date(),
            "tolerance_percent": TOLERANCE_PCT,
            "instructions_per_operation": measured,
        });
        let text = serde_json::to_string_pretty(&doc).expect("json") + "\n";
        std::fs::write(&baseline_path, text)
            .map_err(|e| format!("{}: {e}", baseline_path.display()))?;
        println!("baseline written to {}", baseline_path.display());
    } else if !ok {
        println!(
            "instruction-count gate: FAILED (a case grew more than {TOLERANCE_PCT}% over {BASELINE}, or is not in it)"
        );
    } else {
        println!("instruction-count gate: passed");
    }
    Ok(ok)
}

/// Instructions callgrind counts inside [`icount_measured`] for `iters` operations of a case.
fn count(exe: &Path, dir: &Path, case: &str, iters: u64) -> Result<u64, String> {
    let out: PathBuf = dir.join("callgrind.out");
    let status = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=*icount_measured*",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(["--case", case, "--iters", &iters.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("valgrind: {e}"))?;
    if !status.success() {
        return Err(format!(
            "case {case} failed under valgrind ({status}); run `{} --case {case} --iters {iters}` to see why",
            exe.display()
        ));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("{}: no totals line", out.display()))
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores, {cpu}")
}

fn rustc() -> String {
    Command::new("rustc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn date() -> String {
    Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}
