//! Pack/unpack of every entry layout.

use nlb_hw::enums::{Affinity, Delivery};
use nlb_hw::layouts::{self, BackendEntry, CtEntry, PoolEntry, PortSlot, VipEntry};
use nlb_hw::model::{Layout, Regmap};
use nlb_hw::LayoutError;
use proptest::prelude::*;

/// Sets every enum field of `layout` (recursively) at bit offset `base` to a valid value
/// chosen by `pick`, so that arbitrary words become a valid encoding.
fn legalise(map: &Regmap, layout: &Layout, base: usize, words: &mut [u32], pick: u32) {
    for p in map.place(layout) {
        if let Some(inner) = &p.field.layout {
            let inner = map.layout(inner).unwrap();
            for i in 0..p.count as usize {
                legalise(
                    map,
                    inner,
                    base + p.lsb as usize + i * p.elem_width as usize,
                    words,
                    pick,
                );
            }
        } else if let Some(e) = &p.field.enum_name {
            let def = map.enum_def(e).unwrap();
            let value = def.values[pick as usize % def.values.len()].value;
            for bit in 0..p.elem_width as usize {
                let at = base + p.lsb as usize + bit;
                let set = (value >> bit) & 1 == 1;
                if set {
                    words[at / 32] |= 1 << (at % 32);
                } else {
                    words[at / 32] &= !(1 << (at % 32));
                }
            }
        }
    }
}

fn regmap() -> Regmap {
    Regmap::parse(nlb_hw::REGMAP_TOML).unwrap()
}

proptest! {
    /// Every layout: arbitrary field values (as arbitrary bit patterns of the entry) unpack
    /// and pack back to the same words.
    #[test]
    fn every_layout_round_trips(seed in proptest::collection::vec(any::<u32>(), 64), pick in any::<u32>()) {
        let map = regmap();
        for l in &map.layouts {
            let width = map.layout_width(l) as usize;
            let mut words: Vec<u32> = seed[..width.div_ceil(32)].to_vec();
            if !width.is_multiple_of(32) {
                *words.last_mut().unwrap() &= (1u32 << (width % 32)) - 1;
            }
            legalise(&map, l, 0, &mut words, pick);
            let again = layouts::repack(&l.name, &words).unwrap();
            prop_assert_eq!(again, Ok(words.clone()), "layout {}", l.name);
        }
    }

    /// Typed values: pack succeeds exactly when every field fits, and then unpack gives the
    /// same value back.
    #[test]
    fn pool_entry_fits_or_refuses(base in any::<u32>(), size in any::<u32>(), backup in any::<u16>(),
                                  ratio in any::<u16>(), timeout in any::<u16>(), aff in 0usize..5, del in 0usize..3) {
        let e = PoolEntry {
            valid: true,
            affinity: Affinity::ALL[aff],
            delivery: Delivery::ALL[del],
            maglev_base: base,
            maglev_size: size,
            backup_pool: backup,
            has_backup: true,
            failover_ratio: ratio,
            failed_over: false,
            track: true,
            idle_timeout: timeout,
        };
        let fits = base < (1 << 24) && size < (1 << 17) && backup < (1 << 12) && ratio < (1 << 10);
        match e.pack() {
            Ok(w) => {
                prop_assert!(fits);
                prop_assert_eq!(PoolEntry::unpack(&w).unwrap(), e);
            }
            Err(LayoutError::Overflow { layout, .. }) => {
                prop_assert!(!fits);
                prop_assert_eq!(layout, "pool_entry");
            }
            Err(other) => prop_assert!(false, "unexpected {other}"),
        }
    }

    #[test]
    fn vip_entry_round_trips(addr in any::<u128>(), proto in any::<u8>(),
                             slots in proptest::collection::vec((any::<bool>(), any::<u16>(), any::<u16>(), 0u16..4096), 4)) {
        let mut e = VipEntry { valid: true, protocol: proto, addr, ..VipEntry::default() };
        for (s, (v, lo, hi, rule)) in e.slot.iter_mut().zip(slots) {
            *s = PortSlot { valid: v, port_lo: lo, port_hi: hi, rule };
        }
        let w = e.pack().unwrap();
        prop_assert_eq!(VipEntry::unpack(&w).unwrap(), e);
    }

    #[test]
    fn backend_and_ct_round_trip(addr in any::<u128>(), mac in 0u64..(1 << 48), b in any::<u16>(),
                                 r in 0u16..4096, ts in any::<u32>(), sp in any::<u16>()) {
        let be = BackendEntry { valid: true, is_ipv6: addr >> 32 != 0xffff, addr, mac };
        prop_assert_eq!(BackendEntry::unpack(&be.pack().unwrap()).unwrap(), be);
        let ct = CtEntry { valid: true, protocol: 6, src_port: sp, dst_port: 80, src_addr: addr,
                           dst_addr: !addr, backend: b, rule: r, flags: 1, timestamp: ts };
        prop_assert_eq!(CtEntry::unpack(&ct.pack().unwrap()).unwrap(), ct);
    }
}

#[test]
fn values_that_do_not_fit_are_errors_not_truncation() {
    let slot = PortSlot {
        rule: 4096,
        ..PortSlot::default()
    };
    assert!(matches!(
        slot.pack(),
        Err(LayoutError::Overflow {
            field: "rule",
            width: 12,
            ..
        })
    ));
    let be = BackendEntry {
        mac: 1 << 48,
        ..BackendEntry::default()
    };
    let err = be.pack().unwrap_err();
    assert!(err.to_string().contains("backend_entry.mac"), "{err}");
    // Nested: an overflow inside slot 3 of a VIP entry is reported, not dropped.
    let mut vip = VipEntry::default();
    vip.slot[3].rule = 5000;
    assert!(vip.pack().is_err());
}

#[test]
fn bad_enum_values_are_refused_on_unpack() {
    let mut w = PoolEntry::default().pack().unwrap();
    // affinity occupies bits 3..1; 7 is not a defined affinity.
    w[0] |= 7 << PoolEntry::AFFINITY_LSB;
    let err = PoolEntry::unpack(&w).unwrap_err();
    assert!(err.to_string().contains("CLIENT_IP_PROTO"), "{err}");
    assert!(matches!(
        PoolEntry::unpack(&w[..0]),
        Err(LayoutError::ShortInput { .. })
    ));
}
