//! What an agent may do, checked before anything is sent: the targets it may reach (the
//! allow-list: loopback, plus what `--allow` adds; stdio commands only with `--allow-stdio`)
//! and how much load a run may make (the bounds). A refusal names the bound and the flag of
//! `mcpbench mcp` that raises it: the agent cannot change them, the person who configured the
//! server can.
//!
//! Host names are resolved and every address must be allowed, so a name cannot smuggle a
//! non-loopback address in; a name written in `--allow` is trusted as named.

use std::fmt;
use std::net::{IpAddr, ToSocketAddrs};
use std::str::FromStr;
use std::time::Duration;

use mcpbench_knobs::format_duration;

use crate::scenario::plan::{Model, REQUESTS_ONLY_LIMIT, Url};
use crate::scenario::{Plan, Target};

/// One `--allow` entry: a host name, an address or a network, on any port or one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allow {
    host: AllowHost,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum AllowHost {
    /// Lower case, no trailing dot.
    Name(String),
    /// An address and its prefix length (a single address: 32 or 128).
    Net(IpAddr, u8),
}

const ALLOW_FORMS: &str = "HOST, HOST:PORT, IP, IP/PREFIX, [IPv6]:PORT";

impl FromStr for Allow {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let bad = |why: &str| format!("`{s}`: {why} (expected {ALLOW_FORMS})");
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (h, after) = rest.split_once(']').ok_or_else(|| bad("no closing `]`"))?;
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| bad("only `:PORT` may follow `]`"))?,
                ),
            };
            (h, port)
        } else {
            match s.split_once(':') {
                // One colon: HOST:PORT. More: a bare IPv6 address (or network).
                Some((h, p)) if !p.contains(':') => (h, Some(p)),
                _ => (s, None),
            }
        };
        let port = port
            .map(|p| {
                p.parse::<u16>()
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or_else(|| bad("the port must be from 1 to 65535"))
            })
            .transpose()?;
        let host = if let Some((ip, prefix)) = host.split_once('/') {
            let ip: IpAddr = ip
                .parse()
                .map_err(|_| bad("a network is an IP address, `/` and a prefix length"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let prefix = prefix
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| bad(&format!("the prefix length must be from 0 to {max}")))?;
            AllowHost::Net(ip.to_canonical(), prefix)
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            let ip = ip.to_canonical();
            AllowHost::Net(ip, if ip.is_ipv4() { 32 } else { 128 })
        } else {
            let name = host.trim_end_matches('.').to_ascii_lowercase();
            let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
            if name.is_empty() || !name.chars().all(valid) {
                return Err(bad("not a host name or an IP address"));
            }
            AllowHost::Name(name)
        };
        Ok(Allow { host, port })
    }
}

impl fmt::Display for Allow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = match &self.host {
            AllowHost::Name(n) => n.clone(),
            AllowHost::Net(ip, p) if *p == full(*ip) => ip.to_string(),
            AllowHost::Net(ip, p) => format!("{ip}/{p}"),
        };
        match (self.port, &self.host) {
            (None, _) => f.write_str(&host),
            (Some(port), AllowHost::Net(IpAddr::V6(_), _)) => write!(f, "[{host}]:{port}"),
            (Some(port), _) => write!(f, "{host}:{port}"),
        }
    }
}

