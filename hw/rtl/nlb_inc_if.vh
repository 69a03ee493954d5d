// x + c, for c of 0 or 1, without a carry chain: bit i flips when c is set and every bit
// below it is 1 (a tree of LUTs a few levels deep; a 58-bit `+` is 15 CARRY4 in a row).
// Included inside the modules that use it (nlb_host_dma, nlb_cmd_ring).
function [63:0] inc_if(input [63:0] x, input c);
    integer i;
    begin
        for (i = 0; i < 64; i = i + 1) begin
            inc_if[i] = x[i] ^ (c && &(x | ~((64'd1 << i) - 64'd1)));
        end
    end
endfunction
