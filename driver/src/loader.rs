//! The table loader: atomic, incremental loads of a table image into the two banks.
//!
//! The pipeline reads the bank `ctrl.active_bank` names, latched per packet. A load writes
//! the other (inactive) bank through the table window, only the entries whose contents
//! differ from what that bank holds (the loader keeps a shadow of both banks), reads every
//! written entry back, writes the NIC settings, then flips `active_bank` with one register
//! write and bumps `generation`. Nothing before the flip touches the serving bank, so an
//! error, or a loader killed at any point, leaves the previous table serving; the flip
//! itself is a single write, so every packet sees either the old or the new table whole.
//!
//! Before a bank is written again it must be free of packets that latched it: the loader
//! polls `ctrl.bank_in_use` (bounded) before its first write.
//!
//! On attach (first use after a start or restart) the shadow is rebuilt by reading both banks
//! back from the device ([`Loader::attach`]); entries whose write was interrupted are marked
//! suspect and always rewritten.
//!
//! # Register writes per entry
//! For each changed entry: the data words that differ from what the window already holds,
//! then one `cmd` WRITE_AT carrying the index (`table::Cmd`). The device leaves the stored entry in the data words
//! after a write, so verification reads `status`, `index` (the command ran) and the data words
//! back: no write. Entries of
//! a table are written grouped by value, so a run of entries that receive the same value (the
//! Maglev slots of a failed backend moving to the same survivor) cost one write each after the
//! first. Add one `select` per table and bank touched. [`LoadReport`] counts update,
//! verification and control writes separately.

use crate::device::{Batch, Device, DeviceError};
use crate::rings::{HostRings, RingError, COMMAND_TIMEOUT, ROW_ALIGN};
use nlb_hw::blocks::{ctrl, table as win};
use nlb_hw::enums::{DmaCmd, Table, TableCmd};
use nlb_hw::layouts::CmdDesc;
use nlb_hw::{LayoutError, NicSettings, Profile, Tables, NIC_REGISTERS};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Why a load (or the recovery read) failed. Every error before the flip leaves the
/// previous table serving.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Register access failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The image was built against another register map version.
    #[error(
        "the image was built for regmap version {image}, this driver speaks version {driver}: \
         recompile it with this release's `nlbctl compile`"
    )]
    ImageRegmap {
        /// Version in the image header.
        image: u32,
        /// Version of this driver.
        driver: u32,
    },
    /// The image was compiled for another capacity profile.
    #[error(
        "the image was compiled for the `{image}` profile but the device has the `{device}` \
         profile; recompile with `--profile {device}`"
    )]
    ProfileMismatch {
        /// Profile of the image.
        image: &'static str,
        /// Profile of the device.
        device: &'static str,
    },
    /// An entry of the image does not encode (a field too wide for its layout).
    #[error("{table:?} entry {index} of the image cannot be encoded: {source}")]
    Encode {
        /// Table.
        table: Table,
        /// Index.
        index: u32,
        /// Why.
        #[source]
        source: LayoutError,
    },
    /// The table window reported an error for a command.
    #[error("the table window refused {op} of {table:?} entry {index} in bank {bank}")]
    Window {
        /// Table.
        table: Table,
        /// Bank.
        bank: u8,
        /// Index.
        index: u32,
        /// `write` or `read`.
        op: &'static str,
    },
    /// The window's `index` does not show the WRITE_AT just issued: the command did not run.
    #[error(
        "the table window did not run WRITE_AT of {table:?} entry {index} in bank {bank} \
         (its index register reads {found})"
    )]
    NotExecuted {
        /// Table.
        table: Table,
        /// Bank.
        bank: u8,
        /// Index written.
        index: u32,
        /// What `index` read.
        found: u32,
    },
    /// Read-back differs from what was written.
    #[error(
        "read-back of {table:?} entry {index} in bank {bank} differs: wrote {wrote:08x?}, read \
         {read:08x?}"
    )]
    Verify {
        /// Table.
        table: Table,
        /// Bank.
        bank: u8,
        /// Index.
        index: u32,
        /// Words written.
        wrote: Vec<u32>,
        /// Words read back.
        read: Vec<u32>,
    },
    /// The image's NIC settings do not fit the ctrl registers.
    #[error("the image's NIC settings cannot be written: {0}")]
    Settings(#[source] LayoutError),
    /// A NIC setting did not read back as written.
    #[error("ctrl register {offset:#x} reads {read:#x} after writing {wrote:#x}")]
    NicVerify {
        /// Register.
        offset: u32,
        /// Written.
        wrote: u32,
        /// Read back.
        read: u32,
    },
    /// The flip did not take.
    #[error("active_bank reads {read} after writing {wrote}")]
    Flip {
        /// Bank written.
        wrote: u8,
        /// Bank read back.
        read: u8,
    },
    /// `active_bank` or `generation` changed without this loader: another loader is at work.
    #[error(
        "active_bank is {found} (this loader last set {expected}) or the generation moved: \
         another loader is writing this device; stop it, then attach again"
    )]
    ActiveBankMoved {
        /// What this loader set.
        expected: u8,
        /// What the device says.
        found: u8,
    },
    /// The command ring failed (loads and read-backs by DMA).
    #[error(transparent)]
    Rings(#[from] RingError),
    /// Packets latched on the inactive bank did not drain.
    #[error("bank {bank} still had packets in flight after {waited:?}; nothing was written")]
    BankBusy {
        /// Bank.
        bank: u8,
        /// How long the loader waited.
        waited: Duration,
    },
}

