//! The local addresses connections come from (`--source-address`, `target.source_address`):
//! one address, a list (`127.0.0.2,127.0.0.3`) or a CIDR block (`127.0.0.0/28`), all of one
//! family. Virtual user `g` connects from address `g mod k`, so a session's reconnects keep
//! their address and the users of every shard together spread evenly.

use std::fmt;
use std::net::IpAddr;

/// The most addresses a list or block may name: a /20 of IPv4, far more than the port ranges
/// of a machine's connections need (each address has its own ~28 000 ports).
pub const MAX_SOURCES: u64 = 4096;

/// A source address list that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourcesError {
    #[error(
        "`{0}` is not an IP address (e.g. 127.0.0.2), a list (127.0.0.2,127.0.0.3) or a CIDR block (127.0.0.0/28)"
    )]
    Address(String),
    #[error("`{text}`: the prefix length must be a number from 0 to {max} (e.g. 127.0.0.0/28)")]
    Prefix { text: String, max: u32 },
    #[error(
        "`{text}` holds {count} addresses, more than the {MAX_SOURCES} mcpbench uses (each has \
         its own ~28 000 ports): give a longer prefix, e.g. /{fits}"
    )]
    TooMany {
        text: String,
        count: String,
        fits: u32,
    },
    #[error("`{0}` mixes IPv4 and IPv6 addresses: connections to one target come from one family")]
    Mixed(String),
    #[error("`{text}`: {ip} is listed twice")]
    Twice { text: String, ip: IpAddr },
}

/// One or more local addresses of one family, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    addrs: Vec<IpAddr>,
    text: String,
}

impl Sources {
    /// Parses a comma-separated list of addresses and CIDR blocks.
    pub fn parse(text: &str) -> Result<Sources, SourcesError> {
        let text = text.trim();
        let mut addrs: Vec<IpAddr> = Vec::new();
        for part in text.split(',').map(str::trim) {
            for ip in block(part)? {
                if addrs.contains(&ip) {
                    return Err(SourcesError::Twice {
                        text: text.into(),
                        ip,
                    });
                }
                addrs.push(ip);
            }
            if addrs.len() as u64 > MAX_SOURCES {
                return Err(SourcesError::TooMany {
                    text: text.into(),
                    count: addrs.len().to_string(),
                    fits: if addrs[0].is_ipv4() { 20 } else { 116 },
                });
            }
        }
        if addrs.iter().any(IpAddr::is_ipv4) != addrs.iter().all(IpAddr::is_ipv4) {
            return Err(SourcesError::Mixed(text.into()));
        }
        Ok(Sources {
            addrs,
            text: text.into(),
        })
    }

    /// Every address, in order (never empty).
    pub fn addrs(&self) -> &[IpAddr] {
        &self.addrs
    }

    /// How many addresses.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// Never: a list has at least one address.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// The address virtual user `global` connects from.
    pub fn of_user(&self, global: usize) -> IpAddr {
        self.addrs[global % self.addrs.len()]
    }
}

impl fmt::Display for Sources {
    /// As given (a child process is given the same text).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Sources {
    type Err = SourcesError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Sources::parse(s)
    }
}

/// The addresses of one item: an address, or every address of a CIDR block.
fn block(part: &str) -> Result<Vec<IpAddr>, SourcesError> {
    let bad = || SourcesError::Address(part.into());
    let Some((ip, prefix)) = part.split_once('/') else {
        return Ok(vec![part.parse().map_err(|_| bad())?]);
    };
    let ip: IpAddr = ip.trim().parse().map_err(|_| bad())?;
    let bits = if ip.is_ipv4() { 32 } else { 128 };
    let prefix: u32 = prefix
        .trim()
        .parse()
        .ok()
        .filter(|p| *p <= bits)
        .ok_or_else(|| SourcesError::Prefix {
            text: part.into(),
            max: bits,
        })?;
    let host = bits - prefix;
    if host > MAX_SOURCES.ilog2() {
        return Err(SourcesError::TooMany {
            text: part.into(),
            count: 1u128
                .checked_shl(host)
                .map_or_else(|| format!("2^{host}"), |c| c.to_string()),
            fits: bits - MAX_SOURCES.ilog2(),
        });
    }
    let count = 1u128 << host;
    let first = match ip {
        IpAddr::V4(a) => {
            u128::from(u32::from(a) & (u32::MAX.checked_shl(bits - prefix).unwrap_or(0)))
        }
        IpAddr::V6(a) => u128::from(a) & u128::MAX.checked_shl(bits - prefix).unwrap_or(0),
    };
    Ok((0..count)
        .map(|i| match ip {
            IpAddr::V4(_) => IpAddr::from(std::net::Ipv4Addr::from((first + i) as u32)),
            IpAddr::V6(_) => IpAddr::from(std::net::Ipv6Addr::from(first + i)),
        })
        .collect())
}

