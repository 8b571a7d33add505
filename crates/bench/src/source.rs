//! Client source addresses spread across 127.0.0.0/8 with a chosen /24
//! locality, so that per-client policies on the server (DNSBL lookups,
//! connection limits) see many clients grouped in prefixes, as spam
//! botnets are (the spam-aware study: 8,832 /24 prefixes for its IPs).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::BenchError;

/// The set of source addresses a run connects from.
#[derive(Debug, Clone)]
pub struct SourcePlan {
    addrs: Vec<IpAddr>,
}

impl SourcePlan {
    /// No binding: the operating system picks the source address.
    pub fn any() -> SourcePlan {
        SourcePlan { addrs: Vec::new() }
    }

    /// `count` distinct addresses in 127.0.0.0/8, `per_prefix` of them in
    /// each /24 (the last prefix may hold fewer), prefixes drawn from
    /// `seed`. `per_prefix` is 1 to 254 (host parts .1 to .254).
    pub fn spread(count: usize, per_prefix: usize, seed: u64) -> Result<SourcePlan, BenchError> {
        if !(1..=254).contains(&per_prefix) {
            return Err(BenchError::Invalid(format!(
                "addresses per /24 must be 1 to 254, not {per_prefix}"
            )));
        }
        let prefixes = count.div_ceil(per_prefix);
        if prefixes > 65_000 {
            return Err(BenchError::Invalid(format!(
                "{count} sources need {prefixes} /24 prefixes; 127/8 has 65,536"
            )));
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let mut seen = HashSet::new();
        let mut addrs = Vec::with_capacity(count);
        while seen.len() < prefixes {
            let (a, b): (u8, u8) = (rng.gen(), rng.gen());
            if !seen.insert((a, b)) {
                continue;
            }
            let here = per_prefix.min(count - addrs.len());
            for host in 1..=here {
                addrs.push(IpAddr::V4(Ipv4Addr::new(127, a, b, host as u8)));
            }
        }
        Ok(SourcePlan { addrs })
    }

    /// The address for a new connection: `None` means unbound.
    pub fn pick(&self, rng: &mut impl Rng) -> Option<IpAddr> {
        if self.addrs.is_empty() {
            None
        } else {
            Some(self.addrs[rng.gen_range(0..self.addrs.len())])
        }
    }

    /// All addresses of the plan.
    pub fn addrs(&self) -> &[IpAddr] {
        &self.addrs
    }

    /// How many distinct /24 prefixes the plan covers.
    pub fn prefixes(&self) -> usize {
        self.addrs
            .iter()
            .map(|a| match a {
                IpAddr::V4(v4) => {
                    let o = v4.octets();
                    (o[0], o[1], o[2])
                }
                IpAddr::V6(_) => (0, 0, 0),
            })
            .collect::<HashSet<_>>()
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn spread_has_the_asked_shape(count in 1usize..3000, per in 1usize..=254, seed: u64) {
            let plan = SourcePlan::spread(count, per, seed).unwrap();
            prop_assert_eq!(plan.addrs().len(), count);
            let distinct: HashSet<_> = plan.addrs().iter().collect();
            prop_assert_eq!(distinct.len(), count);
            prop_assert_eq!(plan.prefixes(), count.div_ceil(per));
            for a in plan.addrs() {
                let IpAddr::V4(v4) = a else { panic!("v6") };
                prop_assert_eq!(v4.octets()[0], 127);
                prop_assert!(v4.octets()[3] >= 1 && v4.octets()[3] <= 254);
            }
        }
    }

    #[test]
    fn same_seed_same_plan() {
        let a = SourcePlan::spread(500, 16, 9).unwrap();
        let b = SourcePlan::spread(500, 16, 9).unwrap();
        assert_eq!(a.addrs(), b.addrs());
    }

    #[test]
    fn rejects_bad_locality() {
        assert!(SourcePlan::spread(10, 0, 1).is_err());
        assert!(SourcePlan::spread(10, 255, 1).is_err());
    }

    #[test]
    fn unbound_plan_picks_none() {
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(SourcePlan::any().pick(&mut rng), None);
    }
}