/// Loader tuning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderOptions {
    /// How long to wait for the inactive bank to drain.
    pub drain_timeout: Duration,
    /// Poll interval while waiting.
    pub drain_poll: Duration,
    /// Entries per register batch (one socket message for the socket backend).
    pub batch_entries: usize,
    /// Set `ctrl.enable` after the flip if the pipeline is disabled.
    pub enable_pipeline: bool,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        LoaderOptions {
            drain_timeout: Duration::from_secs(1),
            drain_poll: Duration::from_micros(100),
            batch_entries: 1024,
            enable_pipeline: true,
        }
    }
}

/// What one load did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// The bank now serving.
    pub bank: u8,
    /// The generation written with the flip.
    pub generation: u32,
    /// Entries written (those that differed from the bank's contents, plus suspects).
    pub changed_entries: usize,
    /// Changed entries per table, in `Table::ALL` order.
    pub changed_by_table: Vec<(Table, usize)>,
    /// Writes that updated the bank: `select`, data words, `cmd = WRITE_AT`.
    pub update_writes: u64,
    /// Writes made only to verify (0: a write leaves the stored entry in the window, so the
    /// read-back is reads only).
    pub verify_writes: u64,
    /// NIC settings, `active_bank`, `generation`, `enable`.
    pub control_writes: u64,
    /// Register reads.
    pub reads: u64,
    /// Commands of the command ring (loads by DMA: a write and a read-back per chunk).
    pub commands: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// The device had been reset since the last load: the shadow was read back first.
    pub resynced: bool,
}

impl LoadReport {
    /// Every register write of the load.
    pub fn total_writes(&self) -> u64 {
        self.update_writes + self.verify_writes + self.control_writes
    }
}

/// The ctrl registers that hold [`NicSettings`] ([`NIC_REGISTERS`]), then `enable`: what the
/// loader keeps track of, in write order.
const NIC_REGS: [u32; 12] = {
    let mut r = [ctrl::ENABLE; 12];
    let mut i = 0;
    while i < NIC_REGISTERS.len() {
        r[i] = NIC_REGISTERS[i];
        i += 1;
    }
    r
};

/// Register values of [`NicSettings`], in [`NIC_REGS`] order (without ENABLE).
pub fn nic_words(n: &NicSettings) -> Result<[u32; 11], LayoutError> {
    n.words()
}

/// [`NicSettings`] from register values in [`NIC_REGS`] order; `None` if a value is invalid.
pub fn nic_from_words(w: &[u32]) -> Option<NicSettings> {
    NicSettings::from_words(w.get(..NIC_REGISTERS.len())?.try_into().ok()?)
}

/// Depth of a table in a profile.
pub fn table_depth(profile: &Profile, table: Table) -> u32 {
    match table {
        Table::Vip => profile.vip_entries(),
        Table::Rule | Table::Acl => profile.rules,
        Table::Pool => profile.pools,
        Table::Maglev => profile.maglev_slots,
        Table::Backend => profile.backends,
    }
}

fn select_word(table: Table, bank: u8) -> u32 {
    win::Select {
        table,
        bank: bank == 1,
    }
    .word()
}

/// Largest entry index a `cmd` write can carry (its `index` field).
pub const CMD_INDEX_MAX: u32 = win::cmd::INDEX.max();

/// The `cmd` word of a command on entry `index` (WRITE_AT / READ_AT); `None` if the index does
/// not fit its field.
pub fn cmd_at(cmd: TableCmd, index: u32) -> Option<u32> {
    win::Cmd { op: cmd, index }.word().ok()
}

/// The whole memory rows (of [`ROW_ALIGN`] Maglev slots) that hold the sorted indices `idx`,
/// every slot of each, in order; within a table of `depth` slots.
fn whole_rows(idx: &[u32], depth: u32) -> Vec<u32> {
    let mut out = Vec::with_capacity(idx.len());
    let mut last = None;
    for &i in idx {
        let row = i / ROW_ALIGN;
        if last != Some(row) {
            last = Some(row);
            out.extend(row * ROW_ALIGN..((row + 1) * ROW_ALIGN).min(depth));
        }
    }
    out
}

/// How a table's sorted indices go out: runs of at least [`ROW_ALIGN`] consecutive indices as
/// ranges of at most `per` entries (`per` a multiple of it, so that a run from a memory row
/// stays on rows), returned as positions in `idx`; every other index returned apart, for index
/// lists.
fn plan_chunks(idx: &[u32], per: usize) -> (Vec<std::ops::Range<usize>>, Vec<u32>) {
    let mut ranges = Vec::new();
    let mut scattered = Vec::new();
    let mut start = 0;
    while start < idx.len() {
        let mut end = start + 1;
        while end < idx.len() && idx[end] == idx[end - 1] + 1 {
            end += 1;
        }
        if end - start >= ROW_ALIGN as usize {
            ranges.extend((start..end).step_by(per).map(|a| a..(a + per).min(end)));
        } else {
            scattered.extend_from_slice(&idx[start..end]);
        }
        start = end;
    }
    (ranges, scattered)
}

