# nlb-offload's plugin for AMD's OpenNIC shell: the 250 MHz box's sources (see
# build_box_322mhz.tcl, which the shell sources after this one and which reads hw/rtl).
if {[file exists nlb_build.tcl]} {
    source nlb_build.tcl
} else {
    set nlb_hw_dir [file normalize ../../..]
}

read_verilog -quiet ${nlb_hw_dir}/boards/opennic/rtl/nlb_plugin_250mhz.v
