//! Drawing the dashboard: pure functions from a [`Live`] view and the viewer's [`ViewState`]
//! to a frame, so every view is tested on ratatui's `TestBackend` at any size.

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Cell, Chart, Clear, Dataset, GraphType, LegendPosition, Paragraph, Row,
    Table, Wrap,
};

use super::format::{clock, count, latency_ms, latency_us, nines, percent, percentile, rate};
use crate::metrics::grid::Phase;
use crate::report::live::Live;
use crate::report::summary::{Errors, Operation};

/// The views, in Tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    #[default]
    Overview,
    Distribution,
    Operation,
}

impl View {
    pub const ALL: [View; 3] = [View::Overview, View::Distribution, View::Operation];

    fn title(self) -> &'static str {
        match self {
            View::Overview => "overview",
            View::Distribution => "latency distribution",
            View::Operation => "operation",
        }
    }
}

/// Columns the operations table sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    Name,
    #[default]
    Requests,
    Rate,
    P50,
    P90,
    P95,
    P99,
    P999,
    Max,
    Errors,
}

impl SortKey {
    pub const ALL: [SortKey; 10] = [
        SortKey::Name,
        SortKey::Requests,
        SortKey::Rate,
        SortKey::P50,
        SortKey::P90,
        SortKey::P95,
        SortKey::P99,
        SortKey::P999,
        SortKey::Max,
        SortKey::Errors,
    ];

    /// Column headers; the rate column says `now/s` while the run goes (the last interval's
    /// ok/s) and `ok/s` once it is over (the run's own, as the summary has it).
    const HEADERS: [&'static str; 10] = [
        "operation",
        "requests",
        "ok/s",
        "p50",
        "p90",
        "p95",
        "p99",
        "p99.9",
        "max",
        "errors",
    ];

    pub fn next(self) -> SortKey {
        let i = Self::ALL.iter().position(|k| *k == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }
}

/// What the viewer chose and what the run is doing.
#[derive(Debug, Clone, Default)]
pub struct ViewState {
    pub view: View,
    pub sort: SortKey,
    /// Sort ascending instead (names sort ascending by default).
    pub reverse: bool,
    /// The operation of the operation view (an index into the run's operations); `None` until
    /// the viewer chooses: the busiest operation of the workload ([`ViewState::operation`]).
    pub selected: Option<usize>,
    pub help: bool,
    /// A stop was asked for: requests in flight are finishing.
    pub stopping: bool,
    /// Colours off (`NO_COLOR`, or a terminal without them).
    pub no_color: bool,
    /// The run is over and the dashboard waits for a key.
    pub waiting_for_key: bool,
}

/// What a key asks of the dashboard beyond redrawing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAction {
    /// Stop the run (requests in flight finish; results are written).
    Stop,
    /// Nothing more.
    None,
}

impl ViewState {
    /// The operation the operation view shows: the one chosen, else the workload's busiest
    /// (most requests; the session opening only when nothing else ran).
    pub fn operation(&self, live: &Live) -> usize {
        if let Some(i) = self.selected.filter(|i| *i < live.ops.len()) {
            return i;
        }
        let busiest = live
            .ops
            .iter()
            .enumerate()
            .skip(1)
            .max_by_key(|(i, o)| (o.started, std::cmp::Reverse(*i)))
            .filter(|(_, o)| o.started > 0)
            .map(|(i, _)| i);
        busiest.unwrap_or(0)
    }

    /// Applies a key (the dashboard's keys, testable without a terminal). Esc closes the help
    /// when it is open and stops the run only when nothing is.
    pub fn on_key(&mut self, key: crossterm::event::KeyEvent, live: Option<&Live>) -> KeyAction {
        use crossterm::event::{KeyCode, KeyModifiers};
        let ops = live.map_or(0, |l| l.ops.len());
        let ctrl_c =
            key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            _ if ctrl_c => return KeyAction::Stop,
            KeyCode::Esc if self.help => self.help = false,
            KeyCode::Char('q') | KeyCode::Esc => return KeyAction::Stop,
            KeyCode::Tab => self.view = cycle(self.view, 1),
            KeyCode::BackTab => self.view = cycle(self.view, View::ALL.len() - 1),
            KeyCode::Char(c @ '1'..='3') => self.view = View::ALL[c as usize - '1' as usize],
            KeyCode::Char('s') => self.sort = self.sort.next(),
            KeyCode::Char('r') => self.reverse = !self.reverse,
            KeyCode::Char('?') | KeyCode::Char('h') => self.help = !self.help,
            KeyCode::Down | KeyCode::Char('j') if ops > 0 => {
                let i = live.map_or(0, |l| self.operation(l));
                self.selected = Some((i + 1) % ops);
            }
            KeyCode::Up | KeyCode::Char('k') if ops > 0 => {
                let i = live.map_or(0, |l| self.operation(l));
                self.selected = Some((i + ops - 1) % ops);
            }
            _ => {}
        }
        KeyAction::None
    }
}

