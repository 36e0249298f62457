//! The distribution view: the whole run's percentile spectrum, every operation together and
//! each one, as a chart and a table.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::symbols::Marker;
use ratatui::widgets::{Axis, Block, Cell, Chart, Dataset, GraphType, LegendPosition, Row, Table};

use crate::report::live::Live;
use crate::ui::format::{latency_us, nines, percentile};

use super::charts::log_axis;
use super::{Theme, num, placeholder};

/// The percentile spectrum of the whole run: every operation together and each one, on a
/// "nines" axis (p90, p99, p99.9…) with latency on a log scale; a table of the same points.
pub(super) fn distribution(frame: &mut Frame, area: Rect, live: &Live, theme: &Theme) {
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
