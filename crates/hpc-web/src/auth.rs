//! Who is asking: the peer a connection came from, whether its user header
//! is believed, and whether the user is an admin.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;

/// Where a connection came from, set on every request by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// The Unix socket: only who may open its file can connect.
    Unix,
    /// A TCP peer.
    Tcp(IpAddr),
}

/// An address or network (`10.0.0.0/8`, `::1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    addr: IpAddr,
    bits: u8,
}

impl std::str::FromStr for Net {
    type Err = String;
    fn from_str(s: &str) -> Result<Net, String> {
        let (a, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("'{s}': not an IP address or network"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b
                .parse::<u8>()
                .ok()
                .filter(|b| *b <= max)
                .ok_or_else(|| format!("'{s}': the prefix length must be 0 to {max}"))?,
        };
        Ok(Net { addr, bits })
    }
}

impl Net {
    /// True when `ip` is in this network (an IPv4-mapped IPv6 address
    /// counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        let (a, b, len) = match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => (
                u128::from(u32::from(a)) << 96,
                u128::from(u32::from(b)) << 96,
                self.bits,
            ),
            (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), self.bits),
            _ => return false,
        };
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(len))
        };
        a & mask == b & mask
    }
}

/// Parses a comma-separated list of networks.
pub fn parse_nets(s: &str) -> Result<Vec<Net>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::parse)
        .collect()
}

/// The longest user name believed from the header.
pub const MAX_USER: usize = 256;

/// Who a request is from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    /// The user the proxy signed in.
    pub user: String,
    /// Whether they see every user's jobs and the centre's reports.
    pub admin: bool,
}

/// Why a request has no user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// No user header.
    NoHeader,
    /// A user header from a peer that is not a trusted proxy.
    Untrusted,
    /// A header that is not one user name.
    BadName,
}

impl Refused {
    /// The reason, for the 401 page.
    pub fn reason(&self, header: &str) -> String {
        match self {
            Refused::NoHeader => format!("no signed-in user: the proxy in front sets {header}"),
            Refused::Untrusted => {
                format!("{header} is believed only from the Unix socket or a trusted proxy address")
            }
            Refused::BadName => format!("{header} is not one user name"),
        }
    }
}

/// Who may see everything: named users, and the members of a Unix group
/// (looked up at most once a minute).
pub struct Admins {
    users: HashSet<String>,
    group: Option<String>,
    members: Mutex<(Option<Instant>, HashSet<String>)>,
}

/// How long a group's members are kept before they are looked up again.
const GROUP_TTL: Duration = Duration::from_secs(60);

impl Admins {
    /// Admins by name and by group.
    pub fn new(users: impl IntoIterator<Item = String>, group: Option<String>) -> Admins {
        Admins {
            users: users.into_iter().collect(),
            group,
            members: Mutex::new((None, HashSet::new())),
        }
    }

    /// True when `user` is an admin.
    pub fn contains(&self, user: &str) -> bool {
        if self.users.contains(user) {
            return true;
        }
        let Some(group) = &self.group else {
            return false;
        };
        let mut m = self.members.lock().unwrap_or_else(|e| e.into_inner());
        if m.0.map_or(true, |at| at.elapsed() > GROUP_TTL) {
            *m = (Some(Instant::now()), group_members(group));
        }
        m.1.contains(user)
    }
}

/// The members of a Unix group: its member list and the users whose
/// primary group it is (from the system's user database).
fn group_members(name: &str) -> HashSet<String> {
    let Ok(Some(g)) = nix::unistd::Group::from_name(name) else {
        return HashSet::new();
    };
    let mut out: HashSet<String> = g.mem.into_iter().collect();
    // Primary members are not listed in the group entry.
    if let Ok(text) = std::fs::read_to_string("/etc/passwd") {
        for line in text.lines() {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() > 3 && f[3].parse::<u32>().ok() == Some(g.gid.as_raw()) {
                out.insert(f[0].to_string());
            }
        }
    }
    out
}

/// The user of a request: from `header`, believed only from the Unix
/// socket or a peer in `trusted`.
pub fn user_of(
    headers: &HeaderMap,
    header: &str,
    peer: Peer,
    trusted: &[Net],
) -> Result<String, Refused> {
    let mut values = headers.get_all(header).iter();
    let Some(v) = values.next() else {
        return Err(Refused::NoHeader);
    };
    let believed = match peer {
        Peer::Unix => true,
        Peer::Tcp(ip) => trusted.iter().any(|n| n.contains(ip)),
    };
    if !believed {
        return Err(Refused::Untrusted);
    }
    if values.next().is_some() {
        return Err(Refused::BadName);
    }
    // UTF-8, not only visible ASCII (HeaderValue::to_str): a user named
    // zoë could never sign in.
    let name = std::str::from_utf8(v.as_bytes())
        .map_err(|_| Refused::BadName)?
        .trim();
    let ok = !name.is_empty()
        && name.len() <= MAX_USER
        && name
            .chars()
            .all(|c| !c.is_control() && c != ',' && !c.is_whitespace());
    if !ok {
        return Err(Refused::BadName);
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_hold_their_addresses_only() {
        let n: Net = "10.1.0.0/16".parse().unwrap();
        assert!(n.contains("10.1.200.3".parse().unwrap()));
        assert!(!n.contains("10.2.0.1".parse().unwrap()));
        assert!(n.contains("::ffff:10.1.0.9".parse().unwrap()));
        let one: Net = "127.0.0.1".parse().unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        let v6: Net = "fd00::/8".parse().unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()));
        assert!(!v6.contains("fe80::1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Net>().is_err());
        assert!("host".parse::<Net>().is_err());
    }

    #[test]
    fn the_header_is_believed_from_trusted_peers_only() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-user", "ann".parse().unwrap());
        let trusted = parse_nets("10.0.0.5").unwrap();
        let from = |ip: &str| Peer::Tcp(ip.parse().unwrap());
        assert_eq!(
            user_of(&h, "x-forwarded-user", Peer::Unix, &[]),
            Ok("ann".into())
        );
        assert_eq!(
            user_of(&h, "x-forwarded-user", from("10.0.0.5"), &trusted),
            Ok("ann".into())
        );
        assert_eq!(
            user_of(&h, "x-forwarded-user", from("10.0.0.6"), &trusted),
            Err(Refused::Untrusted)
        );
        assert_eq!(
            user_of(&HeaderMap::new(), "x-forwarded-user", Peer::Unix, &[]),
            Err(Refused::NoHeader)
        );
        h.append("x-forwarded-user", "bob".parse().unwrap());
        assert_eq!(
            user_of(&h, "x-forwarded-user", Peer::Unix, &[]),
            Err(Refused::BadName)
        );
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-user", "a b".parse().unwrap());
        assert_eq!(
            user_of(&h, "x-forwarded-user", Peer::Unix, &[]),
            Err(Refused::BadName)
        );
        // A name in UTF-8 is a name; bytes that are not UTF-8 are not.
        let named = |bytes: &[u8]| {
            let mut h = HeaderMap::new();
            h.insert(
                "x-forwarded-user",
                axum::http::HeaderValue::from_bytes(bytes).unwrap(),
            );
            user_of(&h, "x-forwarded-user", Peer::Unix, &[])
        };
        assert_eq!(named("zoë".as_bytes()), Ok("zoë".into()));
        assert_eq!(named(b"zo\xeb"), Err(Refused::BadName));
    }

    #[test]
    fn admins_by_name() {
        let a = Admins::new(["root".to_string()], None);
        assert!(a.contains("root"));
        assert!(!a.contains("ann"));
    }
}
