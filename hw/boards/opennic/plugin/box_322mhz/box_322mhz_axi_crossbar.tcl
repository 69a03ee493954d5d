# The OpenNIC shell's build sources this file for every plugin (script/build.tcl): a plugin with
# several register slaves creates its AXI-Lite crossbar IP here. nlb-offload's 322 MHz box has
# one slave, nlb_plugin_322mhz, which decodes its own window: no crossbar is created.