fn cycle(v: View, by: usize) -> View {
    let i = View::ALL.iter().position(|x| *x == v).unwrap_or(0);
    View::ALL[(i + by) % View::ALL.len()]
}

/// The smallest terminal the dashboard draws in; below it, it says so.
pub const MIN_SIZE: (u16, u16) = (60, 16);

/// Styles from the terminal's own palette, so they read on dark and light backgrounds.
struct Theme {
    on: bool,
}

impl Theme {
    fn fg(&self, c: Color) -> Style {
        if self.on {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }
    fn ok(&self) -> Style {
        self.fg(Color::Green)
    }
    fn bad(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    fn warn(&self) -> Style {
        self.fg(Color::Yellow)
    }
    fn accent(&self) -> Style {
        self.fg(Color::Cyan)
    }
    fn dim(&self) -> Style {
        Style::new().add_modifier(Modifier::DIM)
    }
    fn bold(&self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }
    /// Series colours (percentiles, operations).
    fn series(&self, i: usize) -> Style {
        const C: [Color; 6] = [
            Color::Green,
            Color::Cyan,
            Color::Yellow,
            Color::Magenta,
            Color::Blue,
            Color::Red,
        ];
        self.fg(C[i % C.len()])
    }
}

/// Draws the whole screen. `live` is `None` until the target has passed the preflight.
pub fn draw(frame: &mut Frame, live: Option<&Live>, state: &ViewState) {
    let theme = Theme {
        on: !state.no_color,
    };
    let area = frame.area();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let p = Paragraph::new(vec![
            Line::from("mcpbench").style(theme.bold()),
            Line::from(format!(
                "the terminal is {}×{}: the dashboard needs {}×{}",
                area.width, area.height, MIN_SIZE.0, MIN_SIZE.1
            )),
            Line::from("enlarge it (the run goes on; q stops it)"),
        ])
        .wrap(Wrap { trim: true })
        .alignment(Alignment::Center);
        frame.render_widget(p, area);
        return;
    }
    let Some(live) = live else {
        let p = Paragraph::new(vec![
            Line::from("mcpbench").style(theme.bold()),
            Line::from("connecting to the target: opening a session, listing its tools…"),
        ])
        .alignment(Alignment::Center)
        .block(Block::bordered());
        frame.render_widget(p, area);
        return;
    };
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    header(frame, head, live, state, &theme);
    match state.view {
        View::Overview => overview(frame, body, live, state, &theme),
        View::Distribution => distribution(frame, body, live, &theme),
        View::Operation => operation(frame, body, live, state, &theme),
    }
    footer(frame, foot, state, &theme);
    if state.help {
        help(frame, area, &theme);
    }
}

fn header(frame: &mut Frame, area: Rect, live: &Live, state: &ViewState, theme: &Theme) {
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

fn footer(frame: &mut Frame, area: Rect, state: &ViewState, theme: &Theme) {
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

fn help(frame: &mut Frame, area: Rect, theme: &Theme) {
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

/// A panel with nothing to show yet says why.
fn placeholder(frame: &mut Frame, area: Rect, live: &Live, block: Block, theme: &Theme) {
    frame.render_widget(
        Paragraph::new(waiting(live))
            .style(theme.dim())
            .block(block),
        area,
    );
}

/// Waiting for data: what an empty panel says.
fn waiting(live: &Live) -> &'static str {
    if live.history.is_empty() {
        "waiting for the first interval of data…"
    } else if live.elapsed() <= live.header.warmup() {
        "warm-up: nothing measured yet"
    } else {
        "nothing measured here yet"
    }
}

fn overview(frame: &mut Frame, area: Rect, live: &Live, state: &ViewState, theme: &Theme) {
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

/// A right-aligned table cell, for numbers.
fn num<'a>(text: String) -> Cell<'a> {
    Cell::from(Line::from(text).right_aligned())
}

/// The measured intervals that fit `width` cells of braille (two points per cell).
fn window(
    live: &Live,
    width: u16,
) -> impl Iterator<Item = &crate::metrics::collector::IntervalSnapshot> {
    let keep = (width as usize * 2).max(2);
    let skip = live.history.len().saturating_sub(keep);
    live.history.iter().skip(skip).map(|s| s.as_ref())
}

/// Nice y-axis labels for a linear range from 0.
fn linear_axis(max: f64, fmt: fn(f64) -> String) -> (f64, Vec<String>) {
    let top = if max <= 0.0 { 1.0 } else { max * 1.1 };
    (top, vec![fmt(0.0), fmt(top / 2.0), fmt(top)])
}

/// Throughput over time (ok/s and errors/s) for every operation or one.
fn throughput_chart(frame: &mut Frame, area: Rect, live: &Live, op: Option<usize>, theme: &Theme) {
    let mut ok = Vec::new();
    let mut err = Vec::new();
    let mut warm = Vec::new();
    for s in window(live, area.width.saturating_sub(10)) {
        let secs = s.len().as_secs_f64().max(1e-3);
        let t = s.end.as_secs_f64();
        let (o, e) = match op {
            Some(i) => s.ops.get(i).map_or((0, 0), |x| (x.ok, x.errors)),
            None => (s.ok, s.errors),
        };
        match s.phase {
            Phase::Warmup if op.is_none() => warm.push((t, s.warmup_ended as f64 / secs)),
            Phase::Warmup | Phase::Drain => {}
            Phase::Measured => {
                ok.push((t, o as f64 / secs));
                err.push((t, e as f64 / secs));
            }
        }
    }
    // While running, the last measured interval; at the end, the run's own figure (the
    // summary's: measured ok over the measured window).
    let shown_ok = match (live.finished, op) {
        (true, Some(i)) => live.ops.get(i).map_or(0.0, |o| o.throughput),
        (true, None) => live.totals.throughput,
        (false, _) => ok.last().map_or(0.0, |p| p.1),
    };
    let errors = match op {
        Some(i) => live
            .ops
            .get(i)
            .map_or_else(Errors::default, |o| Errors::of(&[o], &[])),
        None => live.error_rates,
    };
    let mut title = vec![
        Span::raw(if live.finished { " mean " } else { " " }),
        Span::styled(format!("{} ok/s", rate(shown_ok)), theme.ok()),
        Span::raw(if live.finished { " · " } else { " now · " }),
    ];
    title.extend(error_spans(&errors, area.width > 70, theme));
    if !warm.is_empty() && area.width > 50 {
        title.push(Span::styled(" · warm-up", theme.dim()));
    }
    title.push(Span::raw(" "));
    if area.width > 60 {
        title.insert(0, Span::raw(" throughput ·"));
    }
    let title = Line::from(title);
    let block = Block::bordered().title(title);
    if ok.is_empty() && warm.is_empty() {
        return placeholder(frame, area, live, block, theme);
    }
    let max = ok
        .iter()
        .chain(&err)
        .chain(&warm)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let (x0, x1) = time_bounds(live, area.width);
    let (top, labels) = linear_axis(max, rate);
    let mut sets = vec![
        Dataset::default()
            .name("ok/s")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.ok())
            .data(&ok),
    ];
    if err.iter().any(|p| p.1 > 0.0) {
        sets.push(
            Dataset::default()
                .name("errors/s")
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(theme.bad())
                .data(&err),
        );
    }
    if !warm.is_empty() {
        sets.push(
            Dataset::default()
                .name("warm-up")
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(theme.dim())
                .data(&warm),
        );
    }
    let chart = Chart::new(sets)
        .block(block)
        .x_axis(time_axis(x0, x1, theme))
        .y_axis(
            Axis::default()
                .bounds([0.0, top])
                .labels(labels)
                .style(theme.dim()),
        )
        .legend_position(None);
    frame.render_widget(chart, area);
}

/// `errors 1.2 %` and, when `parts`, the kinds that occurred (`· tool 1.0 % · protocol 0.2 %`).
fn error_spans(e: &Errors, parts: bool, theme: &Theme) -> Vec<Span<'static>> {
    let style = if e.failed > 0 {
        theme.bad()
    } else {
        Style::new()
    };
    let mut out = vec![Span::styled(format!("errors {}", percent(e.rate)), style)];
    if parts {
        for (name, r) in e.parts() {
            out.push(Span::styled(
                format!(" · {name} {}", percent(r)),
                theme.dim(),
            ));
        }
    }
    out
}

/// The time axis every chart of a view shares: the intervals of the window (warm-up and the
/// measured window; the drain is not charted) that fit a chart `width` cells wide.
fn time_bounds(live: &Live, width: u16) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for s in window(live, width.saturating_sub(10)).filter(|s| s.phase != Phase::Drain) {
        lo = lo.min(s.end.as_secs_f64());
        hi = hi.max(s.end.as_secs_f64());
    }
    if lo > hi {
        (0.0, 1.0)
    } else if hi - lo < 1.0 {
        (lo - 1.0, hi)
    } else {
        (lo, hi)
    }
}

fn time_axis<'a>(x0: f64, x1: f64, theme: &Theme) -> Axis<'a> {
    let t = |s: f64| clock(std::time::Duration::from_secs_f64(s.max(0.0)));
    Axis::default()
        .bounds([x0, x1])
        .labels([t(x0), t(x1)])
        .style(theme.dim())
}

/// Log-scale y axis for latencies in µs: bounds in log10, whole decades, one label each (at
/// most five).
fn log_axis(lo_us: f64, hi_us: f64) -> ([f64; 2], Vec<String>) {
    let lo = lo_us.max(1.0).log10().floor();
    let hi = hi_us.max(lo_us).max(1.0).log10().ceil().max(lo + 1.0);
    let decades = (hi - lo) as usize;
    let n = decades.min(4);
    let labels = (0..=n)
        .map(|i| latency_us(10f64.powf(lo + (hi - lo) * i as f64 / n as f64)))
        .collect();
    ([lo, hi], labels)
}

const PERCENTILES: [&str; 5] = ["p50", "p90", "p95", "p99", "p99.9"];

/// Latency over time (p50, p90, p95, p99, p99.9 of ok responses per interval), log scale.
fn latency_chart(frame: &mut Frame, area: Rect, live: &Live, op: Option<usize>, theme: &Theme) {
    let mut series: [Vec<(f64, f64)>; 5] = Default::default();
    for s in window(live, area.width.saturating_sub(10)) {
        if s.phase != Phase::Measured {
            continue;
        }
        let v = match op {
            Some(i) => match s.ops.get(i) {
                Some(o) if o.ok > 0 => [o.p50_us, o.p90_us, o.p95_us, o.p99_us, o.p999_us],
                _ => continue,
            },
            None if s.ok > 0 => [s.p50_us, s.p90_us, s.p95_us, s.p99_us, s.p999_us],
            None => continue,
        };
        let t = s.end.as_secs_f64();
        for (k, us) in v.iter().enumerate() {
            series[k].push((t, (*us).max(1) as f64));
        }
    }
    let last = |k: usize| series[k].last().map_or(0.0, |p| p.1);
    // The title is the legend: each percentile in its series' colour, with its last value.
    let inner = area.width.saturating_sub(4) as usize;
    let text = |k: usize| format!("{} {} ", PERCENTILES[k], latency_us(last(k)));
    // p50 and the tail first when room is short; shown in percentile order.
    let mut shown = [false; 5];
    let mut used = 1;
    for k in [0, 3, 4, 2, 1] {
        let n = text(k).chars().count();
        if used + n <= inner {
            used += n;
            shown[k] = true;
        }
    }
    let mut title = vec![Span::raw(" ")];
    for k in (0..5).filter(|k| shown[*k]) {
        title.push(Span::styled(text(k), theme.series(k)));
    }
    if used + 8 <= inner {
        title.insert(0, Span::raw(" latency"));
    }
    let title = Line::from(title);
    let block = Block::bordered().title(title);
    if series[0].is_empty() {
        return placeholder(frame, area, live, block, theme);
    }
    let lo = series[0].iter().map(|p| p.1).fold(f64::MAX, f64::min);
    let hi = series[4].iter().map(|p| p.1).fold(0.0, f64::max);
    let (bounds, labels) = log_axis(lo, hi);
    let logged: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| s.iter().map(|(t, v)| (*t, v.log10())).collect())
        .collect();
    let (x0, x1) = time_bounds(live, area.width);
    let sets = logged
        .iter()
        .enumerate()
        .map(|(k, data)| {
            Dataset::default()
                .name(PERCENTILES[k])
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(theme.series(k))
                .data(data)
        })
        .collect();
    let chart = Chart::new(sets)
        .block(block)
        .x_axis(time_axis(x0, x1, theme))
        .y_axis(
            Axis::default()
                .bounds(bounds)
                .labels(labels)
                .style(theme.dim()),
        )
        .legend_position(None);
    frame.render_widget(chart, area);
}

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

