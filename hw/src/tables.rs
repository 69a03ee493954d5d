//! The contents of one table bank, typed by the regmap layouts.
//!
//! This is the vocabulary every part shares: the compiler builds a [`Tables`], the image
//! format stores one, the driver's loader diffs two of them and writes the difference through
//! the table window, and the golden model and the simulated device execute on them. Entries are
//! addressed the way the table window addresses them: ([`Table`], index).

use crate::enums::{DefaultAction, Table};
use crate::layouts::{AclEntry, BackendEntry, MaglevSlot, PoolEntry, RuleEntry, VipEntry};
use crate::{LayoutError, Profile};

/// Why an entry could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// Index beyond the table depth of the profile.
    #[error("{table:?} index {index} is out of range (the {profile} profile has {depth} entries)")]
    OutOfRange {
        /// Table.
        table: Table,
        /// Index given.
        index: u32,
        /// Depth of the table.
        depth: u32,
        /// Profile name.
        profile: &'static str,
    },
    /// The words do not encode a valid entry.
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// One bank: every table the pipeline reads, at the depths of a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    /// The profile fixing the depths.
    pub profile: &'static Profile,
    /// VIP table, `vip_buckets × vip_ways`, index = bucket × ways + way.
    pub vip: Vec<VipEntry>,
    /// Rule descriptors, by rule id.
    pub rules: Vec<RuleEntry>,
    /// Per-rule source allow-lists, by rule id.
    pub acl: Vec<AclEntry>,
    /// Pool descriptors, by pool id.
    pub pools: Vec<PoolEntry>,
    /// Maglev slot memory.
    pub maglev: Vec<MaglevSlot>,
    /// Backends, by backend id.
    pub backends: Vec<BackendEntry>,
}

impl Tables {
    /// All-invalid tables of a profile's depths.
    pub fn empty(profile: &'static Profile) -> Tables {
        Tables {
            profile,
            vip: vec![VipEntry::default(); profile.vip_entries() as usize],
            rules: vec![RuleEntry::default(); profile.rules as usize],
            acl: vec![AclEntry::default(); profile.rules as usize],
            pools: vec![PoolEntry::default(); profile.pools as usize],
            maglev: vec![MaglevSlot::default(); profile.maglev_slots as usize],
            backends: vec![BackendEntry::default(); profile.backends as usize],
        }
    }

    /// Depth of a table.
    pub fn depth(&self, table: Table) -> u32 {
        match table {
            Table::Vip => self.vip.len() as u32,
            Table::Rule => self.rules.len() as u32,
            Table::Acl => self.acl.len() as u32,
            Table::Pool => self.pools.len() as u32,
            Table::Maglev => self.maglev.len() as u32,
            Table::Backend => self.backends.len() as u32,
        }
    }

    /// Words per entry of a table.
    pub fn entry_words(table: Table) -> usize {
        match table {
            Table::Vip => VipEntry::WORDS,
            Table::Rule => RuleEntry::WORDS,
            Table::Acl => AclEntry::WORDS,
            Table::Pool => PoolEntry::WORDS,
            Table::Maglev => MaglevSlot::WORDS,
            Table::Backend => BackendEntry::WORDS,
        }
    }

    fn check(&self, table: Table, index: u32) -> Result<usize, TableError> {
        let depth = self.depth(table);
        if index >= depth {
            return Err(TableError::OutOfRange {
                table,
                index,
                depth,
                profile: self.profile.name,
            });
        }
        Ok(index as usize)
    }

    /// The packed words of one entry.
    pub fn read_entry(&self, table: Table, index: u32) -> Result<Vec<u32>, TableError> {
        let i = self.check(table, index)?;
        Ok(match table {
            Table::Vip => self.vip[i].pack()?.to_vec(),
            Table::Rule => self.rules[i].pack()?.to_vec(),
            Table::Acl => self.acl[i].pack()?.to_vec(),
            Table::Pool => self.pools[i].pack()?.to_vec(),
            Table::Maglev => self.maglev[i].pack()?.to_vec(),
            Table::Backend => self.backends[i].pack()?.to_vec(),
        })
    }

