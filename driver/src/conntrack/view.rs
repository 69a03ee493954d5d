//! The host's copy of the connection table as the reference's lookups read it
//! ([`nlb_reference::conntrack::ConnTableView`], which lends entries by reference): the copy
//! is compact, so a view decodes each entry asked for once and keeps it while it lives.

use super::Conntrack;
use nlb_hw::layouts::CtEntry;
use nlb_reference::conntrack::ConnTableView;
use std::cell::OnceCell;

/// [`Conntrack`] as a [`ConnTableView`] ([`Conntrack::view`]): for the lookups of one
/// decision (a punted packet's), not to keep, since every entry read stays decoded in it.
#[derive(Debug)]
pub struct CtView<'a> {
    ct: &'a Conntrack,
    decoded: Decoded,
}

/// Entries decoded so far (index, entry), in chunks that never move once made, so a
/// reference to one lasts as long as the view.
#[derive(Debug, Default)]
struct Decoded {
    cells: [OnceCell<(u32, CtEntry)>; 8],
    next: OnceCell<Box<Decoded>>,
}

impl Decoded {
    /// Entry `index`, decoded by `decode` the first time.
    fn get_or_decode(&self, index: u32, decode: impl FnOnce() -> CtEntry) -> &CtEntry {
        let mut chunk = self;
        loop {
            for cell in &chunk.cells {
                match cell.get() {
                    Some((i, e)) if *i == index => return e,
                    Some(_) => {}
                    None => return &cell.get_or_init(|| (index, decode())).1,
                }
            }
            chunk = chunk.next.get_or_init(Box::default);
        }
    }
}

impl<'a> CtView<'a> {
    pub(super) fn new(ct: &'a Conntrack) -> CtView<'a> {
        CtView {
            ct,
            decoded: Decoded::default(),
        }
    }
}

impl ConnTableView for CtView<'_> {
    fn buckets(&self) -> u32 {
        self.ct.buckets()
    }

    fn ways(&self) -> u32 {
        self.ct.ways()
    }

    fn entry(&self, index: u32) -> Option<&CtEntry> {
        if index as usize >= self.ct.entries.len() {
            return None;
        }
        Some(self.decoded.get_or_decode(index, || self.ct.at(index)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conntrack::{CtTable, PairCounts};
    use nlb_hw::enums::KeyType;
    use nlb_hw::FlowKey;
    use nlb_reference::conntrack as placement;

    /// The reference's lookups over a view find what the manager's own lookup finds, and the
    /// view lends the entries the manager holds, each decoded once.
    #[test]
    fn a_view_lends_the_entries_the_manager_holds() {
        let (buckets, ways) = (16, 4);
        let key = |i: u16| FlowKey {
            key_type: KeyType::Tuple5,
            protocol: 6,
            src_port: 1000 + i,
            dst_port: 80,
            src_addr: 0xffff_c633_0000 + u128::from(i),
            dst_addr: if i.is_multiple_of(3) {
                0x2001_0db8_0000_0000_0000_0000_0000_0050
            } else {
                0xffff_cb00_7150
            },
        };
        let mut table = CtTable::new((buckets * ways) as usize);
        let mut placed = Vec::new();
        for i in 0..40 {
            let k = key(i);
            let start = placement::bucket(&k, buckets) * ways;
            if let Some(at) = (start..start + ways).find(|&a| !table.is_valid(a as usize)) {
                let e = CtEntry {
                    valid: true,
                    protocol: k.protocol,
                    src_port: k.src_port,
                    dst_port: k.dst_port,
                    src_addr: k.src_addr,
                    dst_addr: k.dst_addr,
                    backend: i,
                    rule: 2,
                    flags: 0,
                    timestamp: 5,
                };
                table.set(at as usize, &e);
                placed.push((k, at, e));
            }
        }
        assert!(placed.len() > 20);
        let ct = Conntrack::with_entries(buckets, ways, table, PairCounts::default(), 0);
        let view = ct.view();
        assert_eq!((view.buckets(), view.ways()), (buckets, ways));
        for (k, at, e) in &placed {
            assert_eq!(placement::lookup(&view, k), (*at / ways, Some(*at)));
            assert_eq!(ct.lookup(k), Some(*at));
            assert_eq!(view.entry(*at), Some(e));
        }
        // A flow never installed: found by neither.
        let absent = key(1000);
        assert_eq!(placement::lookup(&view, &absent).1, None);
        assert_eq!(ct.lookup(&absent), None);
        // Every entry, read twice: the same entry, lent from the same place.
        for i in 0..buckets * ways {
            let a = view.entry(i).unwrap();
            assert_eq!(Some(*a), ct.entry(i));
            assert!(std::ptr::eq(a, view.entry(i).unwrap()));
        }
        assert_eq!(view.entry(buckets * ways), None);
    }
}
