// The index bits of a ring of 2^log2 slots, 2^log2 - 1: bit i set when i < log2 (one compare
// with a constant per bit; a subtract of a shifted one would be a carry chain). Included
// inside the modules that use it (nlb_host_dma, nlb_cmd_ring).
function [15:0] ring_mask(input [3:0] log2);
    integer i;
    begin
        for (i = 0; i < 16; i = i + 1) begin
            ring_mask[i] = {28'd0, log2} > i;
        end
    end
endfunction