    /// Replaces one entry from packed words; nothing changes on error.
    pub fn write_entry(
        &mut self,
        table: Table,
        index: u32,
        words: &[u32],
    ) -> Result<(), TableError> {
        let i = self.check(table, index)?;
        match table {
            Table::Vip => self.vip[i] = VipEntry::unpack(words)?,
            Table::Rule => self.rules[i] = RuleEntry::unpack(words)?,
            Table::Acl => self.acl[i] = AclEntry::unpack(words)?,
            Table::Pool => self.pools[i] = PoolEntry::unpack(words)?,
            Table::Maglev => self.maglev[i] = MaglevSlot::unpack(words)?,
            Table::Backend => self.backends[i] = BackendEntry::unpack(words)?,
        }
        Ok(())
    }

    /// Every (table, index) whose entry differs between `self` and `other` (same profile).
    pub fn diff(&self, other: &Tables) -> Vec<(Table, u32)> {
        fn changed<T: PartialEq>(t: Table, a: &[T], b: &[T], out: &mut Vec<(Table, u32)>) {
            let n = a.len().max(b.len());
            for i in 0..n {
                if a.get(i) != b.get(i) {
                    out.push((t, i as u32));
                }
            }
        }
        let mut out = Vec::new();
        changed(Table::Vip, &self.vip, &other.vip, &mut out);
        changed(Table::Rule, &self.rules, &other.rules, &mut out);
        changed(Table::Acl, &self.acl, &other.acl, &mut out);
        changed(Table::Pool, &self.pools, &other.pools, &mut out);
        changed(Table::Maglev, &self.maglev, &other.maglev, &mut out);
        changed(Table::Backend, &self.backends, &other.backends, &mut out);
        out
    }
}

/// NIC-wide settings held in the `ctrl` register block (not banked): what the compiler derives
/// from the config's `nic` section and the loader writes before flipping a bank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicSettings {
    /// What to do with packets matching no rule.
    pub default_action: DefaultAction,
    /// The NIC's MAC: source MAC of forwarded frames.
    pub local_mac: u64,
    /// UDP destination port of GUE encapsulation.
    pub gue_port: u16,
    /// Outer IPv4 source prefix for IPIP/GUE (host bits from the flow hash).
    pub outer_src_v4: u32,
    /// Its length, 0..=32.
    pub outer_src_v4_len: u8,
    /// Outer IPv6 source prefix.
    pub outer_src_v6: u128,
    /// Its length, 0..=128.
    pub outer_src_v6_len: u8,
}

impl Default for NicSettings {
    fn default() -> Self {
        NicSettings {
            default_action: DefaultAction::Pass,
            local_mac: 0x02_00_00_00_00_01,
            gue_port: 6080,
            outer_src_v4: 0,
            outer_src_v4_len: 32,
            outer_src_v6: 0,
            outer_src_v6_len: 128,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_and_diff() {
        let p = Profile::by_name("sim").unwrap();
        let a = Tables::empty(p);
        let mut b = a.clone();
        let be = BackendEntry {
            valid: true,
            is_ipv6: false,
            addr: 0xffff_c000_0201,
            mac: 0x0200_0000_0002,
        };
        b.write_entry(Table::Backend, 7, &be.pack().unwrap())
            .unwrap();
        assert_eq!(b.backends[7], be);
        assert_eq!(a.diff(&b), vec![(Table::Backend, 7)]);
        assert_eq!(
            b.read_entry(Table::Backend, 7).unwrap(),
            be.pack().unwrap().to_vec()
        );
        let err = b.write_entry(Table::Rule, p.rules, &[0]).unwrap_err();
        assert!(err.to_string().contains("out of range"), "{err}");
        assert!(
            b.write_entry(Table::Vip, 0, &[1]).is_err(),
            "short input refused"
        );
        assert_eq!(b.backends[7], be, "nothing changed on error");
    }
}
