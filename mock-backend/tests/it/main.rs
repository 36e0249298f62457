//! Integration tests: one binary (one link step), one module per area.

mod accept;
mod routes;
mod server;
mod support;
