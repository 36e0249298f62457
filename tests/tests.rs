//! One integration-test binary (one link step); each module pins one behaviour.

mod support;

mod cli;
mod e2e;
mod outcomes;
mod reference_server;