fn encode_error(e: nlb_hw::TableError, table: Table, bank: u8, index: u32) -> LoadError {
    match e {
        nlb_hw::TableError::Layout(source) => LoadError::Encode {
            table,
            index,
            source,
        },
        nlb_hw::TableError::OutOfRange { .. } => LoadError::Window {
            table,
            bank,
            index,
            op: "write",
        },
    }
}

/// Keeps both banks of one device in step with the images given to it.
#[derive(Debug)]
pub struct Loader {
    profile: &'static Profile,
    shadow: [Tables; 2],
    /// Entries whose device contents are unknown (write interrupted, unreadable): always
    /// rewritten. Keyed by (table value, index).
    suspect: [BTreeSet<(u32, u32)>; 2],
    /// Per bank, the entries where its shadow may differ from the tables of the last
    /// successful load (sorted; `None`: not known, so a load diffs whole tables). With the
    /// changes a load is given ([`Loader::load_changed`]), a health change's load compares
    /// a few hundred entries instead of every table (32 Mi Maglev slots at the `u280`
    /// profile).
    behind: [Option<Vec<(Table, u32)>>; 2],
    /// The entries the load in progress may change against the last load's tables.
    hint: Option<Vec<(Table, u32)>>,
    /// Last known ctrl register values ([`NIC_REGS`] order); `None` = unknown.
    nic: [Option<u32>; 12],
    active: u8,
    generation: u32,
    flip_uncertain: bool,
    opts: LoaderOptions,
    batch: Batch,
}

impl Loader {
    /// Attaches to a device: reads `active_bank`, `generation`, the NIC settings and both
    /// banks, so that the shadow matches the device whatever happened before (recovery).
    pub fn attach<D: Device + ?Sized>(
        dev: &mut D,
        profile: &'static Profile,
        opts: LoaderOptions,
    ) -> Result<Loader, LoadError> {
        if let Some((d, rings)) = crate::rings::split_commands(dev) {
            return Loader::attach_dma(d, rings, profile, opts);
        }
        let mut loader = Loader {
            profile,
            shadow: [Tables::empty(profile), Tables::empty(profile)],
            suspect: [BTreeSet::new(), BTreeSet::new()],
            behind: [None, None],
            hint: None,
            nic: [None; 12],
            active: 0,
            generation: 0,
            flip_uncertain: false,
            opts,
            batch: Batch::new(),
        };
        loader.read_control(dev)?;
        for bank in 0..2 {
            loader.read_bank(dev, bank)?;
        }
        Ok(loader)
    }

    /// [`Loader::attach`] reading both banks by DMA through the command ring (a handful of
    /// register reads for the ctrl block, none per entry: SPEC R12.4).
    pub fn attach_dma<D: Device + ?Sized>(
        dev: &mut D,
        rings: &mut HostRings,
        profile: &'static Profile,
        opts: LoaderOptions,
    ) -> Result<Loader, LoadError> {
        let mut loader = Loader::attach_empty(profile, opts);
        loader.read_control(dev)?;
        for bank in 0..2 {
            loader.read_bank_dma(dev, rings, bank)?;
        }
        Ok(loader)
    }

    fn attach_empty(profile: &'static Profile, opts: LoaderOptions) -> Loader {
        Loader {
            profile,
            shadow: [Tables::empty(profile), Tables::empty(profile)],
            suspect: [BTreeSet::new(), BTreeSet::new()],
            behind: [None, None],
            hint: None,
            nic: [None; 12],
            active: 0,
            generation: 0,
            flip_uncertain: false,
            opts,
            batch: Batch::new(),
        }
    }

