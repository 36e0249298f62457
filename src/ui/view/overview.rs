//! The overview: throughput and latency charts, the operations table, outcomes and the
//! generator's own health.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Wrap};

use crate::report::live::Live;
use crate::report::summary::Operation;
use crate::ui::format::{clock, count, latency_ms, latency_us, rate};

use super::charts::{latency_chart, throughput_chart};
use super::{SortKey, Theme, ViewState, num, placeholder};

/// The overview: charts of every operation, the operations table, outcomes and generator.
pub(super) fn overview(
    frame: &mut Frame,
    area: Rect,
    live: &Live,
    state: &ViewState,
    theme: &Theme,
) {
    let ops = rows(live, state);
    let table_h = (ops.len() as u16 + 3).clamp(4, 12);
    let mut bottom_h = if live.header.load.model == "open" {
        6
    } else {
        5
    };
    // A line for the target's processes, when they are watched.
    if live.history.iter().any(|s| s.target.is_some()) {
        bottom_h += 1;
    }
    if area.height >= 36 {
        // Room for the recent failures and what the server said.
        bottom_h += live.errors.len().min(6) as u16;
    }
    let [charts, table, bottom] = Layout::vertical([
        Constraint::Min(6),
        Constraint::Length(table_h),
        Constraint::Length(bottom_h),
    ])
    .areas(area);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(charts);
    throughput_chart(frame, left, live, None, theme);
    latency_chart(frame, right, live, None, theme);
    operations_table(frame, table, live, &ops, state, theme);
    let [out, gen_] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(bottom);
    outcomes_panel(frame, out, live, theme);
    generator_panel(frame, gen_, live, theme);
}

/// The operations with requests, sorted as asked; `(index, operation)`.
fn rows<'a>(live: &'a Live, state: &ViewState) -> Vec<(usize, &'a Operation)> {
    let mut ops: Vec<(usize, &Operation)> = live
        .ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.started > 0 || o.completed + o.failed + o.cancelled > 0)
        .collect();
    let p = |o: &Operation, f: fn(&crate::report::summary::Latency) -> f64| {
        o.latency.as_ref().map_or(0.0, f)
    };
    let key = |(i, o): &(usize, &Operation)| -> f64 {
        match state.sort {
            SortKey::Name => 0.0,
            SortKey::Requests => o.started as f64,
            SortKey::Rate => op_rate(live, *i, o),
            SortKey::P50 => p(o, |l| l.p50_ms),
            SortKey::P90 => p(o, |l| l.p90_ms),
            SortKey::P95 => p(o, |l| l.p95_ms),
            SortKey::P99 => p(o, |l| l.p99_ms),
            SortKey::P999 => p(o, |l| l.p999_ms),
            SortKey::Max => p(o, |l| l.max_ms),
            SortKey::Errors => o.outcomes.errors(None) as f64,
        }
    };
    if state.sort == SortKey::Name {
        ops.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        if state.reverse {
            ops.reverse();
        }
    } else {
        ops.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.1.name.cmp(&b.1.name)));
        if state.reverse {
            ops.reverse();
        }
    }
    ops
}

/// The operations table, sorted as the viewer chose, the sort column marked.
fn operations_table(
    frame: &mut Frame,
    area: Rect,
    live: &Live,
    ops: &[(usize, &Operation)],
    state: &ViewState,
    theme: &Theme,
) {
    let header = Row::new(SortKey::ALL.iter().zip(SortKey::HEADERS).map(|(k, h)| {
        let arrow = match (*k == state.sort, state.reverse ^ (*k == SortKey::Name)) {
            (false, _) => "",
            (true, true) => "▲",
            (true, false) => "▼",
        };
        let h = if *k == SortKey::Rate && !live.finished {
            "now/s"
        } else {
            h
        };
        let text = format!("{h}{arrow}");
        let cell = if *k == SortKey::Name {
            Cell::from(text)
        } else {
            num(text)
        };
        if *k == state.sort {
            cell.style(theme.bold())
        } else {
            cell
        }
    }))
    .style(theme.dim());
    let lat = |o: &Operation, f: fn(&crate::report::summary::Latency) -> f64| {
        num(o.latency.as_ref().map_or("-".into(), |l| latency_ms(f(l))))
    };
    // Narrow screens: `tools/call:` goes, the tool name stays.
    let room = area.width.saturating_sub(2 + 9 + 6 + 6 * 6 + 6 + 9) as usize;
    let short = ops.iter().any(|(_, o)| o.name.chars().count() > room);
    let name = |o: &Operation| {
        if short {
            o.name.trim_start_matches("tools/call:").to_string()
        } else {
            o.name.clone()
        }
    };
    let body: Vec<Row> = ops
        .iter()
        .map(|(i, o)| {
            // Calls that did not do their job, as the error rate counts them.
            let errors = o.outcomes.errors(None);
            let err = num(count(errors)).style(if errors > 0 {
                theme.bad()
            } else {
                Style::new()
            });
            Row::new(vec![
                Cell::from(name(o)),
                num(count(o.started)),
                num(rate(op_rate(live, *i, o))),
                lat(o, |l| l.p50_ms),
                lat(o, |l| l.p90_ms),
                lat(o, |l| l.p95_ms),
                lat(o, |l| l.p99_ms),
                lat(o, |l| l.p999_ms),
                lat(o, |l| l.max_ms),
                err,
            ])
        })
        .collect();
    let empty = body.is_empty();
    let widths = [
        Constraint::Fill(1),
        Constraint::Length(9),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
    ];
    let block = Block::bordered().title(" operations ");
    if empty {
        return placeholder(frame, area, live, block, theme);
    }
    frame.render_widget(
        Table::new(body, widths)
            .header(header)
            .column_spacing(1)
            .block(block),
        area,
    );
}

