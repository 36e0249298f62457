//! Unit tests of the doctor: parsers on fixtures, findings on chosen inputs, the table.

use std::time::Duration;

use super::findings::*;
use super::procfs::*;
use super::*;
use crate::driver::limits;

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

#[test]
fn port_ranges_parse_from_the_sysctl_text() {
    assert_eq!(
        limits::parse_port_range("32768\t60999\n"),
        Some((32768, 60999))
    );
    assert_eq!(limits::parse_port_range("1024 65535"), Some((1024, 65535)));
    assert_eq!(limits::parse_port_range("60999 32768"), None);
    assert_eq!(limits::parse_port_range("32768"), None);
    assert_eq!(limits::parse_port_range("a b"), None);
}

const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:A819 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 128531 1 000000000ceb59f6 100 0 0 10 0
   1: 0100007F:1F90 0100007F:C350 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   2: 0100007F:1F90 0100007F:C352 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   3: 0100007F:C354 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 20 4 30 10 -1
";

#[test]
fn time_wait_sockets_are_counted_by_state_06() {
    assert_eq!(count_time_wait(TCP), 2);
    // The header alone (an empty tcp6), and a header whose `st` column is not a socket.
    assert_eq!(count_time_wait(TCP.lines().next().unwrap()), 0);
    let tcp6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:D2F0 06 00000000:00000000 03:000016A8 00000000     0        0 0 3 0000000000000000
";
    assert_eq!(count_time_wait(tcp6), 1);
}

const STAT_1: &str = "cpu  243553 0 68012 211775 1031 0 24264 375 0 0
cpu0 100 0 50 800 50 0 0 0 0 0
cpu1 300 0 100 550 20 0 30 0 40 0
intr 12191384 0 0
ctxt 46228820
cpu_not_a_core 1 2 3 4
";
const STAT_2: &str = "cpu  243553 0 68012 211775 1031 0 24264 375 0 0
cpu0 110 0 56 884 50 0 0 0 0 0
cpu1 360 0 120 560 20 0 30 10 60 0
";

#[test]
fn proc_stat_gives_each_core_busy_idle_and_steal() {
    let cores = parse_proc_stat(STAT_1);
    assert_eq!(cores.len(), 2, "per-core lines only, not the total");
    // Busy: everything but idle and iowait; guest time (in user already) not added twice.
    assert_eq!(
        cores[0],
        CpuTimes {
            busy: 150,
            steal: 0,
            total: 1000
        }
    );
    assert_eq!(
        cores[1],
        CpuTimes {
            busy: 430,
            steal: 0,
            total: 1000
        }
    );
    assert!(parse_proc_stat("intr 1 2 3\n").is_empty());
}

#[test]
fn other_load_is_the_busy_share_not_ours_and_warns_past_a_tenth() {
    let (b, a) = (parse_proc_stat(STAT_1), parse_proc_stat(STAT_2));
    // Deltas: cpu0 16 busy of 100, cpu1 90 busy (10 steal) of 100: 106 of 200 busy.
    let f = other_load_finding(&b, &a, 0);
    assert_eq!(f.verdict, Verdict::Warn, "{f:?}");
    assert!(f.value.starts_with("53 % of 2 cores"), "{}", f.value);
    assert!(f.value.contains("cpu0 16 %, cpu1 90 %"), "{}", f.value);
    assert!(f.detail.contains("5 % was steal"), "{}", f.detail);
    assert!(f.fix.is_some());
    // Our own 96 ticks taken out: 10 of 200 is 5 %, under the bar.
    let ours = other_load_finding(&b, &a, 96);
    assert_eq!(ours.verdict, Verdict::Ok, "{ours:?}");
    assert!(ours.value.starts_with("5 % of 2 cores"), "{}", ours.value);
    // Nothing to compare.
    assert_eq!(other_load_finding(&[], &[], 0).verdict, Verdict::Info);
}

