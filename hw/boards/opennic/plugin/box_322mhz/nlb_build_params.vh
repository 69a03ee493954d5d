// Build stamps of the plugin's firmware-ID block (fw_id, hw/regmap.toml). These are the values
// of a plugin folder used as it is in the repository; hw/boards/opennic/build.sh writes its own
// copy of the folder with the board's ids, the commit and the build time.
localparam [31:0] NLB_BUILD_ID = 32'd0;
localparam [31:0] NLB_GIT_HASH = 32'd0;
localparam [31:0] NLB_BOARD_ID = 32'h0280;
localparam [31:0] NLB_PART_ID = 32'h04B7D093;
