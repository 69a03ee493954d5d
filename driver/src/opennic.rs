//! The OpenNIC plugin's own registers (hw/boards/opennic, docs/boards.md "The plugin"): in the
//! 322 MHz box's register window, after `nlb_top`'s 64 KiB register map. They belong to the
//! board layer, not to `hw/regmap.toml`: a simulated NIC has none, and reading them there
//! finds nothing.

use crate::device::{Device, DeviceError};

/// Offset of the plugin's registers from register 0 of the window.
pub const PLUGIN_BASE: u32 = 0x1_0000;
/// What the plugin's `id` register reads ("NLP1").
pub const PLUGIN_ID: u32 = 0x4E4C_5031;

const ID: u32 = PLUGIN_BASE;
const CONFIG: u32 = PLUGIN_BASE + 0x04;
const RX_ERR_FRAMES: u32 = PLUGIN_BASE + 0x08;
const HOST_TX_DROPS: u32 = PLUGIN_BASE + 0x0C;
const HOST_RX_DROPS: u32 = PLUGIN_BASE + 0x10;
const EVENTS_LOST: u32 = PLUGIN_BASE + 0x14;

/// What the plugin reports (counters are 32 bits and wrap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginStatus {
    /// CMAC ports of the build.
    pub cmac_ports: u8,
    /// The shell carries the host DMA port (the host rings reach host memory).
    pub host_dma: bool,
    /// Frames the MAC marked bad (bad FCS), dropped before the pipeline.
    pub rx_err_frames: u32,
    /// Host frames dropped on their way to the MAC (marked bad, or longer than 256 beats).
    pub host_tx_drops: u32,
    /// Frames toward the host's network stack dropped (punted frames longer than 512 beats).
    pub host_rx_drops: u32,
    /// Learn/teardown events lost because no event ring was in use.
    pub events_lost: u32,
}

/// The plugin's registers, or `None` when the device has none (a simulated NIC, or a device
/// whose register window ends at the register map).
pub fn plugin_status<D: Device + ?Sized>(dev: &mut D) -> Result<Option<PluginStatus>, DeviceError> {
    match dev.read32(ID) {
        Ok(PLUGIN_ID) => {}
        Ok(_) | Err(DeviceError::BadOffset { .. }) => return Ok(None),
        Err(e) => return Err(e),
    }
    // config: the CMAC ports in its low byte, 1 in the next byte when the host DMA port is
    // carried (nlb_plugin_322mhz).
    let [ports, host_dma, _, _] = dev.read32(CONFIG)?.to_le_bytes();
    Ok(Some(PluginStatus {
        cmac_ports: ports,
        host_dma: host_dma == 1,
        rx_err_frames: dev.read32(RX_ERR_FRAMES)?,
        host_tx_drops: dev.read32(HOST_TX_DROPS)?,
        host_rx_drops: dev.read32(HOST_RX_DROPS)?,
        events_lost: dev.read32(EVENTS_LOST)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelHandle;

    /// A device with the plugin's registers at their offsets (and nothing else).
    struct Plugin([u32; 6]);

    impl Device for Plugin {
        fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
            let i = offset.wrapping_sub(PLUGIN_BASE) / 4;
            self.0
                .get(i as usize)
                .copied()
                .ok_or(DeviceError::BadOffset {
                    offset,
                    why: "not a plugin register",
                })
        }

        fn write32(&mut self, offset: u32, _value: u32) -> Result<(), DeviceError> {
            Err(DeviceError::BadOffset {
                offset,
                why: "read-only",
            })
        }

        fn describe(&self) -> String {
            "the plugin's registers".into()
        }
    }

    #[test]
    fn reads_the_plugin_and_nothing_on_a_simulated_nic() {
        let mut card = Plugin([PLUGIN_ID, 0x101, 3, 4, 5, 6]);
        assert_eq!(
            plugin_status(&mut card).expect("reads"),
            Some(PluginStatus {
                cmac_ports: 1,
                host_dma: true,
                rx_err_frames: 3,
                host_tx_drops: 4,
                host_rx_drops: 5,
                events_lost: 6,
            })
        );
        let mut other = Plugin([0x1234, 0x101, 3, 4, 5, 6]);
        assert_eq!(plugin_status(&mut other).expect("reads"), None);
        let profile = nlb_hw::Profile::by_name("sim").expect("sim profile");
        let mut model = ModelHandle::new(profile);
        assert_eq!(plugin_status(&mut model).expect("reads"), None);
    }
}
