//! Plans derived from a finished plan, so that nothing after the scenario edits one: the
//! target's `tool_prefix` applied to the workload (at build, and again for each target of an
//! A/B comparison), a search step at one level, and the operation names a run reports for the
//! revision its target negotiated.

use std::time::Duration;

use super::plan::{Method, Model, Plan, Profile, Target};
use crate::protocol::version::Revision;

/// A target's `tool_prefix`, if it has one.
fn prefix_of(target: &Target) -> Option<&str> {
    match target {
        Target::Remote(r) => r.tool_prefix.as_deref(),
        Target::Embedded(_) => None,
    }
}

/// Every tool name the workload sends or expects, for `f` to rewrite.
fn tool_names(plan: &mut Plan, mut f: impl FnMut(&mut String)) {
    for item in &mut plan.workload {
        if let Method::ToolsCall { tool } = &mut item.method {
            f(tool);
        }
        if let Some(e) = &mut item.expect {
            let names = e
                .tools
                .iter_mut()
                .flatten()
                .chain(e.tenant_tools.iter_mut().flat_map(|(_, v)| v.iter_mut()));
            names.for_each(&mut f);
        }
    }
}

/// The target's `tool_prefix` put before every tool name the workload calls or expects;
/// operation names stay as written.
pub(super) fn apply_tool_prefix(plan: &mut Plan) {
    if let Some(prefix) = prefix_of(&plan.target).map(str::to_string) {
        tool_names(plan, |name| name.insert_str(0, &prefix));
    }
}

impl Plan {
    /// This plan on another target (an A/B comparison's): the target swapped, its own
    /// `tool_prefix` in place of this one's, no comparison of its own.
    pub fn for_target(&self, target: &Target) -> Plan {
        let mut p = self.clone();
        if let Some(old) = prefix_of(&self.target) {
            tool_names(&mut p, |name| {
                if let Some(rest) = name.strip_prefix(old) {
                    *name = rest.to_string();
                }
            });
        }
        p.target = target.clone();
        p.ab = None;
        apply_tool_prefix(&mut p);
        p
    }

    /// One step of a search (find-max, an A/B level): a constant level (arrivals a second, or
    /// virtual users) for `duration`, a fifth of it warm-up (at most 2 s), no request count.
    pub fn at_level(&self, level: f64, duration: Duration) -> Plan {
        let mut p = self.clone();
        p.find_max = None;
        p.load.duration = duration;
        p.load.warmup = (duration / 5).min(Duration::from_secs(2));
        p.load.requests = None;
        p.load.model = match &self.load.model {
            Model::Open {
                arrival, release, ..
            } => Model::Open {
                rate: Profile::constant(level, duration),
                arrival: *arrival,
                release: *release,
            },
            Model::Closed { .. } => {
                let vus = level.round().max(1.0);
                p.load.concurrency = vus as usize;
                Model::Closed {
                    vus: Profile::constant(vus, duration),
                }
            }
        };
        p
    }

    /// The operation names a run reports when its target speaks `revision`: operation 0 is
    /// the session opening, `initialize`, or `server/discover` for 2026-07-28.
    pub fn ops_for(&self, revision: Revision) -> Vec<String> {
        let mut ops = self.ops.clone();
        if !revision.has_handshake() {
            ops[0] = "server/discover".into();
        }
        ops
    }
}
