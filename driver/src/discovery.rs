//! Discovery: walk the register-block list and read the firmware-ID block.
//!
//! Every block starts with TYPE (`BLOCK_TYPE_PREFIX | type_id`), VERSION and NEXT (byte offset
//! of the next block, 0 ends the list); the list starts at offset 0 with the firmware-ID block
//! (`docs/regmap.md`). The driver refuses a device whose blocks it does not understand: an
//! unknown type, a version other than the one this build was generated for, a block at an
//! offset other than the regmap's (the driver addresses registers by the generated constants),
//! a loop or an over-long list.

use crate::device::{Batch, Device, DeviceError};
use nlb_hw::blocks::{self, fw_id};
use nlb_hw::{Profile, REGMAP_VERSION};

/// The walk gives up after this many blocks (the regmap has 8).
pub const MAX_BLOCKS: usize = 64;

/// Why a device was refused.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// Register access failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// Offset 0 does not hold the firmware-ID block: this is not an nlb-offload NIC.
    #[error(
        "not an nlb-offload device: offset 0 reads {found:#010x}, the firmware-ID block type is \
         {expected:#010x}{hint}",
        expected = fw_id::TYPE_WORD,
        hint = if *found == u32::MAX {
            " (all ones: the device does not answer; is the link up and memory decoding on?)"
        } else {
            ""
        }
    )]
    NotOurDevice {
        /// The word read at offset 0.
        found: u32,
    },
    /// The device implements another register map version.
    #[error(
        "the device speaks regmap version {device}, this driver speaks version {driver}: load a \
         bitstream built from the same release as this driver (`nlbctl flash`), or use the \
         driver that matches the bitstream"
    )]
    RegmapVersion {
        /// Version the device reports.
        device: u32,
        /// Version this driver was generated for.
        driver: u32,
    },
    /// A TYPE word the regmap does not define.
    #[error("unknown register block type {type_word:#010x} at offset {at:#x}")]
    UnknownBlockType {
        /// Offset of the block.
        at: u32,
        /// Its TYPE word.
        type_word: u32,
    },
    /// A known block type with a version this driver does not implement.
    #[error(
        "register block `{name}` at {at:#x} has version {version}; this driver supports version \
         {supported}"
    )]
    UnsupportedVersion {
        /// Block name.
        name: &'static str,
        /// Its offset.
        at: u32,
        /// Version found.
        version: u32,
        /// Version supported.
        supported: u32,
    },
    /// A known block at an offset other than the regmap's.
    #[error("register block `{name}` found at {at:#x}, the regmap places it at {expected:#x}")]
    BlockMoved {
        /// Block name.
        name: &'static str,
        /// Where it was found.
        at: u32,
        /// Where the regmap puts it.
        expected: u32,
    },
    /// The same block type twice.
    #[error("register block `{name}` appears twice (at {first:#x} and {again:#x})")]
    DuplicateBlock {
        /// Block name.
        name: &'static str,
        /// First occurrence.
        first: u32,
        /// Second occurrence.
        again: u32,
    },
    /// NEXT points back at a block already visited.
    #[error(
        "the register block list loops: NEXT of the block at {from:#x} points back to {to:#x}"
    )]
    Loop {
        /// Block whose NEXT closes the loop.
        from: u32,
        /// Block pointed to.
        to: u32,
    },
    /// NEXT is not 4-byte aligned.
    #[error("NEXT of the block at {from:#x} is {next:#x}, not a 4-byte aligned offset")]
    BadNext {
        /// Block.
        from: u32,
        /// Its NEXT value.
        next: u32,
    },
    /// More blocks than [`MAX_BLOCKS`].
    #[error("the register block list has more than {MAX_BLOCKS} blocks")]
    TooManyBlocks,
    /// A block the driver needs is not in the list.
    #[error("the device has no `{0}` register block")]
    MissingBlock(&'static str),
    /// The firmware-ID block names a capacity profile this driver does not know.
    #[error("the device reports capacity profile id {id}; this driver knows {known}")]
    UnknownProfile {
        /// Profile id read.
        id: u32,
        /// Known profiles, for the message.
        known: String,
    },
    /// A capacity register disagrees with the profile the device claims.
    #[error(
        "the device claims profile `{profile}` but reports {field} = {device} (the profile says \
         {expected})"
    )]
    CapacityMismatch {
        /// Profile name.
        profile: &'static str,
        /// Capacity register.
        field: &'static str,
        /// Value read.
        device: u32,
        /// Value of the profile.
        expected: u32,
    },
}

