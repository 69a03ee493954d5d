//! Bitstream files and the flash programmer (issue: flashing NIC bitstreams safely).
