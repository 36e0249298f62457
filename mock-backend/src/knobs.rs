//! Which routes can be tuned, and the `--route NAME:KNOB=VALUE,...` overrides. The knobs
//! themselves (durations, latency distributions, error rates) are the grammar shared with
//! mcpbench, in the `mcpbench-knobs` crate.

use std::{fmt, str::FromStr};

pub use mcpbench_knobs::{
    KnobError, Knobs, Latency, MAX_LATENCY, parse_duration, parse_error_rate,
};

/// A route name or a `--route` flag that does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RouteError {
    #[error("unknown route {input:?}: expected contacts, invoices, tickets or echo")]
    Route { input: String },
    #[error(
        "invalid route override {input:?}: expected NAME:KNOB=VALUE[,KNOB=VALUE...] with knobs latency, payload, error-rate (e.g. \"contacts:latency=5ms,error-rate=0.1\")"
    )]
    Override { input: String },
    #[error(transparent)]
    Knob(#[from] KnobError),
}

/// The routes whose behaviour can be tuned and whose traffic is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    Contacts,
    Invoices,
    Tickets,
    Echo,
}

impl Route {
    /// Every route, in `/stats` order; `Route::index` indexes into arrays of this length.
    pub const ALL: [Route; 4] = [
        Route::Contacts,
        Route::Invoices,
        Route::Tickets,
        Route::Echo,
    ];

    /// The route's name as used in flags and `/stats`.
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Contacts => "contacts",
            Route::Invoices => "invoices",
            Route::Tickets => "tickets",
            Route::Echo => "echo",
        }
    }

    /// Position in [`Route::ALL`], so per-route state lives in plain arrays (no maps on the hot
    /// path).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Route {
    type Err = RouteError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Route::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| RouteError::Route {
                input: s.to_owned(),
            })
    }
}

/// Per-route overrides of the default [`Knobs`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouteKnobs {
    pub contacts: Knobs,
    pub invoices: Knobs,
    pub tickets: Knobs,
    pub echo: Knobs,
}

impl RouteKnobs {
    /// The overrides for `route`.
    pub fn get(&self, route: Route) -> &Knobs {
        match route {
            Route::Contacts => &self.contacts,
            Route::Invoices => &self.invoices,
            Route::Tickets => &self.tickets,
            Route::Echo => &self.echo,
        }
    }

    /// Mutable access to the overrides for `route`.
    pub fn get_mut(&mut self, route: Route) -> &mut Knobs {
        match route {
            Route::Contacts => &mut self.contacts,
            Route::Invoices => &mut self.invoices,
            Route::Tickets => &mut self.tickets,
            Route::Echo => &mut self.echo,
        }
    }

    /// Folds one `--route` flag in; a later flag for the same route wins field by field.
    pub fn apply(&mut self, o: &RouteOverride) {
        let slot = self.get_mut(o.route);
        *slot = o.knobs.over(slot);
    }
}

/// One `--route NAME:latency=SPEC,payload=N,error-rate=P` flag.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteOverride {
    pub route: Route,
    pub knobs: Knobs,
}

impl FromStr for RouteOverride {
    type Err = RouteError;

    /// Splits on commas, but a piece that is not `latency=`, `payload=` or `error-rate=` continues
    /// the previous value, so `latency=lognormal:p50=2ms,p99=20ms` keeps its own comma.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let form_error = || RouteError::Override {
            input: s.to_owned(),
        };
        let (name, spec) = s.split_once(':').ok_or_else(form_error)?;
        let route: Route = name.parse()?;

        let mut pairs: Vec<(&str, String)> = Vec::new();
        for piece in spec.split(',') {
            match piece.split_once('=') {
                Some((key @ ("latency" | "payload" | "error-rate" | "error_rate"), value)) => {
                    pairs.push((key, value.to_owned()));
                }
                _ => match pairs.last_mut() {
                    Some((_, value)) => {
                        value.push(',');
                        value.push_str(piece);
                    }
                    None => return Err(form_error()),
                },
            }
        }

        let mut knobs = Knobs::default();
        for (key, value) in pairs {
            match key {
                "latency" => knobs.latency = Some(value.parse()?),
                "payload" => {
                    knobs.payload = Some(value.trim().parse().map_err(|_| KnobError::Payload {
                        input: value.clone(),
                    })?);
                }
                _ => knobs.error_rate = Some(parse_error_rate(&value)?),
            }
        }
        Ok(RouteOverride { route, knobs })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Latency;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn routes_parse_and_display() {
        for route in Route::ALL {
            assert_eq!(route.as_str().parse::<Route>(), Ok(route));
            assert_eq!(Route::ALL[route.index()], route);
        }
        let err = "users".parse::<Route>().unwrap_err().to_string();
        assert!(
            err.contains("expected contacts, invoices, tickets or echo"),
            "{err}"
        );
    }

    #[test]
    fn route_override_keeps_lognormal_commas() {
        let o: RouteOverride =
            "contacts:latency=lognormal:p50=2ms,p99=20ms,payload=64,error-rate=0.1"
                .parse()
                .unwrap();
        assert_eq!(o.route, Route::Contacts);
        assert_eq!(
            o.knobs,
            Knobs {
                latency: Some(Latency::LogNormal {
                    p50: ms(2),
                    p99: ms(20)
                }),
                payload: Some(64),
                error_rate: Some(0.1),
            }
        );
    }

    #[test]
    fn route_override_errors_explain() {
        let err = "contacts".parse::<RouteOverride>().unwrap_err().to_string();
        assert!(err.contains("expected NAME:KNOB=VALUE"), "{err}");
        let err = "contacts:speed=5".parse::<RouteOverride>().unwrap_err();
        assert!(matches!(err, RouteError::Override { .. }), "{err}");
        let err = "users:payload=5".parse::<RouteOverride>().unwrap_err();
        assert!(matches!(err, RouteError::Route { .. }), "{err}");
        let err = "echo:payload=lots".parse::<RouteOverride>().unwrap_err();
        assert!(
            matches!(err, RouteError::Knob(KnobError::Payload { .. })),
            "{err}"
        );
        let err = "echo:error-rate=2".parse::<RouteOverride>().unwrap_err();
        assert!(
            matches!(err, RouteError::Knob(KnobError::ErrorRate { .. })),
            "{err}"
        );
    }

    #[test]
    fn later_route_flags_win_field_by_field() {
        let mut routes = RouteKnobs::default();
        routes.apply(&"echo:payload=10,error-rate=0.5".parse().unwrap());
        routes.apply(&"echo:payload=20".parse().unwrap());
        assert_eq!(routes.echo.payload, Some(20));
        assert_eq!(routes.echo.error_rate, Some(0.5));
        assert_eq!(routes.contacts, Knobs::default());
    }
}