fn full(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

/// Whether `ip` is in the network `net/prefix` (both canonical: IPv4-mapped IPv6 as IPv4).
fn within(net: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// 127.0.0.0/8 and ::1 (also IPv4-mapped).
fn loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// Resolves a host name to its addresses (the system's resolver; tests give their own).
pub type Resolver<'a> = &'a dyn Fn(&str, u16) -> std::io::Result<Vec<IpAddr>>;

/// The system's resolver.
pub fn system_resolver(host: &str, port: u16) -> std::io::Result<Vec<IpAddr>> {
    Ok((host, port).to_socket_addrs()?.map(|a| a.ip()).collect())
}

/// The targets an agent may reach.
#[derive(Debug, Clone, Default)]
pub struct AllowList {
    /// `--allow` entries, besides loopback.
    pub extra: Vec<Allow>,
    /// `--allow-stdio`: stdio targets (a command this machine runs).
    pub stdio: bool,
}

impl AllowList {
    /// What the list holds, for refusals.
    pub fn describe(&self) -> String {
        let mut s = "loopback: 127.0.0.0/8, ::1, localhost".to_string();
        if !self.extra.is_empty() {
            let extra: Vec<String> = self.extra.iter().map(ToString::to_string).collect();
            s.push_str(&format!("; --allow: {}", extra.join(", ")));
        }
        s
    }

    fn ip_allowed(&self, ip: IpAddr, port: u16) -> bool {
        let ip = ip.to_canonical();
        loopback(ip)
            || self.extra.iter().any(|a| {
                a.port.is_none_or(|p| p == port)
                    && matches!(a.host, AllowHost::Net(net, prefix) if within(net, prefix, ip))
            })
    }

    /// Checks `host` (as a URL writes it: a name, an IPv4 address or a bracketed IPv6 one) on
    /// `port`; `what` names it in the refusal ("target", "OAuth token endpoint").
    pub fn check(
        &self,
        what: &str,
        host: &str,
        port: u16,
        resolve: Resolver<'_>,
    ) -> Result<(), String> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let shown = if bare.contains(':') {
            format!("[{bare}]:{port}")
        } else {
            format!("{bare}:{port}")
        };
        let refuse = |why: String| {
            Err(format!(
                "refused: the {what} {shown} {why}; nothing was sent to it. Allowed targets \
                 ({}) are set by whoever configured this MCP server: `mcpbench mcp --allow \
                 {shown}` allows it",
                self.describe()
            ))
        };
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return if self.ip_allowed(ip, port) {
                Ok(())
            } else {
                refuse("is not on the allow-list".into())
            };
        }
        let name = bare.trim_end_matches('.').to_ascii_lowercase();
        let named = self.extra.iter().any(|a| {
            a.port.is_none_or(|p| p == port) && matches!(&a.host, AllowHost::Name(n) if *n == name)
        });
        if named {
            return Ok(());
        }
        let addrs = match resolve(&name, port) {
            Ok(a) if !a.is_empty() => a,
            Ok(_) => return refuse("has no address".into()),
            Err(e) => return refuse(format!("cannot be resolved ({e})")),
        };
        match addrs.iter().find(|ip| !self.ip_allowed(**ip, port)) {
            None => Ok(()),
            Some(ip) => refuse(format!("resolves to {ip}, which is not on the allow-list")),
        }
    }

    fn check_url(&self, what: &str, u: &Url, resolve: Resolver<'_>) -> Result<(), String> {
        self.check(what, &u.host, u.port, resolve)
    }
}

/// How much load a run may make.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// `--max-duration`: the run's length, warm-up included (and the request timeout).
    pub max_duration: Duration,
    /// `--max-rate`: an open loop's arrival rate; and `max_rate × duration` bounds how many
    /// requests any run sends.
    pub max_rate: f64,
    /// `--max-concurrency`: virtual users, or an open loop's requests in flight.
    pub max_concurrency: u32,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_duration: Duration::from_secs(60),
            max_rate: 5000.0,
            max_concurrency: 256,
        }
    }
}

/// A bound broken: what, the limit, and the flag that raises it.
fn over(what: String, limit: String, flag: &str) -> String {
    format!(
        "refused: {what} is over this server's bound of {limit}; nothing was sent. The bound is \
         set by whoever configured this MCP server: a higher `mcpbench mcp {flag}` raises it"
    )
}

impl Bounds {
    /// The most requests a run of `duration` may send.
    pub fn requests(&self, duration: Duration) -> u64 {
        (self.max_rate * duration.as_secs_f64()).ceil().max(1.0) as u64
    }