#[test]
fn own_cpu_time_is_read_past_a_command_name_with_spaces_and_parens() {
    let stat = "4242 (mc (bench) x) S 1 4242 4242 0 -1 4194560 300 0 0 0 17 5 0 0 20 0 3 0 \
                100 1000000 200 18446744073709551615";
    assert_eq!(parse_own_ticks(stat), Some(22));
    assert_eq!(parse_own_ticks("4242 (x) S 1 2"), None);
}

#[test]
fn cgroup_paths_cpu_max_and_cfs_quota_parse() {
    let v2 = parse_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n");
    assert_eq!(
        v2.unified.as_deref(),
        Some("/user.slice/user-1000.slice/session-2.scope")
    );
    assert_eq!(v2.cpu_v1, None);
    let v1 = parse_cgroup(
        "9:name=systemd:/\n4:memory:/a/b\n3:cpu,cpuacct:/docker/abc\n1:cpuset:/\n0::/\n",
    );
    assert_eq!(v1.cpu_v1.as_deref(), Some("/docker/abc"));
    assert_eq!(v1.unified.as_deref(), Some("/"));
    // `cpuacct` or `cpuset` alone is not the `cpu` controller.
    assert_eq!(parse_cgroup("2:cpuacct:/x\n1:cpuset:/y\n").cpu_v1, None);

    assert_eq!(parse_cpu_max("max 100000\n"), Ok(None));
    assert_eq!(parse_cpu_max("200000 100000\n"), Ok(Some(2.0)));
    assert_eq!(parse_cpu_max("50000 100000"), Ok(Some(0.5)));
    assert_eq!(parse_cpu_max("max"), Ok(None));
    assert!(parse_cpu_max("").is_err());
    assert!(parse_cpu_max("lots 100000").is_err());
    assert!(parse_cpu_max("100000 0").is_err());

    assert_eq!(parse_cfs("-1\n", "100000\n"), Ok(None));
    assert_eq!(parse_cfs("150000\n", "100000\n"), Ok(Some(1.5)));
    assert!(parse_cfs("x", "100000").is_err());
}

