`resetall
`timescale 1ns / 1ps
`default_nettype none

// Multiplies by a constant modulo 2^WIDTH in carry-save form: sum + carry == x * CONST.
//
// Combinational. The partial products (x shifted to every set bit of CONST) are reduced by a
// Wallace tree of 3:2 compressors, so the depth is about log1.5(popcount(CONST)) XOR3/majority
// levels and no carry chain; the caller adds `sum + carry` in the next registered stage. The
// tree shape is computed at elaboration from CONST.
module nlb_mul_const_csa #(
    // Operand and result width in bits (the product is taken modulo 2^WIDTH).
    parameter WIDTH = 32,
    // The constant multiplier; only its low WIDTH bits matter.
    parameter [WIDTH-1:0] CONST = 1
) (
    input  wire [WIDTH-1:0] x,
    output wire [WIDTH-1:0] sum,
    output wire [WIDTH-1:0] carry
);

// Number of partial products: set bits of CONST.
function integer popcount_below(input integer limit);
    integer b;
    begin
        popcount_below = 0;
        for (b = 0; b < limit; b = b + 1) begin
            if (CONST[b]) begin
                popcount_below = popcount_below + 1;
            end
        end
    end
endfunction

localparam TERMS = popcount_below(WIDTH);

// Terms left after `level` rounds of 3:2 compression: every full group of three becomes two,
// the one or two left over pass through.
function integer terms_at(input integer level);
    integer l;
    begin
        terms_at = TERMS;
        for (l = 0; l < level; l = l + 1) begin
            terms_at = 2 * (terms_at / 3) + terms_at % 3;
        end
    end
endfunction

// Rounds until at most two terms remain (0 when CONST has at most two set bits).
function integer level_count(input integer dummy);
    integer n;
    begin
        level_count = 0 * dummy;
        n = TERMS;
        while (n > 2) begin
            n = 2 * (n / 3) + n % 3;
            level_count = level_count + 1;
        end
    end
endfunction

localparam LEVELS = level_count(0);

initial begin
    if (WIDTH < 2) begin
        $error("nlb_mul_const_csa: WIDTH must be at least 2");
        $finish;
    end
end

genvar b, l, k;

generate
    if (TERMS == 0) begin : g_zero
        assign sum = {WIDTH{1'b0}};
        assign carry = {WIDTH{1'b0}};
        // Waiver: x does not matter when the constant is zero.
        /* verilator lint_off UNUSEDSIGNAL */
        wire unused_x = ^x;
        /* verilator lint_on UNUSEDSIGNAL */
    end else begin : g_tree
        // Level l holds terms_at(l) terms of WIDTH bits; level 0 is one shifted copy of x per
        // set bit of CONST, level l+1 the 3:2 compression of level l.
        for (l = 0; l <= LEVELS; l = l + 1) begin : g_level
            wire [terms_at(l)*WIDTH-1:0] v;
            if (l == 0) begin : g_pp
                for (b = 0; b < WIDTH; b = b + 1) begin : g_bit
                    if (CONST[b]) begin : g_set
                        // Constants, not calls in the index: a simulator evaluates a function
                        // call in an expression every time the expression is (Verilator did,
                        // every clock, in every multiplier of the flow hash).
                        localparam integer SLOT = popcount_below(b);
                        assign v[SLOT*WIDTH +: WIDTH] = x << b;
                    end
                end
            end else begin : g_csa
                localparam integer GROUPS = terms_at(l-1) / 3;
                localparam integer PASSED = terms_at(l-1) % 3;
                for (k = 0; k < GROUPS; k = k + 1) begin : g_group
                    wire [WIDTH-1:0] a = g_level[l-1].v[(3*k + 0)*WIDTH +: WIDTH];
                    wire [WIDTH-1:0] c = g_level[l-1].v[(3*k + 1)*WIDTH +: WIDTH];
                    wire [WIDTH-1:0] d = g_level[l-1].v[(3*k + 2)*WIDTH +: WIDTH];
                    assign v[(2*k + 0)*WIDTH +: WIDTH] = a ^ c ^ d;
                    // The majority's top bit would land beyond WIDTH: the modulus drops it.
                    assign v[(2*k + 1)*WIDTH +: WIDTH] =
                        {(a[WIDTH-2:0] & c[WIDTH-2:0]) | (a[WIDTH-2:0] & d[WIDTH-2:0])
                            | (c[WIDTH-2:0] & d[WIDTH-2:0]), 1'b0};
                end
                for (k = 0; k < PASSED; k = k + 1) begin : g_pass
                    assign v[(2*GROUPS + k)*WIDTH +: WIDTH] =
                        g_level[l-1].v[(3*GROUPS + k)*WIDTH +: WIDTH];
                end
            end
        end

        assign sum = g_level[LEVELS].v[0 +: WIDTH];
        if (terms_at(LEVELS) == 2) begin : g_two
            assign carry = g_level[LEVELS].v[WIDTH +: WIDTH];
        end else begin : g_one
            assign carry = {WIDTH{1'b0}};
        end
    end
endgenerate

endmodule

`resetall