    /// Checks a plan's load; a closed loop without a request count gets one (`max_rate ×
    /// duration`), said in the returned note.
    fn check(&self, plan: &mut Plan) -> Result<Option<String>, String> {
        let load = &mut plan.load;
        if load.duration > self.max_duration {
            let what = if load.duration == REQUESTS_ONLY_LIMIT {
                "a run stopped by a request count alone (24h at most): give a duration too".into()
            } else {
                format!("duration {}", format_duration(load.duration))
            };
            return Err(over(
                what,
                format_duration(self.max_duration),
                "--max-duration",
            ));
        }
        if load.timeout > self.max_duration {
            return Err(over(
                format!("the request timeout {}", format_duration(load.timeout)),
                format_duration(self.max_duration),
                "--max-duration",
            ));
        }
        if load.concurrency > self.max_concurrency as usize {
            let what = match load.model {
                Model::Open { .. } => "requests in flight (max_in_flight)",
                Model::Closed { .. } => "concurrency (virtual users)",
            };
            return Err(over(
                format!("{what} {}", load.concurrency),
                self.max_concurrency.to_string(),
                "--max-concurrency",
            ));
        }
        if let Model::Open { rate, .. } = &load.model
            && rate.max() > self.max_rate
        {
            return Err(over(
                format!("the rate {}/s", rate.max()),
                format!("{}/s", self.max_rate),
                "--max-rate",
            ));
        }
        let cap = self.requests(load.duration);
        match load.requests {
            Some(n) if n > cap => Err(over(
                format!("a request count of {n}"),
                format!(
                    "{cap} (--max-rate {}/s × the duration {})",
                    self.max_rate,
                    format_duration(load.duration)
                ),
                "--max-rate",
            )),
            Some(_) => Ok(None),
            None if matches!(load.model, Model::Closed { .. }) => {
                load.requests = Some(cap);
                Ok(Some(format!(
                    "a closed loop sends at most {cap} requests here (--max-rate {}/s × the \
                     duration): the run ends early if it gets there first",
                    self.max_rate
                )))
            }
            // An open loop's rate bounds its count.
            None => Ok(None),
        }
    }
}