/// An operation's ok/s: the last measured interval's while the run goes, the run's own once
/// it is over.
fn op_rate(live: &Live, i: usize, o: &Operation) -> f64 {
    if live.finished {
        o.throughput
    } else {
        live.rate_now.get(i).copied().unwrap_or(0.0)
    }
}

/// Every outcome class that occurred, with the recent failures when there is room.
fn outcomes_panel(frame: &mut Frame, area: Rect, live: &Live, theme: &Theme) {
    let o = &live.outcomes;
    let mut first: Vec<Span> = vec![Span::raw(" ok "), Span::styled(count(o.ok), theme.ok())];
    // Non-breaking spaces inside an item: lines wrap between items, not inside one.
    let mut push = |name: String, n: u64, style: Style| {
        if n > 0 {
            first.push(Span::raw(format!(
                " · {}\u{a0}",
                name.replace(' ', "\u{a0}")
            )));
            first.push(Span::styled(count(n).replace(' ', "\u{a0}"), style));
        }
    };
    push("tool_error".into(), o.tool_error, theme.warn());
    push("input_required".into(), o.input_required, theme.warn());
    push("assertion".into(), o.assertion, theme.bad());
    push("divergence".into(), o.divergence, theme.bad());
    for (code, n) in &o.rpc_error {
        push(format!("rpc {code}"), *n, theme.bad());
    }
    for (status, n) in &o.http {
        push(format!("http {status}"), *n, theme.bad());
    }
    push("timeout".into(), o.timeout, theme.bad());
    push("hang".into(), o.hang, theme.bad());
    push("connect".into(), o.connect, theme.bad());
    push("io".into(), o.io, theme.bad());
    for (kind, n) in &o.protocol {
        push(format!("protocol {kind}"), *n, theme.bad());
    }
    push("cancelled".into(), o.cancelled, theme.warn());
    let mut lines = vec![Line::from(first)];
    for e in &live.errors {
        let mut line = vec![
            Span::styled(format!(" {} ", clock(e.last)), theme.dim()),
            Span::styled(e.outcome.clone(), theme.bad()),
            Span::raw(format!(" ×{} {}", count(e.count), e.op)),
        ];
        if let Some(m) = &e.message {
            line.push(Span::styled(format!(" \"{m}\""), theme.dim()));
        }
        lines.push(Line::from(line));
    }
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" outcomes ")),
        area,
    );
}

/// The generator's health: in flight, sessions, CPU per request, lateness, headroom.
fn generator_panel(frame: &mut Frame, area: Rect, live: &Live, theme: &Theme) {
    let last = live.last_active();
    let s = &live.sessions;
    let in_flight = last.map_or(0, |l| l.in_flight);
    let mut lines = vec![Line::from(format!(
        " in flight {} · sessions {}{} · conns {}",
        count(in_flight),
        count(s.opened),
        if s.expired > 0 {
            format!(" ({} expired)", count(s.expired))
        } else {
            String::new()
        },
        count(s.connections)
    ))];
    let cpu = live
        .cpu_us_per_request()
        .map_or("-".into(), |c| format!("{c:.1} µs/req"));
    let sat = live.saturation();
    lines.push(Line::from(format!(
        " CPU {cpu} · {} worker{} at {}",
        live.workers,
        if live.workers == 1 { "" } else { "s" },
        sat.map_or("-".into(), |x| format!("{:.0} %", x * 100.0))
    )));
    if let Some(t) = last.and_then(|l| l.target) {
        lines.push(Line::from(format!(
            " target CPU {} · {:.1} MB · {} fds · {} threads",
            live.target_cpu_us_per_request()
                .map_or("-".into(), |c| format!("{c:.1} µs/req")),
            t.rss_bytes as f64 / 1_048_576.0,
            t.fds,
            t.threads
        )));
    }
    let open = live.header.load.model == "open";
    let late_us = last.map_or(0, |l| l.late_p99_us);
    if open {
        lines.push(Line::from(vec![
            Span::raw(format!(
                " lateness p99 {} · dropped ",
                latency_us(late_us as f64)
            )),
            Span::styled(
                count(live.dropped),
                if live.dropped > 0 {
                    theme.bad()
                } else {
                    Style::new()
                },
            ),
        ]));
    }
    let busy = sat.is_some_and(|x| x > 0.9) || (open && late_us > 1000);
    lines.push(if busy {
        Line::from(Span::styled(
            " at its ceiling: other numbers are suspect",
            theme.bad(),
        ))
    } else if live.history.is_empty() {
        Line::from(Span::styled(" headroom: not measured yet", theme.dim()))
    } else {
        Line::from(Span::styled(" headroom: fine", theme.ok()))
    });
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" generator ")),
        area,
    );
}
