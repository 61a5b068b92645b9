//! Which addresses VCS calls may reach. A connection's URLs come from an organization's module
//! managers, not from the operator, so unchecked they would let anyone who may publish a module
//! make Hangar call, with a token or a webhook secret, whatever its network reaches: the
//! instance metadata service, an internal admin page, a database's HTTP port. An address that
//! is not globally routable is refused unless the operator allows its network
//! (`HANGAR_VCS_ALLOWED_NETWORKS`); a metadata address only when named on its own, so that
//! allowing `10.0.0.0/8`, or everything, never hands out the host's credentials.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Most networks `HANGAR_VCS_ALLOWED_NETWORKS` may list.
pub const MAX_ALLOWED_NETWORKS: usize = 64;

/// An address block: `10.0.0.0/8`, `fd00::/8`, or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    address: IpAddr,
    prefix: u8,
}

impl Network {
    const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Self {
        Self { address: IpAddr::V4(Ipv4Addr::new(a, b, c, d)), prefix }
    }

    const fn v6(segments: [u16; 8], prefix: u8) -> Self {
        let [a, b, c, d, e, f, g, h] = segments;
        Self { address: IpAddr::V6(Ipv6Addr::new(a, b, c, d, e, f, g, h)), prefix }
    }

    /// Reads `address/prefix`, or an address alone (one host). Bits set past the prefix are an
    /// error rather than silently dropped: `10.1.2.3/8` is more likely a typo than a wish to
    /// allow all of `10.0.0.0/8`. An IPv4-mapped IPv6 block is read as the IPv4 block it maps.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let (address, prefix) = raw.split_once('/').map_or((raw, None), |(a, p)| (a, Some(p)));
        let address: IpAddr = address.parse().map_err(|_| format!("`{raw}` is not an IP address or CIDR block"))?;
        let width = bits(address);
        let prefix = match prefix {
            None => width,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= width)
                .ok_or_else(|| format!("`{raw}`: the prefix length must be a number from 0 to {width}"))?,
        };
        let network = Self { address, prefix };
        let masked = network.masked();
        if masked != address {
            return Err(format!(
                "`{raw}` has address bits set past its /{prefix} prefix: did you mean {masked}/{prefix}?"
            ));
        }
        Ok(match address {
            IpAddr::V6(v6) if prefix >= 96 => match v6.to_ipv4_mapped() {
                Some(v4) => Self { address: IpAddr::V4(v4), prefix: prefix - 96 },
                None => network,
            },
            _ => network,
        })
    }

    /// Whether `ip` lies in the block (never across address families).
    pub fn contains(&self, ip: IpAddr) -> bool {
        bits(ip) == bits(self.address) && Self { address: ip, prefix: self.prefix }.masked() == self.address
    }

    fn masked(&self) -> IpAddr {
        match self.address {
            IpAddr::V4(v4) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

fn bits(ip: IpAddr) -> u8 {
    if ip.is_ipv4() {
        32
    } else {
        128
    }
}

/// The networks, besides the public Internet, that the operator lets VCS calls reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedNetworks(Vec<Network>);

impl AllowedNetworks {
    /// Reads a comma-separated list of CIDR blocks (`10.0.0.0/8, fd12:3456::/48`).
    pub fn parse(raw: &str) -> Result<Self, String> {
        let networks = raw
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(Network::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if networks.len() > MAX_ALLOWED_NETWORKS {
            return Err(format!("at most {MAX_ALLOWED_NETWORKS} networks may be listed, not {}", networks.len()));
        }
        Ok(Self(networks))
    }

    /// The blocks, as listed.
    pub fn networks(&self) -> &[Network] {
        &self.0
    }

    /// Whether a VCS call may connect to `ip`: a globally routable address, or one in an
    /// allowed network. A metadata address needs a block of that one address.
    pub fn check(&self, ip: IpAddr) -> Result<(), Refused> {
        let canonical = ip.to_canonical();
        let Some(range) = special_range(canonical) else { return Ok(()) };
        let allowed = if METADATA.contains(&canonical) {
            self.0.iter().any(|n| n.address == canonical && n.prefix == bits(canonical))
        } else {
            self.0.iter().any(|n| n.contains(canonical) || n.contains(ip))
        };
        if allowed {
            Ok(())
        } else {
            Err(Refused { address: ip, range })
        }
    }
}

/// An address VCS calls may not reach, and the special-purpose block it lies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub address: IpAddr,
    pub range: &'static str,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is {}", self.address, self.range)
    }
}

impl std::error::Error for Refused {}

/// The cloud providers' instance metadata services (AWS IMDS over IPv4 and IPv6, ECS task
/// metadata, EKS pod identity, Alibaba Cloud). Other clouds' lie in blocks refused anyway.
const METADATA: [IpAddr; 6] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 23)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)),
];

