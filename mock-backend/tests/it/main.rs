//! Integration tests: one binary (one link step), one module per area.

mod accept;
mod cli;
mod routes;
mod server;
mod support;