/// One block of the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockInfo {
    /// Regmap name (`ctrl`, `table`, ...).
    pub name: &'static str,
    /// Byte offset from BAR 0.
    pub base: u32,
    /// TYPE word.
    pub type_word: u32,
    /// VERSION word.
    pub version: u32,
}

/// Table depths as the firmware-ID block reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capacities {
    /// VIP buckets.
    pub vip_buckets: u32,
    /// VIP ways.
    pub vip_ways: u32,
    /// Rules.
    pub rules: u32,
    /// Pools.
    pub pools: u32,
    /// Maglev slots.
    pub maglev_slots: u32,
    /// Backends.
    pub backends: u32,
    /// Conntrack buckets.
    pub ct_buckets: u32,
    /// Conntrack ways.
    pub ct_ways: u32,
    /// Queue depth.
    pub queue_depth: u32,
}

/// The firmware-ID block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirmwareId {
    /// Design version, major.minor as 16.16.
    pub design_version: u32,
    /// Regmap version.
    pub regmap_version: u32,
    /// Build timestamp, seconds since the Unix epoch.
    pub build_id: u32,
    /// First 8 hex digits of the source commit.
    pub git_hash: u32,
    /// Board code.
    pub board_id: u32,
    /// FPGA part code.
    pub part_id: u32,
    /// Capacity profile id.
    pub profile_id: u32,
    /// Capacities.
    pub capacities: Capacities,
}

impl FirmwareId {
    /// A board name for humans.
    pub fn board_name(&self) -> &'static str {
        board_name(self.board_id)
    }
}

/// The board a fw_id.board_id code names (hw/regmap.toml; the OpenNIC build stamps it,
/// hw/boards/opennic/build.sh).
pub fn board_name(board_id: u32) -> &'static str {
    match board_id {
        0x0250 => "Alveo U250",
        0x0280 => "Alveo U280",
        0x055C => "Alveo U55C",
        0x5100 => "simulated",
        _ => "unknown board",
    }
}

/// What discovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The firmware-ID block.
    pub firmware: FirmwareId,
    /// The capacity profile, checked against the reported capacities.
    pub profile: &'static Profile,
    /// Blocks in list order.
    pub blocks: Vec<BlockInfo>,
}

impl DeviceInfo {
    /// A block by regmap name.
    pub fn block(&self, name: &str) -> Option<&BlockInfo> {
        self.blocks.iter().find(|b| b.name == name)
    }
}

/// Blocks every user of the driver needs (the loader's).
const REQUIRED: [&str; 3] = ["fw_id", "ctrl", "table"];