/// IPv4 blocks that are not globally routable (IANA's special-purpose registry), the broadcast
/// address included in `240.0.0.0/4`.
const V4_BLOCKS: [(Network, &str); 15] = [
    (Network::v4(0, 0, 0, 0, 8), "an unspecified address (0.0.0.0/8), which reaches this host"),
    (Network::v4(10, 0, 0, 0, 8), "a private address (10.0.0.0/8)"),
    (Network::v4(100, 64, 0, 0, 10), "a carrier-grade NAT address (100.64.0.0/10)"),
    (Network::v4(127, 0, 0, 0, 8), "a loopback address (127.0.0.0/8)"),
    (Network::v4(169, 254, 0, 0, 16), "a link-local address (169.254.0.0/16)"),
    (Network::v4(172, 16, 0, 0, 12), "a private address (172.16.0.0/12)"),
    (Network::v4(192, 0, 0, 0, 24), "an IETF protocol address (192.0.0.0/24)"),
    (Network::v4(192, 0, 2, 0, 24), "a documentation address (192.0.2.0/24)"),
    (Network::v4(192, 88, 99, 0, 24), "a 6to4 relay address (192.88.99.0/24)"),
    (Network::v4(192, 168, 0, 0, 16), "a private address (192.168.0.0/16)"),
    (Network::v4(198, 18, 0, 0, 15), "a benchmarking address (198.18.0.0/15)"),
    (Network::v4(198, 51, 100, 0, 24), "a documentation address (198.51.100.0/24)"),
    (Network::v4(203, 0, 113, 0, 24), "a documentation address (203.0.113.0/24)"),
    (Network::v4(224, 0, 0, 0, 4), "a multicast address (224.0.0.0/4)"),
    (Network::v4(240, 0, 0, 0, 4), "a reserved or broadcast address (240.0.0.0/4)"),
];

/// IPv6 blocks that are not globally routable. IPv4-mapped addresses are read as IPv4 before
/// these are consulted; NAT64 and 6to4 addresses are judged by the IPv4 address they embed.
const V6_BLOCKS: [(Network, &str); 11] = [
    (Network::v6([0, 0, 0, 0, 0, 0, 0, 0], 128), "the unspecified address (::)"),
    (Network::v6([0, 0, 0, 0, 0, 0, 0, 1], 128), "the loopback address (::1)"),
    (Network::v6([0, 0, 0, 0, 0, 0, 0, 0], 96), "an IPv4-compatible address (::/96, deprecated)"),
    (Network::v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), "a local-use NAT64 address (64:ff9b:1::/48)"),
    (Network::v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), "a discard-only address (100::/64)"),
    (Network::v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32), "a Teredo address (2001::/32)"),
    (Network::v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), "a documentation address (2001:db8::/32)"),
    (Network::v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), "a unique-local address (fc00::/7)"),
    (Network::v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), "a link-local address (fe80::/10)"),
    (Network::v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), "a site-local address (fec0::/10, deprecated)"),
    (Network::v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), "a multicast address (ff00::/8)"),
];

const NAT64: Network = Network::v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96);
const SIX_TO_FOUR: Network = Network::v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16);

