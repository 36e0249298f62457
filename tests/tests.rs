//! One integration-test binary (one link step); each module pins one behaviour.

mod support;

mod ab;
mod accounting;
mod architecture;
mod browser;
mod ci_recipes;
mod cli;
mod credentials;
mod deploy;
mod doctor;
mod e2e;
mod fuzz;
mod gateway;
mod hostile;
mod interop;
mod load_models;
mod matrix;
mod mcp_server;
mod otlp;
mod outcomes;
mod preflight;
mod reference_server;
mod reliability;
mod report;
mod scale_out;
mod scenario_schema;
mod server_legacy_sse;
mod server_stateless;
mod server_stdio;
mod server_streamable;
mod server_tls;
mod server_ws;
mod signals;
mod target_resources;
mod terminal;