/// Checks a plan before it runs: one run (no A/B, no find-max search), every target on the
/// allow-list, the load within the bounds. Returns what the agent should know (a request cap
/// set), or the refusal.
pub fn check_plan(
    plan: &mut Plan,
    allow: &AllowList,
    bounds: &Bounds,
    resolve: Resolver<'_>,
) -> Result<Vec<String>, String> {
    if plan.ab.is_some() {
        return Err(
            "refused: an A/B comparison ([[targets]]) is many runs; run it with `mcpbench run` \
             from a shell, or run each target here and compare the two runs"
                .into(),
        );
    }
    if plan.find_max.is_some() {
        return Err(
            "refused: a find-max search ([find_max]) is many runs; run it with `mcpbench run` \
             from a shell, or run a few levels here and compare them"
                .into(),
        );
    }
    if let Target::Remote(r) = &plan.target {
        if r.command.is_some() && !allow.stdio {
            return Err(
                "refused: a stdio target starts a program on this machine, which this server \
                 does not allow; nothing was run. Whoever configured this MCP server can allow \
                 it with `mcpbench mcp --allow-stdio`"
                    .into(),
            );
        }
        for u in r.url.iter().chain(&r.replicas) {
            allow.check_url("target", u, resolve)?;
        }
        if let Some(o) = &r.oauth {
            allow.check_url("OAuth token endpoint", &o.token_url, resolve)?;
        }
    }
    Ok(bounds.check(plan)?.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn allow(list: &[&str]) -> AllowList {
        AllowList {
            extra: list.iter().map(|s| s.parse().unwrap()).collect(),
            stdio: false,
        }
    }

    /// A resolver that must not be asked (literal addresses, names on the list).
    fn no_dns(host: &str, _: u16) -> std::io::Result<Vec<IpAddr>> {
        panic!("resolved {host}")
    }

    fn dns(host: &str, _: u16) -> std::io::Result<Vec<IpAddr>> {
        let v4 = |a, b, c, d| IpAddr::V4(Ipv4Addr::new(a, b, c, d));
        match host {
            "localhost" => Ok(vec![v4(127, 0, 0, 1), IpAddr::V6(Ipv6Addr::LOCALHOST)]),
            "both.test" => Ok(vec![v4(127, 0, 0, 1), v4(192, 0, 2, 1)]),
            "lab.test" => Ok(vec![v4(10, 1, 2, 3)]),
            "empty.test" => Ok(vec![]),
            _ => Err(std::io::Error::other("no such host")),
        }
    }

    #[test]
    fn entries_parse_and_print() {
        for (text, shown) in [
            ("gw.Example.", "gw.example"),
            ("gw.example:8080", "gw.example:8080"),
            ("10.0.0.5", "10.0.0.5"),
            ("10.0.0.0/24:443", "10.0.0.0/24:443"),
            ("::1", "::1"),
            ("[fd00::1]:9000", "[fd00::1]:9000"),
            ("fd00::/8", "fd00::/8"),
            ("[::ffff:10.0.0.1]", "10.0.0.1"),
        ] {
            let a: Allow = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(a.to_string(), shown, "{text}");
        }
        for bad in [
            "",
            "gw:0",
            "gw:99999",
            "10.0.0.0/33",
            "[::1",
            "[::1]x",
            "a b",
            "x/8",
        ] {
            let e = bad.parse::<Allow>().unwrap_err();
            assert!(e.contains("expected HOST"), "{bad}: {e}");
        }
    }

    #[test]
    fn loopback_is_allowed_and_nothing_else_by_default() {
        let a = allow(&[]);
        for host in ["127.0.0.1", "127.5.6.7", "[::1]", "::ffff:127.0.0.1"] {
            assert!(a.check("target", host, 80, &no_dns).is_ok(), "{host}");
        }
        assert!(a.check("target", "localhost", 8080, &dns).is_ok());
        for host in ["192.0.2.1", "[2001:db8::1]", "0.0.0.0", "10.0.0.1"] {
            let e = a.check("target", host, 80, &no_dns).unwrap_err();
            assert!(
                e.contains("not on the allow-list")
                    && e.contains("loopback: 127.0.0.0/8, ::1, localhost")
                    && e.contains("--allow"),
                "{e}"
            );
        }
        let e = a.check("target", "192.0.2.1", 80, &no_dns).unwrap_err();
        assert!(e.contains("--allow 192.0.2.1:80"), "{e}");
    }

    #[test]
    fn every_address_of_a_name_must_be_allowed() {
        let a = allow(&[]);
        let e = a.check("target", "both.test", 80, &dns).unwrap_err();
        assert!(e.contains("resolves to 192.0.2.1"), "{e}");
        assert!(
            a.check("target", "nope.test", 80, &dns)
                .unwrap_err()
                .contains("cannot be resolved")
        );
        assert!(
            a.check("target", "empty.test", 80, &dns)
                .unwrap_err()
                .contains("no address")
        );
        assert!(a.check("target", "lab.test", 80, &dns).is_err());
        // A network on the list lets its addresses in, whatever name leads there.
        let a = allow(&["10.0.0.0/8"]);
        assert!(a.check("target", "lab.test", 80, &dns).is_ok());
    }

    #[test]
    fn entries_allow_their_hosts_and_ports() {
        let a = allow(&["gw.example:8080", "10.1.0.0/16", "[fd00::7]:443"]);
        assert!(a.check("target", "GW.example", 8080, &no_dns).is_ok());
        // Another port of a named host: resolved like any other name, and refused.
        assert!(a.check("target", "gw.example", 8081, &dns).is_err());
        assert!(a.check("target", "10.1.200.3", 1, &no_dns).is_ok());
        assert!(a.check("target", "10.2.0.1", 1, &no_dns).is_err());
        assert!(a.check("target", "[fd00::7]", 443, &no_dns).is_ok());
        assert!(a.check("target", "[fd00::7]", 80, &no_dns).is_err());
        assert!(
            a.describe()
                .ends_with("--allow: gw.example:8080, 10.1.0.0/16, [fd00::7]:443")
        );
    }

    fn plan(toml: &str) -> Plan {
        crate::scenario::parse("t.toml", toml, &|_| None).unwrap()
    }

    const WORK: &str = "[[workload]]\nmethod = \"tools/list\"\n";

    #[test]
    fn plans_are_held_to_the_bounds() {
        let b = Bounds::default();
        let a = allow(&[]);
        let check = |text: &str| check_plan(&mut plan(&format!("{text}\n{WORK}")), &a, &b, &no_dns);
        for (text, flag) in [
            ("[load]\nduration = \"2m\"", "--max-duration"),
            ("[load]\nrequests = 10", "--max-duration"),
            (
                "[load]\nduration = \"10s\"\ntimeout = \"90s\"",
                "--max-duration",
            ),
            (
                "[load]\nconcurrency = 257\nduration = \"1s\"",
                "--max-concurrency",
            ),
            (
                "[load]\nmodel = \"open\"\nrate = 5001\nmax_in_flight = 10\nduration = \"1s\"",
                "--max-rate",
            ),
            (
                "[load]\nmodel = \"open\"\nrate = 100\nmax_in_flight = 300\nduration = \"1s\"",
                "--max-concurrency",
            ),
            ("[load]\nduration = \"2s\"\nrequests = 10001", "--max-rate"),
        ] {
            let e = check(text).unwrap_err();
            assert!(
                e.starts_with("refused: ") && e.contains(flag),
                "{text}: {e}"
            );
        }
        let mut p = plan(&format!(
            "[load]\nduration = \"2s\"\nconcurrency = 2\n{WORK}"
        ));
        let notes = check_plan(&mut p, &a, &b, &no_dns).unwrap();
        assert_eq!(p.load.requests, Some(10_000));
        assert!(notes[0].contains("at most 10000 requests"), "{notes:?}");
        let mut p = plan(&format!(
            "[load]\nmodel = \"open\"\nrate = 5000\nduration = \"60s\"\nmax_in_flight = 256\n{WORK}"
        ));
        assert!(check_plan(&mut p, &a, &b, &no_dns).unwrap().is_empty());
        assert_eq!(p.load.requests, None, "an open loop's rate bounds it");
    }

    #[test]
    fn plans_reach_only_allowed_targets() {
        let b = Bounds::default();
        let check = |a: &AllowList, target: &str| {
            let text = format!("{target}\n[load]\nduration = \"1s\"\n{WORK}");
            check_plan(&mut plan(&text), a, &b, &no_dns)
        };
        let a = allow(&[]);
        assert!(check(&a, "").is_ok(), "the embedded servers");
        assert!(check(&a, "[target]\nurl = \"http://127.0.0.1:9/mcp\"").is_ok());
        let e = check(
            &a,
            "[target]\nurl = [\"http://127.0.0.1:9/mcp\", \"http://192.0.2.1/mcp\"]",
        )
        .unwrap_err();
        assert!(e.contains("192.0.2.1:80"), "every replica: {e}");
        let e = check(
            &a,
            "[target]\nurl = \"http://127.0.0.1:9/mcp\"\n[target.oauth]\ntoken_url = \"https://192.0.2.9/token\"\nclient_id = \"c\"\nclient_secret = \"s\"",
        )
        .unwrap_err();
        assert!(e.contains("OAuth token endpoint 192.0.2.9:443"), "{e}");
        let stdio = "[target]\ncommand = [\"python3\", \"server.py\"]";
        let e = check(&a, stdio).unwrap_err();
        assert!(e.contains("--allow-stdio"), "{e}");
        let with_stdio = AllowList {
            stdio: true,
            ..allow(&[])
        };
        assert!(check(&with_stdio, stdio).is_ok());
        let e = check(&a, "[find_max]\nmax = 100\np99 = \"50ms\"").unwrap_err();
        assert!(e.contains("find-max"), "{e}");
    }
}
