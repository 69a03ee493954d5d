# nlb-offload's plugin for AMD's OpenNIC shell: the 322 MHz box's sources. The shell's
# script/build.tcl sources this file with the plugin folder as its working directory, in its
# own scope (so `include_dirs` below is the list it gives the project).
#
# nlb_build.tcl, written by hw/boards/opennic/build.sh in its copy of this folder, sets
# nlb_hw_dir (the checkout's hw/) and nlb_defines; used from the checkout, the folder finds
# hw/ three levels up and sets no define.
if {[file exists nlb_build.tcl]} {
    source nlb_build.tcl
} else {
    set nlb_hw_dir [file normalize ../../..]
    set nlb_defines {}
}

lappend include_dirs ${nlb_hw_dir}/rtl
# Every block of hw/rtl (synthesis keeps what nlb_top uses) and the board's modules.
foreach f [lsort [glob ${nlb_hw_dir}/rtl/*.v]] {
    read_verilog -quiet $f
}
read_verilog -quiet ${nlb_hw_dir}/boards/opennic/rtl/nlb_plugin_322mhz.v
if {[lsearch -exact $nlb_defines NLB_STARTUPE3] >= 0} {
    read_verilog -quiet ${nlb_hw_dir}/boards/opennic/rtl/nlb_flash_startupe3.v
}
if {[llength $nlb_defines]} {
    set_property verilog_define [concat [get_property verilog_define [current_fileset]] $nlb_defines] [current_fileset]
}
read_xdc -unmanaged ${nlb_hw_dir}/boards/opennic/constr/nlb_cdc.xdc