/// Walks the block list of `dev`, reads the firmware-ID block and checks it.
pub fn discover<D: Device + ?Sized>(dev: &mut D) -> Result<DeviceInfo, DiscoveryError> {
    let first = dev.read32(fw_id::TYPE_REG)?;
    if first != fw_id::TYPE_WORD {
        return Err(DiscoveryError::NotOurDevice { found: first });
    }
    // The version check comes before the walk: another regmap version may have other blocks,
    // and "wrong version" is the message that tells the user what to do.
    let regmap_version = dev.read32(fw_id::REGMAP_VERSION)?;
    if regmap_version != REGMAP_VERSION {
        return Err(DiscoveryError::RegmapVersion {
            device: regmap_version,
            driver: REGMAP_VERSION,
        });
    }
    let blocks = walk(dev)?;
    for name in REQUIRED {
        if !blocks.iter().any(|b| b.name == name) {
            return Err(DiscoveryError::MissingBlock(name));
        }
    }
    let firmware = read_firmware_id(dev)?;
    let profile =
        Profile::by_id(firmware.profile_id).ok_or_else(|| DiscoveryError::UnknownProfile {
            id: firmware.profile_id,
            known: nlb_hw::PROFILES
                .iter()
                .map(|p| format!("{} (id {})", p.name, p.id))
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    check_capacities(profile, &firmware.capacities)?;
    Ok(DeviceInfo {
        firmware,
        profile,
        blocks,
    })
}

fn walk<D: Device + ?Sized>(dev: &mut D) -> Result<Vec<BlockInfo>, DiscoveryError> {
    let mut found: Vec<BlockInfo> = Vec::new();
    let mut at = 0u32;
    let mut batch = Batch::new();
    loop {
        if found.len() >= MAX_BLOCKS {
            return Err(DiscoveryError::TooManyBlocks);
        }
        let words = batch.read(at).read(at + 4).read(at + 8).run(dev)?;
        let (type_word, version, next) = match *words {
            [t, v, n] => (t, v, n),
            _ => return Err(DeviceError::Protocol("short batch answer".into()).into()),
        };
        // Every TYPE word of the regmap carries meta.block_type_prefix.
        let known = blocks::ALL.iter().find(|b| b.2 == type_word);
        let Some(&(name, base, _, supported)) = known else {
            return Err(DiscoveryError::UnknownBlockType { at, type_word });
        };
        if let Some(prev) = found.iter().find(|b| b.name == name) {
            return Err(DiscoveryError::DuplicateBlock {
                name,
                first: prev.base,
                again: at,
            });
        }
        if base != at {
            return Err(DiscoveryError::BlockMoved {
                name,
                at,
                expected: base,
            });
        }
        if version != supported {
            return Err(DiscoveryError::UnsupportedVersion {
                name,
                at,
                version,
                supported,
            });
        }
        found.push(BlockInfo {
            name,
            base: at,
            type_word,
            version,
        });
        if next == 0 {
            return Ok(found);
        }
        if next % 4 != 0 {
            return Err(DiscoveryError::BadNext { from: at, next });
        }
        if found.iter().any(|b| b.base == next) {
            return Err(DiscoveryError::Loop { from: at, to: next });
        }
        at = next;
    }
}

fn read_firmware_id<D: Device + ?Sized>(dev: &mut D) -> Result<FirmwareId, DiscoveryError> {
    let mut batch = Batch::new();
    let first = fw_id::DESIGN_VERSION;
    let count = (fw_id::CAP_QUEUE_DEPTH - first) / 4 + 1;
    let w = batch.read_words(first, count).run(dev)?;
    let at = |reg: u32| w.get(((reg - first) / 4) as usize).copied().unwrap_or(0);
    Ok(FirmwareId {
        design_version: at(fw_id::DESIGN_VERSION),
        regmap_version: at(fw_id::REGMAP_VERSION),
        build_id: at(fw_id::BUILD_ID),
        git_hash: at(fw_id::GIT_HASH),
        board_id: at(fw_id::BOARD_ID),
        part_id: at(fw_id::PART_ID),
        profile_id: at(fw_id::PROFILE_ID),
        capacities: Capacities {
            vip_buckets: at(fw_id::CAP_VIP_BUCKETS),
            vip_ways: at(fw_id::CAP_VIP_WAYS),
            rules: at(fw_id::CAP_RULES),
            pools: at(fw_id::CAP_POOLS),
            maglev_slots: at(fw_id::CAP_MAGLEV_SLOTS),
            backends: at(fw_id::CAP_BACKENDS),
            ct_buckets: at(fw_id::CAP_CT_BUCKETS),
            ct_ways: at(fw_id::CAP_CT_WAYS),
            queue_depth: at(fw_id::CAP_QUEUE_DEPTH),
        },
    })
}

fn check_capacities(profile: &'static Profile, caps: &Capacities) -> Result<(), DiscoveryError> {
    let pairs = [
        ("cap_vip_buckets", caps.vip_buckets, profile.vip_buckets),
        ("cap_vip_ways", caps.vip_ways, profile.vip_ways),
        ("cap_rules", caps.rules, profile.rules),
        ("cap_pools", caps.pools, profile.pools),
        ("cap_maglev_slots", caps.maglev_slots, profile.maglev_slots),
        ("cap_backends", caps.backends, profile.backends),
        ("cap_ct_buckets", caps.ct_buckets, profile.ct_buckets),
        ("cap_ct_ways", caps.ct_ways, profile.ct_ways),
        ("cap_queue_depth", caps.queue_depth, profile.queue_depth),
    ];
    for (field, device, expected) in pairs {
        if device != expected {
            return Err(DiscoveryError::CapacityMismatch {
                profile: profile.name,
                field,
                device,
                expected,
            });
        }
    }
    Ok(())
}
