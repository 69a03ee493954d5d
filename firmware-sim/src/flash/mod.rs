//! The simulated SPI NOR flash chip and the flash controller / reboot register blocks.