/// The percentile spectrum of the whole run: every operation together and each one, on a
/// "nines" axis (p90, p99, p99.9…) with latency on a log scale; a table of the same points.
fn distribution(frame: &mut Frame, area: Rect, live: &Live, theme: &Theme) {
    let names: Vec<(usize, &str)> = std::iter::once((0, "all operations"))
        .chain(
            live.ops
                .iter()
                .enumerate()
                .filter(|(i, _)| live.spectrum.get(i + 1).is_some_and(|s| !s.is_empty()))
                .map(|(i, o)| (i + 1, o.name.as_str())),
        )
        .collect();
    let table_h = (names.len() as u16 + 3).min(area.height / 2).max(4);
    let [chart_area, table_area] =
        Layout::vertical([Constraint::Min(6), Constraint::Length(table_h)]).areas(area);
    let block = Block::bordered().title(" latency spectrum of ok responses (log scale) ");
    if live.spectrum.first().is_none_or(|s| s.is_empty()) {
        return placeholder(frame, area, live, block, theme);
    }
    let data: Vec<Vec<(f64, f64)>> = names
        .iter()
        .map(|(k, _)| {
            live.spectrum[*k]
                .iter()
                .filter(|(p, _)| *p < 100.0)
                .map(|(p, us)| (nines(*p).min(5.0), ((*us).max(1) as f64).log10()))
                .collect()
        })
        .collect();
    let all = &live.spectrum[0];
    let lo = all.first().map_or(1.0, |p| p.1 as f64);
    let hi = all.last().map_or(10.0, |p| p.1 as f64);
    let (bounds, labels) = log_axis(lo, hi);
    let sets = names
        .iter()
        .zip(&data)
        .enumerate()
        .map(|(i, ((_, name), d))| {
            let style = if i == 0 {
                theme.bold()
            } else {
                theme.series(i - 1)
            };
            Dataset::default()
                .name(name.to_string())
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(style)
                .data(d)
        })
        .collect();
    let chart = Chart::new(sets)
        .block(block)
        .x_axis(
            Axis::default()
                .bounds([0.0, 5.0])
                .labels(["p0", "p90", "p99", "p99.9", "p99.99", "p99.999"])
                .style(theme.dim()),
        )
        .y_axis(
            Axis::default()
                .bounds(bounds)
                .labels(labels)
                .style(theme.dim()),
        )
        .legend_position(Some(LegendPosition::TopLeft))
        .hidden_legend_constraints((Constraint::Ratio(1, 2), Constraint::Ratio(4, 5)));
    frame.render_widget(chart, chart_area);
    let shown = [50.0, 90.0, 99.0, 99.9, 99.99, 100.0];
    let header = Row::new(
        std::iter::once(Cell::from("operation")).chain(shown.iter().map(|p| num(percentile(*p)))),
    )
    .style(theme.dim());
    let rows = names.iter().map(|(k, name)| {
        let s = &live.spectrum[*k];
        Row::new(
            std::iter::once(Cell::from(name.to_string())).chain(shown.iter().map(|p| {
                num(s
                    .iter()
                    .find(|(q, _)| q == p)
                    .map_or("-".into(), |(_, us)| latency_us(*us as f64)))
            })),
        )
    });
    let mut widths = vec![Constraint::Fill(1)];
    widths.extend([Constraint::Length(7); 6]);
    frame.render_widget(
        Table::new(rows, widths)
            .header(header)
            .block(Block::bordered().title(" percentiles ")),
        table_area,
    );
}

/// One operation in detail: its throughput and latency over time, outcomes, streams.
fn operation(frame: &mut Frame, area: Rect, live: &Live, state: &ViewState, theme: &Theme) {
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
