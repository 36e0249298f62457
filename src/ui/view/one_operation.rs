//! The operation view: one operation's throughput and latency over time and its detail.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

use crate::report::live::Live;
use crate::ui::format::{count, latency_ms};

use super::charts::{latency_chart, throughput_chart};
use super::{Theme, ViewState, placeholder};

/// One operation in detail: its throughput and latency over time, outcomes, streams.
pub(super) fn operation(
    frame: &mut Frame,
    area: Rect,
    live: &Live,
    state: &ViewState,
    theme: &Theme,
) {
    let selected = state.operation(live);
    let Some(o) = live.ops.get(selected) else {
        let block = Block::bordered().title(" operation ");
        return placeholder(frame, area, live, block, theme);
    };
    let [charts, detail] =
        Layout::vertical([Constraint::Min(6), Constraint::Length(7)]).areas(area);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(charts);
    throughput_chart(frame, left, live, Some(selected), theme);
    latency_chart(frame, right, live, Some(selected), theme);
    let mut lines = vec![Line::from(vec![
        Span::styled(format!(" {} ", o.name), theme.bold()),
        Span::styled(
            format!("({}/{} · ↑↓ to choose)", selected + 1, live.ops.len()),
            theme.dim(),
        ),
    ])];
    lines.push(Line::from(format!(
        " started {} = completed {} + failed {} + cancelled {}",
        count(o.started),
        count(o.completed),
        count(o.failed),
        count(o.cancelled)
    )));
    lines.push(Line::from(format!(
        " outcomes: {}",
        crate::report::text::outcomes_line(&o.outcomes)
    )));
    if let Some(l) = &o.latency {
        lines.push(Line::from(format!(
            " ok latency: min {} · mean {} · p50 {} · p95 {} · p99 {} · p99.9 {} · max {}",
            latency_ms(l.min_ms),
            latency_ms(l.mean_ms),
            latency_ms(l.p50_ms),
            latency_ms(l.p95_ms),
            latency_ms(l.p99_ms),
            latency_ms(l.p999_ms),
            latency_ms(l.max_ms)
        )));
    }
    if o.streamed > 0 {
        let first = o.first_event.as_ref().map_or("-".into(), |f| {
            format!("p50 {} p99 {}", latency_ms(f.p50_ms), latency_ms(f.p99_ms))
        });
        lines.push(Line::from(format!(
            " streamed {} · {:.1} events per call · first event {first}",
            count(o.streamed),
            o.events as f64 / o.streamed as f64
        )));
    }
    if let Some(s) = &o.service {
        lines.push(Line::from(format!(
            " service time (from the actual send): p50 {} · p99 {}",
            latency_ms(s.p50_ms),
            latency_ms(s.p99_ms)
        )));
    }
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" detail ")),
        detail,
    );
}