    /// Reads a whole bank into its shadow by DMA: TABLE_READ runs of the data area's size.
    fn read_bank_dma<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: &mut HostRings,
        bank: u8,
    ) -> Result<(), LoadError> {
        let b = usize::from(bank);
        self.suspect[b].clear();
        self.behind[b] = None;
        let mut data = Vec::new();
        let mut bad = Vec::new();
        for table in Table::ALL {
            let depth = table_depth(self.profile, table);
            let words = Tables::entry_words(table);
            let per = rings.run_entries(words) as u32;
            let mut first = 0;
            while first < depth {
                let n = (depth - first).min(per);
                rings.submit(&CmdDesc {
                    op: DmaCmd::TableRead,
                    table,
                    bank: bank == 1,
                    count: n,
                    index: first,
                    addr: rings.data_iova(0),
                    ..CmdDesc::default()
                })?;
                rings.execute(dev, COMMAND_TIMEOUT)?;
                data.resize(n as usize * words, 0);
                rings.read_data(0, &mut data)?;
                bad.clear();
                if self.shadow[b]
                    .write_entries(table, first, &data, &mut bad)
                    .is_err()
                {
                    // Not within the shadow's table (it has the profile's depth, as the run):
                    // whatever the run held, it is not known; rewrite it.
                    bad.extend(first..first + n);
                }
                // Garbage in the memory (never written since power-up): rewrite it.
                self.suspect[b].extend(bad.iter().map(|&i| (table.value(), i)));
                first += n;
            }
        }
        Ok(())
    }

    /// The bank serving now.
    pub fn active_bank(&self) -> u8 {
        self.active
    }

    /// The generation of the serving table.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// What the loader believes a bank holds.
    pub fn shadow(&self, bank: u8) -> &Tables {
        &self.shadow[usize::from(bank & 1)]
    }

    /// The capacity profile of the device.
    pub fn profile(&self) -> &'static Profile {
        self.profile
    }

    /// Entries of a bank whose device contents are unknown.
    pub fn suspect_entries(&self, bank: u8) -> usize {
        self.suspect[usize::from(bank & 1)].len()
    }

    fn read_control<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<(), LoadError> {
        self.batch.read(ctrl::ACTIVE_BANK).read(ctrl::GENERATION);
        for reg in NIC_REGS {
            self.batch.read(reg);
        }
        let r = self.batch.run(dev)?;
        self.active = u8::from(ctrl::ActiveBank::from_word(r[0]).bank);
        self.generation = r[1];
        for (slot, v) in self.nic.iter_mut().zip(&r[2..]) {
            *slot = Some(*v);
        }
        if nic_from_words(&r[2..]).is_none() {
            // An invalid setting on the device: write all of them at the next load.
            self.nic = [None; 12];
        }
        Ok(())
    }

    /// Reads a whole bank into its shadow.
    fn read_bank<D: Device + ?Sized>(&mut self, dev: &mut D, bank: u8) -> Result<(), LoadError> {
        let b = usize::from(bank);
        self.suspect[b].clear();
        self.behind[b] = None;
        for table in Table::ALL {
            let depth = table_depth(self.profile, table);
            if depth > CMD_INDEX_MAX + 1 {
                // No profile has such a table (tested); refuse rather than alias entries.
                return Err(LoadError::Window {
                    table,
                    bank,
                    index: CMD_INDEX_MAX + 1,
                    op: "read",
                });
            }
            let words = Tables::entry_words(table);
            self.batch.write(win::SELECT, select_word(table, bank));
            let step = self.opts.batch_entries.max(1) as u32;
            let mut first = 0;
            while first < depth {
                let last = (first + step).min(depth);
                for i in first..last {
                    // `depth` was checked against CMD_INDEX_MAX above.
                    let cmd = cmd_at(TableCmd::ReadAt, i).unwrap_or_default();
                    self.batch
                        .write(win::CMD, cmd)
                        .read(win::STATUS)
                        .read_words(win::DATA, words as u32);
                }
                let r = self.batch.run(dev)?;
                for (k, i) in (first..last).enumerate() {
                    let at = k * (words + 1);
                    let (status, data) = (r[at], &r[at + 1..at + 1 + words]);
                    if win::Status::from_word(status).error {
                        return Err(LoadError::Window {
                            table,
                            bank,
                            index: i,
                            op: "read",
                        });
                    }
                    if self.shadow[b].write_entry(table, i, data).is_err() {
                        // Garbage in the memory (never written since power-up): rewrite it.
                        self.suspect[b].insert((table.value(), i));
                    }
                }
                first = last;
            }
        }
        Ok(())
    }

    /// Loads `tables` and `nic` into the device and makes them serve (by DMA when the device
    /// has host rings, [`Device::split_rings`]).
    pub fn load<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        tables: &Tables,
        nic: &NicSettings,
    ) -> Result<LoadReport, LoadError> {
        if let Some((d, rings)) = crate::rings::split_commands(dev) {
            return self.load_via(d, Some(rings), tables, nic, true);
        }
        self.load_via(dev, None, tables, nic, true)
    }

    /// [`Loader::load`] of tables that differ from those of this loader's last successful
    /// load at most in `changed` (the entries a recompile reports,
    /// `flowtable_compiler::Compiled::recompile_pool`): only those, and the entries the
    /// bank being written was still behind on, are compared with its shadow. An entry that
    /// changed but is not in `changed` is not written: the caller vouches for the list.
    pub fn load_changed<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        tables: &Tables,
        nic: &NicSettings,
        changed: &[(Table, u32)],
    ) -> Result<LoadReport, LoadError> {
        let mut hint = changed.to_vec();
        hint.sort_unstable_by_key(|&(t, i)| (t.value(), i));
        hint.dedup();
        self.hint = Some(hint);
        let r = self.load(dev, tables, nic);
        self.hint = None;
        r
    }

    /// The indices of `table` where bank `t`'s shadow differs from `tables`, into `out`
    /// (sorted): from the entries it is behind on and the load's hint where both are known,
    /// else a compare of the whole table.
    fn changed_indices(&self, t: usize, tables: &Tables, table: Table, out: &mut Vec<u32>) {
        let (Some(behind), Some(hint)) = (&self.behind[t], &self.hint) else {
            self.shadow[t].diff_table(tables, table, out);
            return;
        };
        out.clear();
        let of_table = |v: &Vec<(Table, u32)>| {
            v.iter()
                .filter(move |(tb, _)| *tb == table)
                .map(|&(_, i)| i)
                .collect::<Vec<u32>>()
        };
        out.extend(of_table(behind));
        out.extend(of_table(hint));
        out.sort_unstable();
        out.dedup();
        out.retain(|&i| self.shadow[t].entry_differs(tables, table, i));
        // Tests run with debug assertions: there the hint is checked against the whole table.
        debug_assert_eq!(
            *out,
            {
                let mut all = Vec::new();
                self.shadow[t].diff_table(tables, table, &mut all);
                all
            },
            "a load's hint left out a changed entry of {table:?}"
        );
    }

    /// After a successful load of `tables` into bank `target`: it is behind on nothing; the
    /// other bank on what it was behind on and the load's hint (unknown without a hint: then
    /// compared whole, once, and kept while the list stays short).
    fn settle_behind(&mut self, target: u8, tables: &Tables) {
        // Beyond this many entries a whole-table compare is as quick as the list.
        const MAX_BEHIND: usize = 1_048_576;
        let (t, o) = (usize::from(target), usize::from(target ^ 1));
        let other = match (self.behind[o].take(), &self.hint) {
            (Some(mut b), Some(h)) => {
                b.extend_from_slice(h);
                b.sort_unstable_by_key(|&(tb, i)| (tb.value(), i));
                b.dedup();
                b
            }
            _ => {
                let mut all = Vec::new();
                let mut idx = Vec::new();
                for table in Table::ALL {
                    self.shadow[o].diff_table(tables, table, &mut idx);
                    all.extend(idx.iter().map(|&i| (table, i)));
                    if all.len() > MAX_BEHIND {
                        break;
                    }
                }
                all
            }
        };
        self.behind[o] = (other.len() <= MAX_BEHIND).then_some(other);
        self.behind[t] = Some(Vec::new());
    }

    /// Writes `tables` by DMA into the bank that is not serving, without flipping to it and
    /// without the NIC settings: the bank the next load writes then differs from that load's
    /// tables only by what changed since. After a start the other bank is empty (or holds
    /// whatever an earlier daemon left): without this, the first load after it (a health
    /// change) would rewrite the whole bank, 15 M entries and about 2 s at the `u280` profile.
    /// Nothing that serves changes; the generation stays. `None` (nothing done) where the
    /// device has no command ring: through the register window it would take as long as the
    /// load before it, and the first change pays it instead.
    pub fn sync_inactive<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        tables: &Tables,
    ) -> Result<Option<LoadReport>, LoadError> {
        let nic = NicSettings::default();
        match crate::rings::split_commands(dev) {
            Some((d, rings)) => self.load_via(d, Some(rings), tables, &nic, false).map(Some),
            None => Ok(None),
        }
    }

    /// [`Loader::load`] with the entries moved by DMA through the command ring: each chunk
    /// of changed entries is one TABLE_WRITE list command and one TABLE_READ list command
    /// whose read-back the loader compares; the control registers (drain, NIC settings,
    /// flip) stay register accesses, a few per load whatever its size.
    pub fn load_dma<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: &mut HostRings,
        tables: &Tables,
        nic: &NicSettings,
    ) -> Result<LoadReport, LoadError> {
        self.load_via(dev, Some(rings), tables, nic, true)
    }

    /// [`Loader::load_image`] by DMA.
    pub fn load_image_dma<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: &mut HostRings,
        image: &flowtable_compiler::Image,
    ) -> Result<LoadReport, LoadError> {
        if image.header.regmap_version != nlb_hw::REGMAP_VERSION {
            return Err(LoadError::ImageRegmap {
                image: image.header.regmap_version,
                driver: nlb_hw::REGMAP_VERSION,
            });
        }
        self.load_dma(dev, rings, &image.tables, &image.nic)
    }

    /// A load into the bank not serving, then (`flip`) the NIC settings and the flip to it.
    /// After a failure neither bank's lag behind the tables is known.
    fn load_via<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: Option<&mut HostRings>,
        tables: &Tables,
        nic: &NicSettings,
        flip: bool,
    ) -> Result<LoadReport, LoadError> {
        let r = self.load_into_inactive(dev, rings, tables, nic, flip);
        match &r {
            // The bank written serves now after a flip, else it is still the other one.
            Ok(_) => self.settle_behind(if flip { self.active } else { self.active ^ 1 }, tables),
            Err(_) => self.behind = [None, None],
        }
        r
    }

    fn load_into_inactive<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        mut rings: Option<&mut HostRings>,
        tables: &Tables,
        nic: &NicSettings,
        flip: bool,
    ) -> Result<LoadReport, LoadError> {
        let start = Instant::now();
        if tables.profile.name != self.profile.name {
            return Err(LoadError::ProfileMismatch {
                image: tables.profile.name,
                device: self.profile.name,
            });
        }
        // The settings must fit their registers: checked before the device is touched.
        let nic_values = nic_words(nic).map_err(LoadError::Settings)?;
        let mut report = LoadReport::default();

        // The device must still serve what this loader last made it serve.
        let r = self
            .batch
            .read(ctrl::ACTIVE_BANK)
            .read(ctrl::GENERATION)
            .read(ctrl::ENABLE)
            .run(dev)?;
        let (found, generation, enabled) = (
            u8::from(ctrl::ActiveBank::from_word(r[0]).bank),
            r[1],
            ctrl::Enable::from_word(r[2]).enable,
        );
        report.reads += 3;
        if self.flip_uncertain {
            // The last flip may or may not have happened: the device says which.
            self.active = found;
            self.generation = generation;
            self.flip_uncertain = false;
        } else if (found, generation) != (self.active, self.generation) {
            if generation == 0 && !enabled && found == 0 {
                // Reset (power cycle, or a reboot from flash): empty banks. Read everything
                // back rather than trust the shadow.
                self.read_control(dev)?;
                for bank in 0..2 {
                    match rings.as_deref_mut() {
                        Some(r) => self.read_bank_dma(dev, r, bank)?,
                        None => self.read_bank(dev, bank)?,
                    }
                }
                report.resynced = true;
            } else {
                return Err(LoadError::ActiveBankMoved {
                    expected: self.active,
                    found,
                });
            }
        }
        let target = self.active ^ 1;
        let t = usize::from(target);
        if let Some(rings) = rings {
            self.load_entries_dma(dev, rings, target, tables, &mut report)?;
            self.finish_load(dev, flip, target, &nic_values, &mut report)?;
            report.elapsed = start.elapsed();
            return Ok(report);
        }

        // Encode the changed entries before touching the device.
        let mut changes: Vec<(Table, u32)> = Vec::new();
        let mut idx = Vec::new();
        for table in Table::ALL {
            self.changed_indices(t, tables, table, &mut idx);
            changes.extend(idx.iter().map(|&i| (table, i)));
        }
        for &(tv, i) in &self.suspect[t] {
            if let Some(table) = Table::from_value(tv) {
                if !changes.contains(&(table, i)) {
                    changes.push((table, i));
                }
            }
        }
        let mut encoded: Vec<(Table, u32, Vec<u32>)> = Vec::with_capacity(changes.len());
        for (table, index) in changes {
            if index > CMD_INDEX_MAX {
                return Err(LoadError::Window {
                    table,
                    bank: target,
                    index,
                    op: "write",
                });
            }
            let words = tables.read_entry(table, index).map_err(|e| match e {
                nlb_hw::TableError::Layout(source) => LoadError::Encode {
                    table,
                    index,
                    source,
                },
                nlb_hw::TableError::OutOfRange { .. } => LoadError::Window {
                    table,
                    bank: target,
                    index,
                    op: "write",
                },
            })?;
            encoded.push((table, index, words));
        }
        // Group by table, then by value, so runs of equal values need no data writes.
        encoded.sort_by(|a, b| (a.0.value(), &a.2, a.1).cmp(&(b.0.value(), &b.2, b.1)));
        report.changed_entries = encoded.len();
        report.changed_by_table = Table::ALL
            .iter()
            .map(|t| (*t, encoded.iter().filter(|e| e.0 == *t).count()))
            .collect();

        self.drain(dev, target, &mut report)?;
        self.write_entries(dev, target, &encoded, &mut report)?;
        self.finish_load(dev, flip, target, &nic_values, &mut report)?;
        report.elapsed = start.elapsed();
        Ok(report)
    }

    /// Loads a compiled table image (`nlbctl compile` output): checks its regmap version and
    /// profile, then [`Loader::load`]s its tables and NIC settings. The loader's own
    /// generation counter, not the image's, goes to `ctrl.generation`.
    pub fn load_image<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        image: &flowtable_compiler::Image,
    ) -> Result<LoadReport, LoadError> {
        if image.header.regmap_version != nlb_hw::REGMAP_VERSION {
            return Err(LoadError::ImageRegmap {
                image: image.header.regmap_version,
                driver: nlb_hw::REGMAP_VERSION,
            });
        }
        self.load(dev, &image.tables, &image.nic)
    }

    /// The DMA path of a load: encodes the changed entries (and suspects) table by table into
    /// the command data area, writes them with TABLE_WRITE commands, reads them back with
    /// TABLE_READ commands and compares: a chunk of consecutive indices as a range, any other
    /// as an index list. Every entry encodes before the device is touched.
    fn load_entries_dma<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: &mut HostRings,
        target: u8,
        tables: &Tables,
        report: &mut LoadReport,
    ) -> Result<(), LoadError> {
        let t = usize::from(target);
        let mut changes: Vec<(Table, Vec<u32>)> = Vec::new();
        let mut scratch = Vec::new();
        for table in Table::ALL {
            let mut idx = Vec::new();
            self.changed_indices(t, tables, table, &mut idx);
            let suspects: Vec<u32> = self.suspect[t]
                .iter()
                .filter(|(tv, _)| *tv == table.value())
                .map(|(_, i)| *i)
                .collect();
            if !suspects.is_empty() {
                idx.extend(suspects);
                idx.sort_unstable();
                idx.dedup();
            }
            // Encode once now, so that an image that does not encode fails before any write.
            for &index in &idx {
                if index > CMD_INDEX_MAX || index >= tables.depth(table) {
                    return Err(LoadError::Window {
                        table,
                        bank: target,
                        index,
                        op: "write",
                    });
                }
                scratch.clear();
                tables
                    .encode_entry(table, index, &mut scratch)
                    .map_err(|e| encode_error(e, table, target, index))?;
            }
            if !idx.is_empty() {
                changes.push((table, idx));
            }
        }
        report.changed_entries = changes.iter().map(|(_, i)| i.len()).sum();
        report.changed_by_table = Table::ALL
            .iter()
            .map(|tb| {
                let n = changes
                    .iter()
                    .find(|(x, _)| x == tb)
                    .map_or(0, |(_, i)| i.len());
                (*tb, n)
            })
            .collect();
        self.drain(dev, target, report)?;
        let half = rings.data_len() / 2;
        let mut write = Vec::new();
        let mut back = Vec::new();
        for (table, idx) in &changes {
            let words = Tables::entry_words(*table);
            let stride = words + 1;
            // Chunks of a multiple of ROW_ALIGN entries, so that a run of consecutive indices
            // (a whole table, in a full load) starts each chunk on a memory row.
            let per = (half / (stride * 4)).max(1);
            let align = ROW_ALIGN as usize;
            let per = if per >= align { per - per % align } else { per };
            // Maglev slots go as whole memory rows, which the NIC writes a row at a time (its
            // row-mates with the values the bank holds: the shadow's, which the tables share).
            let idx = if *table == Table::Maglev {
                Cow::Owned(whole_rows(idx, tables.depth(*table)))
            } else {
                Cow::Borrowed(&idx[..])
            };
            let (ranges, scattered) = plan_chunks(&idx, per);
            let ranges = ranges.into_iter().map(|r| (true, &idx[r]));
            for (range, chunk) in ranges.chain(scattered.chunks(per).map(|c| (false, c))) {
                write.clear();
                back.clear();
                // Runs of consecutive indices go as ranges (no index words; the read-back of a
                // range from a memory row reads whole rows), others as index lists.
                let head = usize::from(!range);
                let stride = words + head;
                for &index in chunk {
                    if !range {
                        write.push(index);
                        back.push(index);
                    }
                    tables
                        .encode_entry(*table, index, &mut write)
                        .map_err(|e| encode_error(e, *table, target, index))?;
                    back.resize(back.len() + words, 0);
                }
                let count = chunk.len() as u32;
                let sent = (|| -> Result<(), LoadError> {
                    rings.write_data(0, &write)?;
                    rings.write_data(half, &back)?;
                    for (op, addr) in [
                        (DmaCmd::TableWrite, rings.data_iova(0)),
                        (DmaCmd::TableRead, rings.data_iova(half)),
                    ] {
                        rings.submit(&CmdDesc {
                            op,
                            table: *table,
                            bank: target == 1,
                            list: !range,
                            count,
                            index: if range { chunk[0] } else { 0 },
                            addr,
                            ..CmdDesc::default()
                        })?;
                    }
                    rings.execute(dev, COMMAND_TIMEOUT)?;
                    rings.read_data(half, &mut back)?;
                    Ok(())
                })();
                report.commands += 2;
                report.update_writes += 1;
                // Entries of a chunk that did not verify are unknown: rewritten next time.
                let mut verified = 0;
                let outcome = sent.and_then(|()| {
                    for (k, &index) in chunk.iter().enumerate() {
                        let w = &write[k * stride + head..(k + 1) * stride];
                        let r = &back[k * stride + head..(k + 1) * stride];
                        if (!range && back[k * stride] != index) || w != r {
                            return Err(LoadError::Verify {
                                table: *table,
                                bank: target,
                                index,
                                wrote: w.to_vec(),
                                read: r.to_vec(),
                            });
                        }
                        if self.shadow[t].copy_entry(tables, *table, index).is_ok() {
                            self.suspect[t].remove(&(table.value(), index));
                        }
                        verified = k + 1;
                    }
                    Ok(())
                });
                if let Err(e) = outcome {
                    for &index in &chunk[verified..] {
                        self.suspect[t].insert((table.value(), index));
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The end of a load whose entries are in bank `target`: the NIC settings and the flip to
    /// it, or (`flip` false) nothing, the report naming the bank still serving.
    fn finish_load<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        flip: bool,
        target: u8,
        nic_values: &[u32; 11],
        report: &mut LoadReport,
    ) -> Result<(), LoadError> {
        if flip {
            self.write_nic(dev, nic_values, report)?;
            self.flip(dev, target, report)
        } else {
            report.bank = self.active;
            report.generation = self.generation;
            Ok(())
        }
    }

    /// Waits until no packet that latched `bank` is in flight.
    fn drain<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        bank: u8,
        report: &mut LoadReport,
    ) -> Result<(), LoadError> {
        let start = Instant::now();
        loop {
            let in_use = dev.read32(ctrl::BANK_IN_USE)?;
            report.reads += 1;
            let in_use = ctrl::BankInUse::from_word(in_use);
            if !(if bank == 0 {
                in_use.bank0
            } else {
                in_use.bank1
            }) {
                return Ok(());
            }
            let waited = start.elapsed();
            if waited >= self.opts.drain_timeout {
                return Err(LoadError::BankBusy { bank, waited });
            }
            dev.wait(self.opts.drain_poll)?;
        }
    }

    fn write_entries<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        bank: u8,
        encoded: &[(Table, u32, Vec<u32>)],
        report: &mut LoadReport,
    ) -> Result<(), LoadError> {
        let b = usize::from(bank);
        // What the window's data words hold; unknown at the start of a load.
        let mut window: [Option<u32>; win::DATA_COUNT as usize] = [None; win::DATA_COUNT as usize];
        let step = self.opts.batch_entries.max(1);
        let mut selected: Option<Table> = None;
        for chunk in encoded.chunks(step) {
            for (table, index, words) in chunk {
                if selected != Some(*table) {
                    self.batch.write(win::SELECT, select_word(*table, bank));
                    report.update_writes += 1;
                    selected = Some(*table);
                }
                // Indices were checked against CMD_INDEX_MAX before the device was touched.
                let cmd = cmd_at(TableCmd::WriteAt, *index).unwrap_or_default();
                self.suspect[b].insert((table.value(), *index));
                for (k, w) in words.iter().enumerate() {
                    if window[k] != Some(*w) {
                        self.batch.write(win::DATA + 4 * k as u32, *w);
                        window[k] = Some(*w);
                        report.update_writes += 1;
                    }
                }
                // The device reads the stored entry back into the window: verify by reading.
                // (A write that stored something else fails the load below, so the window
                // tracking only has to hold for writes that verify.)
                // `index` shows the command ran (a lost command would leave the data words
                // as written, and they alone would verify).
                self.batch
                    .write(win::CMD, cmd)
                    .read(win::STATUS)
                    .read(win::INDEX)
                    .read_words(win::DATA, words.len() as u32);
                report.update_writes += 1;
                report.reads += 2 + words.len() as u64;
            }
            let r = self.batch.run(dev)?;
            let mut at = 0;
            for (table, index, words) in chunk {
                let (status, ran) = (r[at], r[at + 1]);
                let read = &r[at + 2..at + 2 + words.len()];
                at += 2 + words.len();
                if win::Status::from_word(status).error {
                    return Err(LoadError::Window {
                        table: *table,
                        bank,
                        index: *index,
                        op: "write",
                    });
                }
                if ran != *index {
                    return Err(LoadError::NotExecuted {
                        table: *table,
                        bank,
                        index: *index,
                        found: ran,
                    });
                }
                if read != words.as_slice() {
                    return Err(LoadError::Verify {
                        table: *table,
                        bank,
                        index: *index,
                        wrote: words.clone(),
                        read: read.to_vec(),
                    });
                }
                // The words were packed from a valid entry, so they unpack.
                if self.shadow[b].write_entry(*table, *index, words).is_ok() {
                    self.suspect[b].remove(&(table.value(), *index));
                }
            }
        }
        Ok(())
    }

    fn write_nic<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        words: &[u32; 11],
        report: &mut LoadReport,
    ) -> Result<(), LoadError> {
        let mut written = Vec::new();
        for (k, w) in words.iter().enumerate() {
            if self.nic[k] != Some(*w) {
                self.nic[k] = None;
                self.batch.write(NIC_REGS[k], *w);
                written.push((NIC_REGS[k], *w, k));
            }
        }
        if written.is_empty() {
            return Ok(());
        }
        for (reg, _, _) in &written {
            self.batch.read(*reg);
        }
        report.control_writes += written.len() as u64;
        report.reads += written.len() as u64;
        let r = self.batch.run(dev)?;
        for ((offset, wrote, k), read) in written.iter().zip(r) {
            if read != wrote {
                return Err(LoadError::NicVerify {
                    offset: *offset,
                    wrote: *wrote,
                    read: *read,
                });
            }
            self.nic[*k] = Some(*wrote);
        }
        Ok(())
    }

    fn flip<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        target: u8,
        report: &mut LoadReport,
    ) -> Result<(), LoadError> {
        let generation = self.generation.wrapping_add(1);
        let enable_slot = NIC_REGS.len() - 1;
        let on = ctrl::Enable { enable: true }.word();
        let enable = self.opts.enable_pipeline && self.nic[enable_slot] != Some(on);
        self.batch
            .write(
                ctrl::ACTIVE_BANK,
                ctrl::ActiveBank { bank: target == 1 }.word(),
            )
            .write(ctrl::GENERATION, generation);
        report.control_writes += 2;
        if enable {
            self.batch.write(ctrl::ENABLE, on);
            report.control_writes += 1;
        }
        self.batch.read(ctrl::ACTIVE_BANK);
        report.reads += 1;
        // From here until the read-back, the device may serve either bank.
        self.flip_uncertain = true;
        let r = self.batch.run(dev)?;
        let read = u8::from(ctrl::ActiveBank::from_word(r[0]).bank);
        if read != target {
            return Err(LoadError::Flip {
                wrote: target,
                read,
            });
        }
        self.flip_uncertain = false;
        self.active = target;
        self.generation = generation;
        if enable {
            self.nic[enable_slot] = Some(on);
        }
        report.bank = target;
        report.generation = generation;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{plan_chunks, whole_rows};

    #[test]
    fn changed_slots_become_their_whole_rows() {
        let rows = whole_rows(&[3, 5, 40, 47, 48], 64);
        let want: Vec<u32> = (0..16).chain(32..64).collect();
        assert_eq!(rows, want);
        // The table's last row ends at its depth.
        assert_eq!(whole_rows(&[70], 72), (64..72).collect::<Vec<u32>>());
        assert!(whole_rows(&[], 64).is_empty());
    }

    #[test]
    fn long_runs_go_as_ranges_the_rest_as_lists() {
        let idx: Vec<u32> = (0..32)
            .chain([40, 50, 51])
            .chain(100..120)
            .chain([200])
            .collect();
        let (ranges, scattered) = plan_chunks(&idx, 16);
        // Positions in idx: 0..32 holds 0..32, 35..55 holds 100..120.
        assert_eq!(ranges, vec![0..16, 16..32, 35..51, 51..55]);
        assert_eq!(scattered, vec![40, 50, 51, 200]);
        // Every index exactly once.
        let mut all: Vec<u32> = ranges
            .into_iter()
            .flat_map(|r| idx[r].to_vec())
            .chain(scattered)
            .collect();
        all.sort_unstable();
        assert_eq!(all, idx);
    }
}
