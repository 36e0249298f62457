//! The weighted workload mix and its request bodies.

use rand::{Rng, RngExt};

use crate::scenario::{Method, WorkItem};

/// Writes the JSON-RPC body of a workload entry for a request id.
///
/// The envelope is pre-rendered with the id last, so a body is: prefix, arguments (a compiled
/// template), `},"id":`, the id digits, `}`.
#[derive(Debug)]
pub struct RequestTemplate {
    prefix: Vec<u8>,
    has_args: bool,
}

impl RequestTemplate {
    pub fn new(item: &WorkItem) -> Self {
        let mut prefix = Vec::with_capacity(96);
        match &item.method {
            Method::ToolsList => {
                prefix.extend_from_slice(br#"{"jsonrpc":"2.0","method":"tools/list""#);
                RequestTemplate {
                    prefix,
                    has_args: false,
                }
            }
            Method::ToolsCall { tool } => {
                prefix.extend_from_slice(
                    br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"#,
                );
                crate::protocol::jsonrpc::write_json_str(&mut prefix, tool);
                prefix.extend_from_slice(br#","arguments":"#);
                RequestTemplate {
                    prefix,
                    has_args: true,
                }
            }
        }
    }

    #[inline]
    pub fn write<R: Rng>(&self, item: &WorkItem, out: &mut Vec<u8>, id: u64, rng: &mut R) {
        out.extend_from_slice(&self.prefix);
        if self.has_args {
            item.arguments.write(out, rng);
            out.push(b'}');
        }
        out.extend_from_slice(br#","id":"#);
        out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
        out.push(b'}');
    }
}

/// Picks workload entries in proportion to their weights.
#[derive(Debug)]
pub struct Mix {
    cumulative: Vec<u64>,
    total: u64,
}

impl Mix {
    pub fn new(items: &[WorkItem]) -> Self {
        let mut acc = 0u64;
        let cumulative = items
            .iter()
            .map(|w| {
                acc += w.weight as u64;
                acc
            })
            .collect();
        Mix {
            cumulative,
            total: acc,
        }
    }

    #[inline]
    pub fn pick<R: Rng>(&self, rng: &mut R) -> usize {
        if self.cumulative.len() == 1 {
            return 0;
        }
        let r = rng.random_range(0..self.total);
        self.cumulative.iter().position(|&c| r < c).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn bodies_are_valid_json_rpc_and_mix_follows_weights() {
        let plan = crate::scenario::parse(
            "t.toml",
            "[load]\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\nweight = 3\narguments = { message = \"${pick:a,b}\" }\n[[workload]]\nmethod = \"tools/list\"\n",
            &|_| None,
        )
        .unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        let t0 = RequestTemplate::new(&plan.workload[0]);
        let mut out = Vec::new();
        t0.write(&plan.workload[0], &mut out, 42, &mut rng);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["id"], 42);
        assert_eq!(v["params"]["name"], "echo");
        assert!(v["params"]["arguments"]["message"].is_string());
        out.clear();
        RequestTemplate::new(&plan.workload[1]).write(&plan.workload[1], &mut out, 7, &mut rng);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&out).unwrap(),
            serde_json::json!({"jsonrpc":"2.0","method":"tools/list","id":7})
        );
        let mix = Mix::new(&plan.workload);
        let n = 40_000;
        let first = (0..n).filter(|_| mix.pick(&mut rng) == 0).count();
        let share = first as f64 / n as f64;
        assert!((share - 0.75).abs() < 0.02, "share {share}");
    }
}
