//! The contents of one table bank, typed by the regmap layouts.
//!
//! This is the vocabulary every part shares: the compiler builds a [`Tables`], the image
//! format stores one, the driver's loader diffs two of them and writes the difference through
//! the table window, and the golden model and the simulated device execute on them. Entries are
//! addressed the way the table window addresses them: ([`Table`], index).

use crate::blocks::ctrl;
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

/// The layout name of a table's entries (for errors).
fn table_layout_name(table: Table) -> &'static str {
    match table {
        Table::Vip => VipEntry::NAME,
        Table::Rule => RuleEntry::NAME,
        Table::Acl => AclEntry::NAME,
        Table::Pool => PoolEntry::NAME,
        Table::Maglev => MaglevSlot::NAME,
        Table::Backend => BackendEntry::NAME,
    }
}

// A Maglev slot is one field in one word: what `maglev_slot_from_word` decodes.
const _: () = assert!(
    MaglevSlot::WORDS == 1
        && MaglevSlot::BACKEND_LSB + MaglevSlot::BACKEND_WIDTH <= 32
        && MaglevSlot::BACKEND_WIDTH == 16
);

/// [`MaglevSlot::unpack`] of one word, with a shift (it cannot fail: every value of the field
/// is a backend id, and bits past it are ignored).
#[inline]
fn maglev_slot_from_word(w: u32) -> MaglevSlot {
    MaglevSlot {
        backend: (w >> MaglevSlot::BACKEND_LSB) as u16,
    }
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

    /// Appends the packed words of one entry to `out` (no allocation beyond `out`'s).
    pub fn encode_entry(
        &self,
        table: Table,
        index: u32,
        out: &mut Vec<u32>,
    ) -> Result<(), TableError> {
        let i = self.check(table, index)?;
        match table {
            Table::Vip => out.extend_from_slice(&self.vip[i].pack()?),
            Table::Rule => out.extend_from_slice(&self.rules[i].pack()?),
            Table::Acl => out.extend_from_slice(&self.acl[i].pack()?),
            Table::Pool => out.extend_from_slice(&self.pools[i].pack()?),
            // Tens of millions of slots at the production profiles: a shift, not the
            // generated bit-slice code.
            Table::Maglev => out.push(u32::from(self.maglev[i].backend) << MaglevSlot::BACKEND_LSB),
            Table::Backend => out.extend_from_slice(&self.backends[i].pack()?),
        }
        Ok(())
    }

    /// Whether entry `index` of `table` differs between `self` and `other` (an index beyond
    /// one of them but not the other differs; beyond both, it does not).
    pub fn entry_differs(&self, other: &Tables, table: Table, index: u32) -> bool {
        fn at<T: PartialEq>(a: &[T], b: &[T], i: usize) -> bool {
            a.get(i) != b.get(i)
        }
        let i = index as usize;
        match table {
            Table::Vip => at(&self.vip, &other.vip, i),
            Table::Rule => at(&self.rules, &other.rules, i),
            Table::Acl => at(&self.acl, &other.acl, i),
            Table::Pool => at(&self.pools, &other.pools, i),
            Table::Maglev => at(&self.maglev, &other.maglev, i),
            Table::Backend => at(&self.backends, &other.backends, i),
        }
    }

    /// Copies one entry from `from` (same profile); an index beyond either is an error.
    pub fn copy_entry(
        &mut self,
        from: &Tables,
        table: Table,
        index: u32,
    ) -> Result<(), TableError> {
        let i = self.check(table, index)?;
        from.check(table, index)?;
        match table {
            Table::Vip => self.vip[i] = from.vip[i],
            Table::Rule => self.rules[i] = from.rules[i],
            Table::Acl => self.acl[i] = from.acl[i],
            Table::Pool => self.pools[i] = from.pools[i],
            Table::Maglev => self.maglev[i] = from.maglev[i],
            Table::Backend => self.backends[i] = from.backends[i],
        }
        Ok(())
    }

    /// The indices of one table whose entries differ between `self` and `other`, into `out`.
    /// Every load diffs every table (32 Mi Maglev slots at the `u280` profile) while a health
    /// change moves a few hundred entries: equal runs are skipped a chunk at a time.
    pub fn diff_table(&self, other: &Tables, table: Table, out: &mut Vec<u32>) {
        fn changed<T: PartialEq>(a: &[T], b: &[T], out: &mut Vec<u32>) {
            const CHUNK: usize = 512;
            let common = a.len().min(b.len());
            let (a0, b0) = (&a[..common], &b[..common]);
            for (c, (x, y)) in a0.chunks(CHUNK).zip(b0.chunks(CHUNK)).enumerate() {
                // Without an early exit: the compare of a chunk vectorises.
                if x.iter().zip(y).fold(false, |d, (p, q)| d | (p != q)) {
                    let differ = x.iter().zip(y).enumerate().filter(|(_, (p, q))| p != q);
                    out.extend(differ.map(|(k, _)| (c * CHUNK + k) as u32));
                }
            }
            out.extend((common..a.len().max(b.len())).map(|i| i as u32));
        }
        out.clear();
        match table {
            Table::Vip => changed(&self.vip, &other.vip, out),
            Table::Rule => changed(&self.rules, &other.rules, out),
            Table::Acl => changed(&self.acl, &other.acl, out),
            Table::Pool => changed(&self.pools, &other.pools, out),
            Table::Maglev => changed(&self.maglev, &other.maglev, out),
            Table::Backend => changed(&self.backends, &other.backends, out),
        }
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

    /// Replaces a run of entries of one table, from index `first`, from packed words
    /// ([`Tables::entry_words`] each; a partial entry at the end is an error). Attach reads
    /// whole tables back this way: the Maglev slots, tens of millions at the production
    /// profiles, decode with a shift instead of the generated bit-slice code, about ten times
    /// faster. An entry whose words do not decode is left as it was and its index appended to
    /// `bad`; a run past the table's end changes nothing.
    pub fn write_entries(
        &mut self,
        table: Table,
        first: u32,
        words: &[u32],
        bad: &mut Vec<u32>,
    ) -> Result<(), TableError> {
        let per = Tables::entry_words(table);
        let n = words.len() / per;
        if !words.len().is_multiple_of(per) {
            return Err(LayoutError::ShortInput {
                layout: table_layout_name(table),
                words: words.len() % per,
                needed: per,
            }
            .into());
        }
        if n == 0 {
            return Ok(());
        }
        let start = self.check(table, first)?;
        let last = u32::try_from(start + n - 1).unwrap_or(u32::MAX);
        self.check(table, last)?;
        fn run<T>(
            out: &mut [T],
            first: u32,
            words: &[u32],
            per: usize,
            bad: &mut Vec<u32>,
            decode: impl Fn(&[u32]) -> Result<T, LayoutError>,
        ) {
            for (k, (e, w)) in out.iter_mut().zip(words.chunks_exact(per)).enumerate() {
                match decode(w) {
                    Ok(v) => *e = v,
                    Err(_) => bad.push(first + k as u32),
                }
            }
        }
        let range = start..start + n;
        match table {
            Table::Vip => run(
                &mut self.vip[range],
                first,
                words,
                per,
                bad,
                VipEntry::unpack,
            ),
            Table::Rule => run(
                &mut self.rules[range],
                first,
                words,
                per,
                bad,
                RuleEntry::unpack,
            ),
            Table::Acl => run(
                &mut self.acl[range],
                first,
                words,
                per,
                bad,
                AclEntry::unpack,
            ),
            Table::Pool => run(
                &mut self.pools[range],
                first,
                words,
                per,
                bad,
                PoolEntry::unpack,
            ),
            Table::Maglev => {
                for (e, w) in self.maglev[range].iter_mut().zip(words) {
                    *e = maglev_slot_from_word(*w);
                }
            }
            Table::Backend => run(
                &mut self.backends[range],
                first,
                words,
                per,
                bad,
                BackendEntry::unpack,
            ),
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

/// The ctrl registers holding [`NicSettings`], in [`NicSettings::words`] order: each setting's
/// register, a wide setting's registers least significant first.
pub const NIC_REGISTERS: [u32; 11] = {
    let mac = ctrl::local_mac::REGISTERS;
    let v6 = ctrl::outer_src_v6::REGISTERS;
    [
        ctrl::DEFAULT_ACTION,
        mac[0],
        mac[1],
        ctrl::GUE_PORT,
        ctrl::OUTER_SRC_V4,
        ctrl::OUTER_SRC_V4_LEN,
        v6[0],
        v6[1],
        v6[2],
        v6[3],
        ctrl::OUTER_SRC_V6_LEN,
    ]
};

/// Largest `outer_src_v4_len` (the register saturates writes above it).
pub const MAX_V4_PREFIX: u8 = 32;
/// Largest `outer_src_v6_len` (the register saturates writes above it).
pub const MAX_V6_PREFIX: u8 = 128;

impl NicSettings {
    /// The register values, in [`NIC_REGISTERS`] order. A MAC wider than 48 bits or a prefix
    /// length beyond its register is an error.
    pub fn words(&self) -> Result<[u32; 11], LayoutError> {
        let mac = ctrl::local_mac::split(self.local_mac)?;
        let v6 = ctrl::outer_src_v6::split(self.outer_src_v6);
        let v4_len = ctrl::OuterSrcV4Len {
            len: self.outer_src_v4_len,
        }
        .word()?;
        Ok([
            ctrl::DefaultAction {
                action: self.default_action,
            }
            .word(),
            mac[0],
            mac[1],
            ctrl::GuePort {
                port: self.gue_port,
            }
            .word(),
            self.outer_src_v4,
            v4_len,
            v6[0],
            v6[1],
            v6[2],
            v6[3],
            ctrl::OuterSrcV6Len {
                len: self.outer_src_v6_len,
            }
            .word(),
        ])
    }

    /// The settings from register values in [`NIC_REGISTERS`] order; `None` when a value is
    /// not one the registers hold (bits outside their fields, an undefined default action, a
    /// prefix length beyond 32 or 128).
    pub fn from_words(w: &[u32; 11]) -> Option<NicSettings> {
        let clean = NIC_REGISTERS
            .iter()
            .zip(w)
            .all(|(&reg, &v)| v & !crate::blocks::defined(reg) == 0);
        if !clean {
            return None;
        }
        let v4_len = ctrl::OuterSrcV4Len::from_word(w[5]).len;
        let v6_len = ctrl::OuterSrcV6Len::from_word(w[10]).len;
        if v4_len > MAX_V4_PREFIX || v6_len > MAX_V6_PREFIX {
            return None;
        }
        Some(NicSettings {
            default_action: ctrl::DefaultAction::from_word(w[0]).action,
            local_mac: ctrl::local_mac::join([w[1], w[2]]),
            gue_port: ctrl::GuePort::from_word(w[3]).port,
            outer_src_v4: w[4],
            outer_src_v4_len: v4_len,
            outer_src_v6: ctrl::outer_src_v6::join([w[6], w[7], w[8], w[9]]),
            outer_src_v6_len: v6_len,
        })
    }

    /// The settings the ctrl registers hold after reset.
    pub fn reset() -> Option<NicSettings> {
        Self::from_words(&NIC_REGISTERS.map(crate::blocks::reset))
    }
}

impl Default for NicSettings {
    /// The reset values of the ctrl registers (hw/regmap.toml `reset`): what a device holds
    /// before the first load.
    fn default() -> Self {
        // The regmap's reset values are valid settings (checked by the tests below).
        Self::reset().unwrap_or(NicSettings {
            default_action: DefaultAction::Pass,
            local_mac: 0,
            gue_port: 0,
            outer_src_v4: 0,
            outer_src_v4_len: MAX_V4_PREFIX,
            outer_src_v6: 0,
            outer_src_v6_len: MAX_V6_PREFIX,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunked diff of one table finds exactly the entries that differ (as the
    /// entry-by-entry [`Tables::diff`] does): at chunk edges, at both ends, in runs.
    #[test]
    fn a_table_diff_finds_every_changed_entry_and_no_other() {
        let p = Profile::by_name("sim").unwrap();
        let (a, mut b) = (Tables::empty(p), Tables::empty(p));
        let last = b.maglev.len() - 1;
        let picks = [
            0,
            1,
            511,
            512,
            513,
            1023,
            1024,
            2000,
            2001,
            2002,
            last - 1,
            last,
        ];
        for &i in &picks {
            b.maglev[i].backend = (i % 1000) as u16 + 1;
        }
        b.backends[0].valid = true;
        let n = b.backends.len();
        b.backends[n - 1].mac = 7;
        let mut out = Vec::new();
        for table in Table::ALL {
            a.diff_table(&b, table, &mut out);
            let want: Vec<u32> = a
                .diff(&b)
                .into_iter()
                .filter(|(t, _)| *t == table)
                .map(|(_, i)| i)
                .collect();
            assert_eq!(out, want, "{table:?}");
        }
        a.diff_table(&b, Table::Maglev, &mut out);
        let want: Vec<u32> = picks.iter().map(|&i| i as u32).collect();
        assert_eq!(out, want);
        b.diff_table(&b.clone(), Table::Maglev, &mut out);
        assert!(out.is_empty());
    }

    /// A run decoded at once is what the generated code decodes entry by entry (the shift
    /// decode of Maglev slots included), for random words: entries that do not decode (an
    /// enum value the layout lacks) are left alone and reported, whatever the table.
    #[test]
    fn a_run_of_entries_decodes_as_one_entry_at_a_time() {
        let p = Profile::by_name("sim").unwrap();
        let mut x: u32 = 0x9e37_79b9;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for table in Table::ALL {
            let per = Tables::entry_words(table);
            let depth = Tables::empty(p).depth(table);
            let n = 200.min(depth);
            let first = 3;
            let words: Vec<u32> = (0..(n - first) as usize * per).map(|_| rnd()).collect();
            let (mut one, mut run) = (Tables::empty(p), Tables::empty(p));
            let mut want_bad = Vec::new();
            for (k, w) in words.chunks(per).enumerate() {
                let i = first + k as u32;
                if one.write_entry(table, i, w).is_err() {
                    want_bad.push(i);
                }
            }
            let mut bad = Vec::new();
            run.write_entries(table, first, &words, &mut bad).unwrap();
            assert_eq!(run, one, "{table:?}");
            assert_eq!(bad, want_bad, "{table:?}");
            // And encoded back, as the generated code packs them.
            let mut encoded = Vec::new();
            for i in first..n {
                run.encode_entry(table, i, &mut encoded).unwrap();
                assert_eq!(&encoded[..], &run.read_entry(table, i).unwrap()[..]);
                encoded.clear();
            }
            // Past the end, or a partial entry: an error, and nothing written.
            let mut untouched = Tables::empty(p);
            assert!(matches!(
                untouched.write_entries(table, depth - 1, &words[..2 * per], &mut bad),
                Err(TableError::OutOfRange { .. })
            ));
            if per > 1 {
                assert!(untouched
                    .write_entries(table, 0, &words[..per + 1], &mut bad)
                    .is_err());
            }
            assert_eq!(untouched, Tables::empty(p), "{table:?}");
        }
    }

    #[test]
    fn reset_settings_are_the_documented_ones() {
        // docs/regmap.md: MAC 02:00:00:00:00:01, GUE 6080, /32 and /128, PASS.
        let d = NicSettings::reset().expect("the regmap's reset values are valid settings");
        assert_eq!(d, NicSettings::default());
        assert_eq!(d.default_action, DefaultAction::Pass);
        assert_eq!(d.local_mac, 0x02_00_00_00_00_01);
        assert_eq!(d.gue_port, 6080);
        assert_eq!((d.outer_src_v4, d.outer_src_v4_len), (0, 32));
        assert_eq!((d.outer_src_v6, d.outer_src_v6_len), (0, 128));
    }

    #[test]
    fn settings_words_round_trip_and_refuse_what_registers_cannot_hold() {
        let n = NicSettings {
            default_action: DefaultAction::Drop,
            local_mac: 0x0A0B_0C0D_0E0F,
            gue_port: 0xFFFF,
            outer_src_v4: 0xC633_6400,
            outer_src_v4_len: 24,
            outer_src_v6: 0x2001_0db8_0000_0000_0000_0000_0000_0007,
            outer_src_v6_len: 48,
        };
        let w = n.words().unwrap();
        // Hand-worked: the registers in NIC_REGISTERS order.
        assert_eq!(
            w,
            [
                1,
                0x0C0D_0E0F,
                0x0A0B,
                0xFFFF,
                0xC633_6400,
                24,
                7,
                0,
                0,
                0x2001_0db8,
                48
            ]
        );
        assert_eq!(NIC_REGISTERS[2], ctrl::LOCAL_MAC_HI);
        assert_eq!(NIC_REGISTERS[9], ctrl::OUTER_SRC_V6_0);
        assert_eq!(NicSettings::from_words(&w), Some(n));
        let mut bad = w;
        bad[5] = 33;
        assert_eq!(NicSettings::from_words(&bad), None, "v4 prefix 33");
        let mut bad = w;
        bad[2] = 0x1_0A0B;
        assert_eq!(
            NicSettings::from_words(&bad),
            None,
            "bit 16 of local_mac_hi"
        );
        let mut bad = w;
        bad[3] = 0x1_0000;
        assert_eq!(NicSettings::from_words(&bad), None, "a 17-bit GUE port");
        let wide_mac = NicSettings {
            local_mac: 0x1_0000_0000_0000,
            ..n
        };
        assert!(wide_mac.words().is_err());
        let long_v4 = NicSettings {
            outer_src_v4_len: 64,
            ..n
        };
        assert!(long_v4.words().is_err());
    }

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
