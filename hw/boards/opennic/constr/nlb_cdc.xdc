# Timing constraints of nlb-offload's clock-domain crossings (docs/boards.md, "Clock domains"),
# read by hw/boards/opennic/plugin/build_box_322mhz.tcl as an unmanaged XDC (Tcl loops).
#
# The shell's clocks (cmac_clk 322.27 MHz, axis_aclk 250 MHz, axil_aclk 125 MHz) are unrelated
# as far as these paths go. Every crossing is in nlb_async_fifo or nlb_reset_sync:
# - a Gray pointer goes to the first flop of its synchroniser within 3.0 ns, less than the
#   shortest period (3.103 ns), so all its bits arrive within one clock of each other and the
#   far side sees one pointer value, old or new;
# - the FIFO memory is written on one clock and read on the other only after the pointer said
#   the word is there (SYNC_STAGES clocks later): its read path gets the same bound;
# - the reset request is a level held for many clocks: no bound on its first flop.

set nlb_cdc_max 3.0

foreach fifo [get_cells -quiet -hierarchical -filter {ORIG_REF_NAME == nlb_async_fifo || REF_NAME == nlb_async_fifo}] {
    set_max_delay -datapath_only $nlb_cdc_max \
        -from [get_cells -quiet "$fifo/wr_gray_reg_reg[*]"] -to [get_cells -quiet "$fifo/wr_sync_reg_reg[*]"]
    set_max_delay -datapath_only $nlb_cdc_max \
        -from [get_cells -quiet "$fifo/rd_gray_reg_reg[*]"] -to [get_cells -quiet "$fifo/rd_sync_reg_reg[*]"]
    set_max_delay -datapath_only $nlb_cdc_max \
        -from [get_cells -quiet -hierarchical -filter "NAME =~ $fifo/mem_reg*"] -to [get_cells -quiet "$fifo/out_reg_reg[*]"]
}

foreach sync [get_cells -quiet -hierarchical -filter {ORIG_REF_NAME == nlb_reset_sync || REF_NAME == nlb_reset_sync}] {
    set_false_path -from [get_cells -quiet "$sync/rst_req_reg_reg"]
}
