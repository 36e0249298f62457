//! Around the views: the header (run, target, load, progress), the footer (keys, or what the
//! run is doing) and the help popup.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use crate::report::live::Live;
use crate::ui::format::clock;

use super::{Theme, View, ViewState};

/// The header: scenario and views, then the target, and the load with a progress bar.
pub(super) fn header(frame: &mut Frame, area: Rect, live: &Live, state: &ViewState, theme: &Theme) {
    let h = &live.header;
    let t = &h.target;
    let title = Line::from(vec![
        Span::styled(" mcpbench ", theme.bold()),
        Span::raw("· "),
        Span::styled(h.scenario.clone(), theme.accent()),
        Span::raw(" "),
    ]);
    let tabs: Vec<Span> = View::ALL
        .iter()
        .enumerate()
        .flat_map(|(i, v)| {
            let label = format!(" {} {} ", i + 1, v.title());
            let style = if *v == state.view {
                theme.bold().add_modifier(Modifier::REVERSED)
            } else {
                theme.dim()
            };
            [Span::styled(label, style), Span::raw(" ")]
        })
        .collect();
    let block = Block::new()
        .borders(Borders::ALL)
        .title(title)
        .title_top(Line::from(tabs).right_aligned());
    // The clock runs to the scenario's duration and stops there: the drain after it (requests
    // in flight finishing) is not load time.
    let total = h.duration();
    let draining = live.elapsed() > total && !total.is_zero();
    let elapsed = if total.is_zero() {
        live.elapsed()
    } else {
        live.elapsed().min(total)
    };
    let (level, stage) = h.level_at(elapsed);
    let unit = if h.load.model == "open" {
        "req/s"
    } else {
        "users"
    };
    let stages = h.load.profile.stages.len();
    let mut load = format!("{} loop · {level:.0} {unit}", h.load.model);
    if stages > 1 {
        let to = h.load.profile.stages[stage.clamp(1, stages) - 1].target;
        load.push_str(&format!(", stage {}/{stages} → {to:.0}", stage.max(1)));
    }
    let http = if t.transport.contains("http") || t.transport == "sse" {
        format!(" HTTP/{}", t.http)
    } else {
        String::new()
    };
    let line1 = Line::from(vec![
        Span::raw(format!(" {}", t.url)),
        Span::styled(format!(" ({})", t.kind), theme.dim()),
        Span::raw(format!(" · {}{http} · ", t.transport)),
        Span::styled(t.protocol_negotiated.clone(), theme.bold()),
    ]);
    let frac = if total.is_zero() {
        1.0
    } else {
        (elapsed.as_secs_f64() / total.as_secs_f64()).clamp(0.0, 1.0)
    };
    let phase = if live.finished {
        Span::styled(" finished", theme.ok())
    } else if state.stopping {
        Span::styled(" stopping", theme.warn())
    } else if draining {
        Span::styled(" draining", theme.warn())
    } else if elapsed < h.warmup() {
        Span::styled(" warm-up", theme.warn())
    } else {
        Span::raw("")
    };
    let left = format!(
        " {load} · {} / {} ",
        clock(elapsed),
        clock(total.max(elapsed))
    );
    let inner = block.inner(area);
    frame.render_widget(block, area);
    frame.render_widget(Paragraph::new(line1), Rect { height: 1, ..inner });
    let row = Rect {
        y: inner.y + 1,
        height: 1,
        ..inner
    };
    let right = phase.width() as u16 + 6;
    let bar_width = row
        .width
        .saturating_sub(left.chars().count() as u16 + right)
        .min(40);
    let filled = (frac * bar_width as f64).round() as usize;
    let bar = format!(
        "{}{}",
        "█".repeat(filled),
        "░".repeat(bar_width as usize - filled.min(bar_width as usize))
    );
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::raw(left),
            Span::styled(bar, theme.accent()),
            Span::raw(format!(" {:>3.0} %", frac * 100.0)),
            phase,
        ])),
        row,
    );
}

/// The footer: the keys, or that the run is stopping or finished.
pub(super) fn footer(frame: &mut Frame, area: Rect, state: &ViewState, theme: &Theme) {
    let line = if state.waiting_for_key {
        Line::from(vec![
            Span::styled(" finished", theme.ok()),
            Span::raw(" · press any key to exit"),
        ])
    } else if state.stopping {
        Line::from(Span::styled(
            " stopping: requests in flight finish, then results are written…",
            theme.warn(),
        ))
    } else {
        Line::from(Span::styled(
            " q stop · Tab/1-3 view · s sort · r reverse · ↑↓ operation · ? help",
            theme.dim(),
        ))
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// The help popup: the keys and what now/s means.
pub(super) fn help(frame: &mut Frame, area: Rect, theme: &Theme) {
    let lines = vec![
        Line::from(Span::styled("keys", theme.bold())),
        Line::from(""),
        Line::from("q, Ctrl-C        stop the run (in-flight requests"),
        Line::from("                 finish; results are written)"),
        Line::from("Esc              close this help; else stop the run"),
        Line::from("Tab, Shift-Tab   next, previous view"),
        Line::from("1 2 3            overview, distribution, operation"),
        Line::from("s                sort the operations by the next column"),
        Line::from("r                reverse the sort"),
        Line::from("↑ ↓, j k         choose the operation"),
        Line::from("?                this help (? or Esc closes it)"),
        Line::from(""),
        Line::from("now/s: ok/s in the last interval; once the run is"),
        Line::from("over, ok/s over its measured window (as the summary)"),
    ];
    let w = 58.min(area.width);
    let h = (lines.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" help ")),
        popup,
    );
}