/// The special-purpose block `ip` lies in (metadata first), or `None` for a globally routable
/// address. IPv4-mapped IPv6 addresses are judged as the IPv4 address they map.
pub fn special_range(ip: IpAddr) -> Option<&'static str> {
    let ip = ip.to_canonical();
    if METADATA.contains(&ip) {
        return Some("a cloud instance metadata address");
    }
    match ip {
        IpAddr::V4(_) => V4_BLOCKS.iter().find(|(n, _)| n.contains(ip)).map(|(_, what)| *what),
        IpAddr::V6(v6) => {
            let embedded = if NAT64.contains(ip) {
                Some(Ipv4Addr::from((u128::from(v6) & 0xffff_ffff) as u32))
            } else if SIX_TO_FOUR.contains(ip) {
                Some(Ipv4Addr::from((u128::from(v6) >> 80) as u32))
            } else {
                None
            };
            match embedded {
                Some(v4) => special_range(IpAddr::V4(v4)).map(|_| "an address that embeds a refused IPv4 address"),
                None => V6_BLOCKS.iter().find(|(n, _)| n.contains(ip)).map(|(_, what)| *what),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(raw: &str) -> IpAddr {
        raw.parse().unwrap()
    }

    #[test]
    fn addresses_that_are_not_globally_routable_are_refused() {
        let none = AllowedNetworks::default();
        for (address, range) in [
            ("10.0.0.1", "private"),
            ("172.16.5.4", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("100.64.0.1", "carrier-grade NAT"),
            ("100.127.255.255", "carrier-grade NAT"),
            ("127.0.0.1", "loopback"),
            ("127.9.9.9", "loopback"),
            ("169.254.169.254", "metadata"),
            ("169.254.1.1", "link-local"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fe80::1", "link-local"),
            ("fc00::1", "unique-local"),
            ("fd12:3456::1", "unique-local"),
            ("fd00:ec2::254", "metadata"),
            ("ff02::1", "multicast"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:169.254.169.254", "metadata"),
            ("::127.0.0.1", "IPv4-compatible"),
            ("64:ff9b::a00:1", "embeds"),
            ("2002:c0a8:101::1", "embeds"),
        ] {
            let refused = none.check(ip(address)).expect_err(address);
            assert!(refused.range.contains(range), "{address}: {refused}");
            assert_eq!(refused.address, ip(address));
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        let none = AllowedNetworks::default();
        for address in [
            "8.8.8.8",
            "140.82.112.3",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(none.check(ip(address)), Ok(()), "{address}");
        }
    }

    #[test]
    fn an_allowed_network_lets_its_addresses_through_and_no_others() {
        let allowed = AllowedNetworks::parse("127.0.0.0/8, 10.20.0.0/16,fd12:3456::/32").unwrap();
        for address in ["127.0.0.1", "::ffff:127.0.0.1", "10.20.30.40", "fd12:3456:1::1"] {
            assert_eq!(allowed.check(ip(address)), Ok(()), "{address}");
        }
        for address in ["10.21.0.1", "192.168.1.1", "::1", "fd12:3457::1", "169.254.169.254"] {
            assert!(allowed.check(ip(address)).is_err(), "{address}");
        }
    }

    #[test]
    fn a_metadata_address_is_allowed_only_when_named_alone() {
        let broad = AllowedNetworks::parse("0.0.0.0/0, 169.254.0.0/16, ::/0").unwrap();
        assert_eq!(broad.check(ip("169.254.1.1")), Ok(()));
        for address in ["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "100.100.100.200"] {
            assert!(broad.check(ip(address)).is_err(), "{address}");
        }
        let named = AllowedNetworks::parse("169.254.169.254/32").unwrap();
        assert_eq!(named.check(ip("169.254.169.254")), Ok(()));
        assert_eq!(named.check(ip("::ffff:169.254.169.254")), Ok(()));
    }

    #[test]
    fn allowed_networks_are_read_from_a_comma_separated_list() {
        let parsed = AllowedNetworks::parse(" 10.0.0.0/8 ,192.168.1.7, fd00::/8,").unwrap();
        let shown: Vec<String> = parsed.networks().iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["10.0.0.0/8", "192.168.1.7/32", "fd00::/8"]);
        assert_eq!(AllowedNetworks::parse("").unwrap(), AllowedNetworks::default());
        let mapped = AllowedNetworks::parse("::ffff:10.0.0.0/104").unwrap();
        assert_eq!(mapped.networks()[0].to_string(), "10.0.0.0/8");
        assert_eq!(Network::parse("0.0.0.0/0").unwrap().to_string(), "0.0.0.0/0");
        for (bad, says) in [
            ("10.0.0.0/33", "from 0 to 32"),
            ("fd00::/129", "from 0 to 128"),
            ("10.0.0.0/x", "from 0 to 32"),
            ("10.1.2.3/8", "did you mean 10.0.0.0/8?"),
            ("example.com", "not an IP address"),
            ("10.0.0/8", "not an IP address"),
            ("fe80::1%eth0", "not an IP address"),
        ] {
            let message = AllowedNetworks::parse(bad).unwrap_err();
            assert!(message.contains(says) && message.contains(bad), "{bad}: {message}");
        }
        let too_many = vec!["10.0.0.1"; MAX_ALLOWED_NETWORKS + 1].join(",");
        assert!(AllowedNetworks::parse(&too_many).unwrap_err().contains("at most 64"));
    }
}
