//! Regression budgets for `mcpbench compare`: how much worse each metric may get, the way teams
//! write them (`p95=+15%`, `throughput=-10%`, `errors=+0.5pp`), from `--budget` or a scenario's
//! `[compare]` table (kept in its runs' summaries, so `compare` finds them).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{ScenarioError, Source};

/// The metrics compared, with whether higher is worse.
pub const METRICS: [(&str, bool); 7] = [
    ("p50", true),
    ("p90", true),
    ("p95", true),
    ("p99", true),
    ("p99.9", true),
    ("throughput", false),
    ("error_rate", true),
];

/// A limit on how much worse a metric may get: `p95=+15%`, `throughput=-10%`,
/// `errors=+0.5pp` (percentage points of the error rate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// The metric (`p50` … `p99.9`, `throughput`, `error_rate`).
    pub metric: String,
    /// As written, e.g. `+15%`.
    pub written: String,
    /// The worst change allowed: a fraction of the base (`%`), or points of a rate (`pp`).
    pub limit: f64,
    pub points: bool,
}

impl Budget {
    /// Parses `p95=+15%,throughput=-10%,errors=+0.5pp`.
    pub fn parse_list(text: &str) -> Result<Vec<Budget>, String> {
        text.split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|item| {
                let (m, v) = item.split_once('=').ok_or_else(|| {
                    format!("`{item}`: write METRIC=CHANGE, e.g. p95=+15% or errors=+0.5pp")
                })?;
                Budget::parse(m, v)
            })
            .collect()
    }

    /// One budget: `metric` (`errors` is `error_rate`) and its change (`+15%`, `-10%`, `+0.5pp`).
    pub fn parse(metric: &str, change: &str) -> Result<Budget, String> {
        let m = match metric.trim() {
            "errors" | "error_rate" => "error_rate",
            "p999" => "p99.9",
            m => m,
        };
        let Some(&(name, higher_is_worse)) = METRICS.iter().find(|(n, _)| *n == m) else {
            let names: Vec<&str> = METRICS.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "`{metric}` is not a compared metric: one of {}, errors",
                names.join(", ")
            ));
        };
        let v = change.trim();
        let (number, points) = if let Some(n) = v.strip_suffix("pp") {
            (n, true)
        } else if let Some(n) = v.strip_suffix('%') {
            (n, false)
        } else {
            return Err(format!(
                "`{metric}={change}`: a budget is a change in % (p95=+15%) or, for errors, percentage points (errors=+0.5pp)"
            ));
        };
        if points && name != "error_rate" {
            return Err(format!(
                "`{metric}={change}`: percentage points (pp) are for error rates; write % for {name}"
            ));
        }
        let n: f64 = number
            .trim()
            .parse()
            .map_err(|_| format!("`{metric}={change}`: `{number}` is not a number"))?;
        let worse = if higher_is_worse { n > 0.0 } else { n < 0.0 };
        if !worse || !n.is_finite() {
            return Err(format!(
                "`{metric}={change}`: a budget says how much worse it may get: {} for {name}",
                if higher_is_worse { "+N" } else { "-N" }
            ));
        }
        Ok(Budget {
            metric: name.to_string(),
            written: v.to_string(),
            limit: n.abs() / 100.0,
            points,
        })
    }

    /// Whether a change from `base` to `current` is beyond the budget (in the bad direction).
    pub fn exceeded(&self, base: f64, current: f64, higher_is_worse: bool) -> bool {
        let worse_by = if higher_is_worse {
            current - base
        } else {
            base - current
        };
        if self.points {
            worse_by > self.limit
        } else if base > 0.0 {
            worse_by / base > self.limit
        } else {
            worse_by > 0.0
        }
    }
}

/// `[compare]`: `p95 = "+15%"`, `throughput = "-10%"`, `error_rate = "+0.5pp"`; a bad entry
/// is named by its key and line.
pub(crate) fn from_table(
    src: &Source<'_>,
    table: &Spanned<BTreeMap<String, Spanned<String>>>,
) -> Result<Vec<Budget>, ScenarioError> {
    table
        .get_ref()
        .iter()
        .map(|(metric, change)| {
            Budget::parse(metric, change.get_ref()).map_err(|why| {
                src.error_at_key(
                    change.span(),
                    &format!("compare.{metric}"),
                    why,
                    Some("e.g. [compare] p95 = \"+15%\", throughput = \"-10%\", error_rate = \"+0.5pp\"".into()),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_and_judge_the_bad_direction() {
        let b = Budget::parse_list("p95=+15%,throughput=-10%,errors=+0.5pp").unwrap();
        assert_eq!(b.len(), 3);
        assert_eq!(
            (b[0].metric.as_str(), b[0].limit, b[0].points),
            ("p95", 0.15, false)
        );
        assert_eq!((b[2].metric.as_str(), b[2].points), ("error_rate", true));
        assert!(b[0].exceeded(10.0, 11.6, true) && !b[0].exceeded(10.0, 11.4, true));
        assert!(b[1].exceeded(1000.0, 890.0, false) && !b[1].exceeded(1000.0, 910.0, false));
        assert!(b[2].exceeded(0.001, 0.0065, true) && !b[2].exceeded(0.001, 0.005, true));
        for (bad, says) in [
            ("p95=15", "a change in %"),
            ("p95=-15%", "how much worse"),
            ("throughput=+10%", "how much worse"),
            ("p98=+1%", "not a compared metric"),
            ("p95=+1pp", "for error rates"),
            ("p95", "METRIC=CHANGE"),
            ("p95=+x%", "not a number"),
        ] {
            let e = Budget::parse_list(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn compare_tables_in_scenarios() {
        let ok = "[load]\nconcurrency = 1\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n[compare]\np95 = \"+15%\"\nerror_rate = \"+0.5pp\"\n";
        let plan = crate::scenario::parse("t.toml", ok, &|_| None).unwrap();
        assert_eq!(plan.budgets.len(), 2);
        let bad = ok.replace("+15%", "-15%");
        let d = crate::scenario::refusal(&bad);
        assert_eq!((d.key.as_str(), d.line), ("compare.p95", 7), "{d}");
        assert!(d.message.contains("how much worse"), "{d}");
    }
}