/// The smallest block of loopback addresses with at least `count`: `127.0.0.0/29` for 5.
pub fn loopback_block(count: u64) -> String {
    let bits = count.max(1).next_power_of_two().ilog2();
    format!("127.0.0.0/{}", 32 - bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(s: &Sources) -> Vec<String> {
        s.addrs().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn lists_and_blocks_parse_and_users_spread_over_them() {
        let one = Sources::parse("127.0.0.2").unwrap();
        assert_eq!(ips(&one), ["127.0.0.2"]);
        let list = Sources::parse("127.0.0.2, 127.0.0.3").unwrap();
        assert_eq!(ips(&list), ["127.0.0.2", "127.0.0.3"]);
        assert_eq!(list.to_string(), "127.0.0.2, 127.0.0.3");
        // A block is taken from its network address, whatever address names it.
        let block = Sources::parse("127.0.0.5/30").unwrap();
        assert_eq!(
            ips(&block),
            ["127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"]
        );
        assert_eq!(Sources::parse("127.0.0.0/28").unwrap().len(), 16);
        assert_eq!(Sources::parse("10.1.2.3/32").unwrap().len(), 1);
        assert_eq!(
            ips(&Sources::parse("fd00::/127,::1").unwrap()),
            ["fd00::", "fd00::1", "::1"]
        );
        // User g takes address g mod k: shard i of N keeps its users' global numbers.
        let users: Vec<String> = (0..5).map(|g| block.of_user(g).to_string()).collect();
        assert_eq!(
            users,
            [
                "127.0.0.4",
                "127.0.0.5",
                "127.0.0.6",
                "127.0.0.7",
                "127.0.0.4"
            ]
        );
    }

    #[test]
    fn bad_lists_are_refused_with_what_to_give() {
        let err = |s: &str| Sources::parse(s).unwrap_err().to_string();
        assert!(
            err("127.0.0.300").contains("not an IP address"),
            "{}",
            err("127.0.0.300")
        );
        assert!(err("").contains("not an IP address"));
        assert!(
            err("127.0.0.0/33").contains("from 0 to 32"),
            "{}",
            err("127.0.0.0/33")
        );
        assert!(err("127.0.0.0/x").contains("prefix length"));
        assert!(err("::1/129").contains("from 0 to 128"));
        let e = err("127.0.0.0/0");
        assert!(
            e.contains("4294967296 addresses") && e.contains("/20"),
            "{e}"
        );
        let e = err("::/0");
        assert!(e.contains("2^128 addresses") && e.contains("/116"), "{e}");
        assert!(err("127.0.0.1,::1").contains("mixes IPv4 and IPv6"));
        assert!(err("127.0.0.0/30,127.0.0.2").contains("127.0.0.2 is listed twice"));
        // Blocks that add up past the cap.
        let e = err("127.0.0.0/20,127.1.0.0/24");
        assert!(e.contains("more than the 4096"), "{e}");
    }

    #[test]
    fn the_block_named_for_a_count_holds_it() {
        assert_eq!(loopback_block(1), "127.0.0.0/32");
        assert_eq!(loopback_block(4), "127.0.0.0/30");
        assert_eq!(loopback_block(5), "127.0.0.0/29");
        assert_eq!(loopback_block(8), "127.0.0.0/29");
    }
}