#[test]
fn governors_other_than_performance_warn_and_none_exposed_is_info() {
    let all = |g: &[&str]| governor_finding(&g.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let ok = all(&["performance\n", "performance"]);
    assert_eq!(
        (ok.verdict, ok.value.as_str()),
        (Verdict::Ok, "performance (2 cores)")
    );
    let mixed = all(&["powersave", "performance", "powersave"]);
    assert_eq!(mixed.verdict, Verdict::Warn);
    assert_eq!(mixed.value, "powersave (2 cores), performance (1 core)");
    assert!(mixed.fix.as_deref().unwrap().contains("performance"));
    assert_eq!(all(&["schedutil"]).verdict, Verdict::Warn);
    let vm = all(&[]);
    assert_eq!(
        (vm.verdict, vm.value.as_str()),
        (Verdict::Info, "not exposed")
    );
}

#[test]
fn quotas_below_one_cpu_warn_and_partial_ones_say_how_many_workers_fit() {
    assert_eq!(quota_finding(None, 8, 8).verdict, Verdict::Ok);
    assert_eq!(quota_finding(None, 8, 2).verdict, Verdict::Info);
    let half = quota_finding(Some(0.5), 8, 1);
    assert_eq!(half.verdict, Verdict::Warn);
    assert!(half.value.starts_with("0.50 CPUs"), "{}", half.value);
    let some = quota_finding(Some(2.5), 8, 2);
    assert_eq!(some.verdict, Verdict::Info);
    assert!(some.fix.as_deref().unwrap().contains("--workers at 2"));
    assert_eq!(quota_finding(Some(8.0), 8, 8).verdict, Verdict::Ok);
}

#[test]
fn the_open_file_limit_counts_after_mcpbench_raises_it() {
    // Raised from 1024 to a hard limit that fits: worth knowing, not a warning.
    let raised = open_files_finding(1024, (524288, Some(524288)), 1072, 1000);
    assert_eq!(raised.verdict, Verdict::Info);
    assert!(
        raised
            .value
            .contains("soft 1024 (raised to 524288 at start)")
    );
    // The hard limit itself too low: a run this size is refused.
    let low = open_files_finding(64, (64, Some(64)), 1072, 1000);
    assert_eq!(low.verdict, Verdict::Warn);
    assert_eq!(
        low.value,
        "soft 64, hard 64; 1000 connections need about 1072"
    );
    assert!(low.detail.contains("1072 descriptors"), "{}", low.detail);
    assert!(low.fix.as_deref().unwrap().starts_with("ulimit -n 65536"));
    let big = open_files_finding(20000, (20000, None), 1072, 1000);
    assert_eq!(big.verdict, Verdict::Ok);
    assert!(
        big.value.starts_with("soft 20000, hard unlimited;"),
        "{}",
        big.value
    );
}

#[test]
fn ports_warn_when_the_load_or_time_wait_fills_the_range() {
    let range = Some((32768, 60999));
    let ok = ports_finding(range, Some(3), 1000);
    assert_eq!(ok.verdict, Verdict::Ok);
    assert_eq!(
        ok.value,
        "28232 ports (32768–60999), 3 sockets in TIME_WAIT"
    );
    let too_many = ports_finding(range, Some(0), 30000);
    assert_eq!(too_many.verdict, Verdict::Warn);
    assert!(
        too_many
            .fix
            .as_deref()
            .unwrap()
            .contains("ip_local_port_range")
    );
    let churned = ports_finding(range, Some(28000), 1000);
    assert_eq!(churned.verdict, Verdict::Warn);
    assert!(
        churned.detail.contains("about 232 ports"),
        "{}",
        churned.detail
    );
    assert_eq!(ports_finding(None, None, 1).verdict, Verdict::Info);
}

#[test]
fn time_wait_reuse_gives_the_churn_the_range_sustains() {
    let range = Some((32768, 60999));
    assert_eq!(tw_reuse_finding(Some(1), range).verdict, Verdict::Ok);
    let loopback = tw_reuse_finding(Some(2), range);
    assert_eq!(loopback.verdict, Verdict::Info);
    // Half of 28232 ports over 60 s.
    assert!(
        loopback
            .detail
            .starts_with("to a remote target, new connections faster than about 235/s"),
        "{}",
        loopback.detail
    );
    assert_eq!(
        loopback.fix.as_deref(),
        Some("sysctl -w net.ipv4.tcp_tw_reuse=1")
    );
    let off = tw_reuse_finding(Some(0), range);
    assert!(off.detail.starts_with("new connections"), "{}", off.detail);
}

#[test]
fn timer_overshoot_p99_past_200us_warns() {
    let mut fast: Vec<Duration> = (0..200).map(|i| us(i % 20)).collect();
    fast.sort();
    let f = timer_finding(Some(&fast), &fast);
    assert_eq!(f.verdict, Verdict::Ok, "{f:?}");
    assert_eq!(f.value, "timerfd overshoot p50 9 µs, p99 19 µs");
    assert!(f.detail.contains("200 sleeps of 50 µs"), "{}", f.detail);
    // Three in a hundred late by a millisecond: p50 fine, p99 not.
    let mut slow = fast.clone();
    for d in slow.iter_mut().take(6) {
        *d = us(1000);
    }
    slow.sort();
    let s = timer_finding(Some(&slow), &fast);
    assert_eq!(s.verdict, Verdict::Warn, "{s:?}");
    assert!(s.value.ends_with("p99 1000 µs"), "{}", s.value);
    assert!(s.fix.is_some());
    assert_eq!(timer_finding(None, &fast).verdict, Verdict::Info);
    assert_eq!(quantile(&[], 0.5), Duration::ZERO);
    assert_eq!(quantile(&[us(1), us(2), us(3), us(4)], 0.5), us(2));
}

#[test]
fn slow_clock_reads_warn_with_the_clocksource_to_switch_to() {
    assert_eq!(
        clock_finding(Some("tsc\n"), None, 20.0).verdict,
        Verdict::Ok
    );
    assert_eq!(
        clock_finding(Some("kvm-clock\n"), None, 40.0).verdict,
        Verdict::Info
    );
    let hpet = clock_finding(Some("hpet\n"), Some("tsc hpet acpi_pm\n"), 1500.0);
    assert_eq!(hpet.verdict, Verdict::Warn);
    assert_eq!(hpet.value, "hpet, Instant::now 1500 ns");
    assert!(hpet.fix.as_deref().unwrap().starts_with("echo tsc >"));
    let xen = clock_finding(Some("xen"), Some("xen"), 900.0);
    assert!(!xen.fix.as_deref().unwrap().starts_with("echo tsc"));
}

#[test]
fn small_files_parse_loadavg_thp_meminfo() {
    assert_eq!(
        parse_loadavg("2.28 2.03 1.82 3/105 23633\n"),
        Some([2.28, 2.03, 1.82])
    );
    assert_eq!(parse_loadavg("2.28"), None);
    assert_eq!(selected("always [madvise] never\n"), Some("madvise"));
    assert_eq!(selected("always madvise never"), None);
    let meminfo =
        "MemTotal:  8000000 kB\nSwapCached: 0 kB\nSwapTotal: 2097152 kB\nSwapFree: 1048576 kB\n";
    assert_eq!(meminfo_kb(meminfo, "SwapTotal"), Some(2_097_152));
    assert_eq!(meminfo_kb(meminfo, "SwapFree"), Some(1_048_576));
    assert_eq!(meminfo_kb(meminfo, "Swap"), None);
    let swap = swap_finding(Some(2_097_152), Some(1_048_576));
    assert_eq!(
        (swap.verdict, swap.value.as_str()),
        (Verdict::Info, "1024 MiB of 2048 MiB in use")
    );
    assert_eq!(swap_finding(Some(0), Some(0)).value, "none");
    assert_eq!(thp_finding(Some("always")).verdict, Verdict::Info);
    assert_eq!(thp_finding(Some("madvise")).verdict, Verdict::Ok);
    assert_eq!(somaxconn_finding(Some(128), 1000).verdict, Verdict::Info);
    assert_eq!(somaxconn_finding(Some(4096), 1000).verdict, Verdict::Ok);
    assert_eq!(
        loadavg_finding(Some([0.0, 0.1, 0.1]), 2).verdict,
        Verdict::Ok
    );
    assert_eq!(
        loadavg_finding(Some([2.28, 2.0, 1.8]), 2).verdict,
        Verdict::Info
    );
}

#[test]
fn the_table_shows_why_and_the_fix_under_each_finding_not_ok() {
    let r = Report {
        schema_version: 1,
        concurrency: 1000,
        quick: false,
        findings: vec![
            open_files_finding(64, (64, Some(64)), 1072, 1000),
            ports_finding(Some((32768, 60999)), Some(0), 1000),
        ],
    };
    let text = render_text(&r);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("check")
            && lines[0].contains("verdict")
            && lines[0].ends_with("value")
    );
    assert!(
        lines[1].starts_with("open-files") && lines[1].contains(" warn "),
        "{text}"
    );
    assert!(text.contains("fix: ulimit -n 65536"), "{text}");
    let ports = lines
        .iter()
        .position(|l| l.starts_with("ephemeral-ports"))
        .unwrap();
    assert!(lines[ports].contains(" ok "), "{text}");
    // An ok finding has no detail lines under it.
    assert_eq!(lines[ports + 1], "");
    assert!(
        text.ends_with("1 warning: measurements on this machine may be unreliable\n"),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l.chars().count() <= 110 || l.contains("fix:")),
        "{text}"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["findings"][0]["verdict"], "warn");
    assert_eq!(json["findings"][1]["fix"], serde_json::Value::Null);
    assert_eq!(json["schema_version"], 1);
}

#[test]
fn wrapping_keeps_words_whole() {
    assert_eq!(wrap("aa bb cc dd", 5), ["aa bb", "cc dd"]);
    assert_eq!(wrap("", 5), Vec::<String>::new());
    assert_eq!(wrap("toolongword x", 5), ["toolongword", "x"]);
}
