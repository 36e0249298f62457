//! Drawing the dashboard: pure functions from a [`Live`] view and the viewer's [`ViewState`]
//! to a frame, so every view is tested on ratatui's `TestBackend` at any size.
//!
//! Here the viewer's state, its keys, the theme and [`draw`]; around the views the header,
//! footer and help (status); the views: overview, distribution (spectrum), one operation
//! (one_operation); the charts over time they share (charts).

mod charts;
mod one_operation;
mod overview;
mod spectrum_view;
mod status;

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, Paragraph, Wrap};

use crate::report::live::Live;

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
    status::header(frame, head, live, state, &theme);
    match state.view {
        View::Overview => overview::overview(frame, body, live, state, &theme),
        View::Distribution => spectrum_view::distribution(frame, body, live, &theme),
        View::Operation => one_operation::operation(frame, body, live, state, &theme),
    }
    status::footer(frame, foot, state, &theme);
    if state.help {
        status::help(frame, area, &theme);
    }
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

/// A right-aligned table cell, for numbers.
fn num<'a>(text: String) -> Cell<'a> {
    Cell::from(Line::from(text).right_aligned())
}
