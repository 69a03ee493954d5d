// @generated from hw/regmap.toml; do not edit.
// Regenerate with: cargo run -p nlb-hw --bin nlb-regmap-gen
//
// Include inside a module body: `include "nlb_regmap.vh"
// Every module uses only part of the map, so unused parameters are expected here.
/* verilator lint_off UNUSEDPARAM */

// ---- meta ----
localparam NLB_REGMAP_VERSION = 32'h4;
localparam NLB_DESIGN_VERSION = 32'h10000;
localparam NLB_DATA_WIDTH = 512;
localparam NLB_BLOCK_TYPE_PREFIX = 32'h4e4c0000;

// ---- capacity profiles ----
localparam NLB_PROFILE_SIM_ID = 32'h1; // Small memories for simulation and CI.
localparam NLB_PROFILE_SIM_VIP_BUCKETS = 64;
localparam NLB_PROFILE_SIM_VIP_WAYS = 4;
localparam NLB_PROFILE_SIM_RULES = 256;
localparam NLB_PROFILE_SIM_POOLS = 128;
localparam NLB_PROFILE_SIM_MAGLEV_SLOTS = 131072;
localparam NLB_PROFILE_SIM_BACKENDS = 4096;
localparam NLB_PROFILE_SIM_CT_BUCKETS = 4096;
localparam NLB_PROFILE_SIM_CT_WAYS = 4;
localparam NLB_PROFILE_SIM_QUEUE_DEPTH = 64;
localparam NLB_PROFILE_U280_ID = 32'h2; // Production sizes for an Alveo U280 (Maglev slots and connections in HBM).
localparam NLB_PROFILE_U280_VIP_BUCKETS = 4096;
localparam NLB_PROFILE_U280_VIP_WAYS = 4;
localparam NLB_PROFILE_U280_RULES = 4096;
localparam NLB_PROFILE_U280_POOLS = 2048;
localparam NLB_PROFILE_U280_MAGLEV_SLOTS = 16777216;
localparam NLB_PROFILE_U280_BACKENDS = 65536;
localparam NLB_PROFILE_U280_CT_BUCKETS = 1048576;
localparam NLB_PROFILE_U280_CT_WAYS = 4;
localparam NLB_PROFILE_U280_QUEUE_DEPTH = 4096;

// ---- enumerations ----
// affinity: Session affinity of a pool: which flow key feeds the Maglev hash (SPEC R3.1).
localparam NLB_AFFINITY_NONE = 3'h0; // 5-tuple
localparam NLB_AFFINITY_CLIENT_IP = 3'h1; // 2-tuple (src IP, dst IP)
localparam NLB_AFFINITY_CLIENT_IP_PROTO = 3'h2; // 3-tuple (src IP, dst IP, protocol)
localparam NLB_AFFINITY_CLIENT_IP_PORT_PROTO = 3'h3; // 5-tuple (backend services)
localparam NLB_AFFINITY_CLIENT_IP_NO_DESTINATION = 3'h4; // 1-tuple (src IP only)
localparam NLB_AFFINITY_COUNT = 5; // values defined
// delivery: How a forwarded packet reaches its backend (SPEC R8.1).
localparam NLB_DELIVERY_L2_DSR = 2'h0; // rewrite destination MAC to the backend's, source MAC to the NIC's
localparam NLB_DELIVERY_IPIP = 2'h1; // outer IPv4 (or IPv6 for IPv6 VIPs) header, protocol 4 / 41
localparam NLB_DELIVERY_GUE = 2'h2; // outer IP + UDP to the configured GUE port, source port from the flow hash
localparam NLB_DELIVERY_COUNT = 3; // values defined
// key_type: First byte of the canonical hash key: which fields it carries.
localparam NLB_KEY_TYPE_VIP = 3'h0; // rule lookup: protocol + destination address
localparam NLB_KEY_TYPE_TUPLE1 = 3'h1; // source address
localparam NLB_KEY_TYPE_TUPLE2 = 3'h2; // source + destination address
localparam NLB_KEY_TYPE_TUPLE3 = 3'h3; // source + destination address + protocol
localparam NLB_KEY_TYPE_TUPLE5 = 3'h5; // source + destination address + protocol + ports
localparam NLB_KEY_TYPE_COUNT = 5; // values defined
// verdict: What happened to a packet.
localparam NLB_VERDICT_FORWARD = 2'h0; // sent to a backend on the transmit stream
localparam NLB_VERDICT_PUNT = 2'h1; // sent to the host slow path with a punt header
localparam NLB_VERDICT_DROP = 2'h2; // discarded and counted
localparam NLB_VERDICT_PASS = 2'h3; // not load-balanced: handed to the host network stack
localparam NLB_VERDICT_COUNT = 4; // values defined
// reason: Why a packet got its verdict; every reason has its own counter.
localparam NLB_REASON_FORWARDED = 5'h0; // matched a rule and went to a backend
localparam NLB_REASON_NO_RULE = 5'h1; // IP packet matching no forwarding rule (SPEC R2.4)
localparam NLB_REASON_NOT_IP = 5'h2; // not IPv4/IPv6 (ARP, LLDP, ...)
localparam NLB_REASON_ACL_DENIED = 5'h3; // source outside the rule's sourceRanges (SPEC R9.1)
localparam NLB_REASON_FRAGMENT_NEEDS_STATE = 5'h4; // fragment (first or later) on a VIP with several rules for its protocol: the host tracks the datagram (SPEC R4.3)
localparam NLB_REASON_NO_BACKEND = 5'h5; // the pool has no backend at all
localparam NLB_REASON_ICMP_ERROR_FORWARDED = 5'h6; // ICMP error about a VIP flow, sent to that flow's backend (SPEC R10.2)
localparam NLB_REASON_INJECTED = 5'h7; // frame injected by the host to a given backend
localparam NLB_REASON_RUNT = 5'h8; // frame shorter than an Ethernet header
localparam NLB_REASON_TRUNCATED_L2 = 5'h9; // VLAN tag cut off
localparam NLB_REASON_TOO_MANY_VLANS = 5'ha; // more than two VLAN tags
localparam NLB_REASON_TRUNCATED_L3 = 5'hb; // IP header cut off
localparam NLB_REASON_BAD_IP_VERSION = 5'hc; // version field does not match the EtherType
localparam NLB_REASON_BAD_IHL = 5'hd; // IPv4 IHL < 5
localparam NLB_REASON_BAD_IP_LENGTH = 5'he; // IP total/payload length beyond the frame or below the header
localparam NLB_REASON_BAD_IP_CHECKSUM = 5'hf; // IPv4 header checksum wrong
localparam NLB_REASON_EXT_CHAIN_TOO_LONG = 5'h10; // IPv6 extension header chain longer than the parser window
localparam NLB_REASON_TRUNCATED_L4 = 5'h11; // TCP/UDP header cut off (first fragment or whole packet)
localparam NLB_REASON_TOO_BIG = 5'h12; // encapsulation would exceed the maximum frame size
localparam NLB_REASON_PIPELINE_DISABLED = 5'h13; // ctrl.enable is 0: every frame is passed to the host
localparam NLB_REASON_ICMP_NO_FLOW = 5'h14; // ICMP error whose inner header matches no VIP flow (handled like NO_RULE)
localparam NLB_REASON_COUNT = 21; // values defined
// table: Table identifiers for the table write window.
localparam NLB_TABLE_VIP = 3'h0; // VIP table, index = bucket * vip_ways + way
localparam NLB_TABLE_RULE = 3'h1; // rule descriptors, index = rule id
localparam NLB_TABLE_ACL = 3'h2; // per-rule source ranges, index = rule id
localparam NLB_TABLE_POOL = 3'h3; // pool descriptors, index = pool id
localparam NLB_TABLE_MAGLEV = 3'h4; // Maglev slots, index = slot
localparam NLB_TABLE_BACKEND = 3'h5; // backend entries, index = backend id
localparam NLB_TABLE_COUNT = 6; // values defined
// event: Kinds of record on the learn/teardown event stream.
localparam NLB_EVENT_LEARN = 2'h1; // conntrack miss on a trackable packet: install (flow, backend)
localparam NLB_EVENT_TEARDOWN = 2'h2; // FIN or RST seen on a tracked or new TCP flow
localparam NLB_EVENT_COUNT = 2; // values defined
// default_action: What the pipeline does with packets matching no rule (SPEC R2.4).
localparam NLB_DEFAULT_ACTION_PASS = 1'h0; // hand to the host network stack
localparam NLB_DEFAULT_ACTION_DROP = 1'h1; // discard (counted)
localparam NLB_DEFAULT_ACTION_COUNT = 2; // values defined
// counter_kind: Counter families of the counters block (counters.select.kind).
localparam NLB_COUNTER_KIND_RULE = 2'h0; // per rule id: packets/bytes that matched the rule; punts and drops among them
localparam NLB_COUNTER_KIND_BACKEND = 2'h1; // per backend id: packets/bytes forwarded to it; drops of packets bound for it
localparam NLB_COUNTER_KIND_REASON = 2'h2; // per reason value
localparam NLB_COUNTER_KIND_VERDICT = 2'h3; // per verdict value
localparam NLB_COUNTER_KIND_COUNT = 4; // values defined
// boot_rejection: Why the boot logic refused the requested (user) image and loaded the fallback (reboot.boot_status.rejection).
localparam NLB_BOOT_REJECTION_NONE = 4'h0; // the requested image booted
localparam NLB_BOOT_REJECTION_NOT_A_SEGMENT = 4'h1; // boot_addr is not the start of a multiboot segment
localparam NLB_BOOT_REJECTION_MARKER_ERASED = 4'h2; // the segment's image marker is erased (never written, or the flash was interrupted)
localparam NLB_BOOT_REJECTION_MARKER_DAMAGED = 4'h3; // the marker's own CRC is wrong
localparam NLB_BOOT_REJECTION_TOO_LONG = 4'h4; // the marker's image length exceeds the segment
localparam NLB_BOOT_REJECTION_CRC_MISMATCH = 4'h5; // the image CRC-32 differs from the marker's
localparam NLB_BOOT_REJECTION_NO_SYNC = 4'h6; // no configuration sync word
localparam NLB_BOOT_REJECTION_WRONG_PART = 4'h7; // the bitstream's IDCODE is for another FPGA part
localparam NLB_BOOT_REJECTION_BAD_PACKET = 4'h8; // malformed configuration packet
localparam NLB_BOOT_REJECTION_TRUNCATED = 4'h9; // the configuration stream ends early
localparam NLB_BOOT_REJECTION_COUNT = 10; // values defined
// counter_snapshot: What a write of counters.snapshot does.
localparam NLB_COUNTER_SNAPSHOT_LATCH = 2'h1; // copy the selected counter into the read registers
localparam NLB_COUNTER_SNAPSHOT_LATCH_CLEAR = 2'h2; // copy it and clear it, in one step (no increment is lost)
localparam NLB_COUNTER_SNAPSHOT_COUNT = 2; // values defined
// reboot_key: The only value reboot.reboot acts on, so that a stray write cannot reload the FPGA.
localparam NLB_REBOOT_KEY_REBOOT = 31'h5245424f; // 'REBO': reload from flash at boot_addr
localparam NLB_REBOOT_KEY_COUNT = 1; // values defined
// ct_flag: Bits of ct_entry.flags (the host's bookkeeping of a connection; the pipeline does not read them).
localparam NLB_CT_FLAG_CLOSED = 1'h1; // FIN or RST seen: the connection ages out with the closed timeout
localparam NLB_CT_FLAG_COUNT = 1; // values defined
// table_cmd: Commands of the table write window and the conntrack access block (cmd.op). A write leaves the entry as the memory now stores it in the data words (the hardware reads it back), so reading the data words verifies it without another command. The *_AT forms carry the entry index in cmd.index (so every profile's deepest table must have at most 2^24 entries): one register write per command.
localparam NLB_TABLE_CMD_WRITE = 3'h1; // store the data words into entry `index`, then read it back into the data words; cmd.index must be 0
localparam NLB_TABLE_CMD_READ = 3'h2; // load entry `index` into the data words; cmd.index must be 0
localparam NLB_TABLE_CMD_WRITE_AT = 3'h3; // WRITE of the entry in cmd.index, which is also latched into `index`
localparam NLB_TABLE_CMD_READ_AT = 3'h4; // READ of the entry in cmd.index, which is also latched into `index`
localparam NLB_TABLE_CMD_COUNT = 4; // values defined

// ---- flow hash ----
// CRC-32C (Castagnoli; reflected, init 0xFFFFFFFF, xorout 0xFFFFFFFF, i.e. CRC-32/ISCSI) over the 40-byte canonical key, then the murmur3 fmix32 finaliser so that every key bit reaches every hash bit; a table of M entries is indexed by (hash * M) >> 32, which needs no divider and lets M be prime.
localparam NLB_HASH_CRC_POLY_REFLECTED = 32'h82f63b78;
localparam NLB_HASH_CRC_INIT = 32'hffffffff;
localparam NLB_HASH_CRC_XOROUT = 32'hffffffff;
localparam NLB_HASH_MIX_SHIFT1 = 16;
localparam NLB_HASH_MIX_MUL1 = 32'h85ebca6b;
localparam NLB_HASH_MIX_SHIFT2 = 13;
localparam NLB_HASH_MIX_MUL2 = 32'hc2b2ae35;
localparam NLB_HASH_MIX_SHIFT3 = 16;
localparam NLB_HASH_KEY_BYTES = 40;
localparam NLB_HASH_KEY_KEY_TYPE_OFFSET = 0; // enum key_type
localparam NLB_HASH_KEY_KEY_TYPE_LEN = 1;
localparam NLB_HASH_KEY_PROTOCOL_OFFSET = 1; // IP protocol (6 TCP, 17 UDP); TUPLE3, TUPLE5, VIP
localparam NLB_HASH_KEY_PROTOCOL_LEN = 1;
localparam NLB_HASH_KEY_SRC_PORT_OFFSET = 2; // TUPLE5 only
localparam NLB_HASH_KEY_SRC_PORT_LEN = 2;
localparam NLB_HASH_KEY_DST_PORT_OFFSET = 4; // TUPLE5 only
localparam NLB_HASH_KEY_DST_PORT_LEN = 2;
localparam NLB_HASH_KEY_RESERVED_OFFSET = 6; // zero
localparam NLB_HASH_KEY_RESERVED_LEN = 2;
localparam NLB_HASH_KEY_SRC_ADDR_OFFSET = 8; // all but VIP
localparam NLB_HASH_KEY_SRC_ADDR_LEN = 16;
localparam NLB_HASH_KEY_DST_ADDR_OFFSET = 24; // TUPLE2, TUPLE3, TUPLE5, VIP
localparam NLB_HASH_KEY_DST_ADDR_LEN = 16;

// ---- table entry layouts (LSB = bit position in the entry, W = width) ----
// port_slot: One port-range slot of a VIP entry: destination ports lo..=hi go to rule `rule`.
localparam NLB_PORT_SLOT_WIDTH = 45;
localparam NLB_PORT_SLOT_WORDS = 2;
localparam NLB_PORT_SLOT_VALID_LSB = 0;
localparam NLB_PORT_SLOT_VALID_W = 1;
localparam NLB_PORT_SLOT_PORT_LO_LSB = 1;
localparam NLB_PORT_SLOT_PORT_LO_W = 16;
localparam NLB_PORT_SLOT_PORT_HI_LSB = 17;
localparam NLB_PORT_SLOT_PORT_HI_W = 16;
localparam NLB_PORT_SLOT_RULE_LSB = 33; // rule id
localparam NLB_PORT_SLOT_RULE_W = 12;
// vip_entry: VIP table entry: one (VIP, protocol) with its port-range slots (16: at least 16 rules per VIP and protocol in every profile). Bucket = (hash(VIP key) * vip_buckets) >> 32; the ways of a bucket are compared in parallel, then the slots, all 16 in parallel (the lowest matching slot wins).
localparam NLB_VIP_ENTRY_WIDTH = 857;
localparam NLB_VIP_ENTRY_WORDS = 27;
localparam NLB_VIP_ENTRY_VALID_LSB = 0;
localparam NLB_VIP_ENTRY_VALID_W = 1;
localparam NLB_VIP_ENTRY_PROTOCOL_LSB = 1;
localparam NLB_VIP_ENTRY_PROTOCOL_W = 8;
localparam NLB_VIP_ENTRY_ADDR_LSB = 9; // VIP, IPv4 mapped
localparam NLB_VIP_ENTRY_ADDR_W = 128;
localparam NLB_VIP_ENTRY_SLOT_LSB = 137;
localparam NLB_VIP_ENTRY_SLOT_W = 45;
localparam NLB_VIP_ENTRY_SLOT_COUNT = 16;
// rule_entry: Forwarding rule descriptor, indexed by rule id; also the index of the rule's counters.
localparam NLB_RULE_ENTRY_WIDTH = 14;
localparam NLB_RULE_ENTRY_WORDS = 1;
localparam NLB_RULE_ENTRY_VALID_LSB = 0;
localparam NLB_RULE_ENTRY_VALID_W = 1;
localparam NLB_RULE_ENTRY_ACL_ENABLED_LSB = 1; // check the rule's ACL entry (sourceRanges)
localparam NLB_RULE_ENTRY_ACL_ENABLED_W = 1;
localparam NLB_RULE_ENTRY_POOL_LSB = 2; // pool id of the target pool or target instance
localparam NLB_RULE_ENTRY_POOL_W = 12;
// acl_prefix: One source prefix: addr/len over the 128-bit (IPv4-mapped) source address.
localparam NLB_ACL_PREFIX_WIDTH = 137;
localparam NLB_ACL_PREFIX_WORDS = 5;
localparam NLB_ACL_PREFIX_VALID_LSB = 0;
localparam NLB_ACL_PREFIX_VALID_W = 1;
localparam NLB_ACL_PREFIX_PREFIX_LEN_LSB = 1; // 0..=128; IPv4 /n is stored as /(96+n)
localparam NLB_ACL_PREFIX_PREFIX_LEN_W = 8;
localparam NLB_ACL_PREFIX_ADDR_LSB = 9;
localparam NLB_ACL_PREFIX_ADDR_W = 128;
// acl_entry: A rule's source allow-list (SPEC R9.1), indexed by rule id; all prefixes compared in parallel.
localparam NLB_ACL_ENTRY_WIDTH = 1096;
localparam NLB_ACL_ENTRY_WORDS = 35;
localparam NLB_ACL_ENTRY_PREFIX_LSB = 0;
localparam NLB_ACL_ENTRY_PREFIX_W = 137;
localparam NLB_ACL_ENTRY_PREFIX_COUNT = 8;
// pool_entry: Pool descriptor, indexed by pool id. maglev_base/maglev_size describe the slice that serves now: when the compiler fails a pool over (SPEC R1 failoverRatio), they point at the backup pool's slice and `failed_over` is set.
localparam NLB_POOL_ENTRY_WIDTH = 88;
localparam NLB_POOL_ENTRY_WORDS = 3;
localparam NLB_POOL_ENTRY_VALID_LSB = 0;
localparam NLB_POOL_ENTRY_VALID_W = 1;
localparam NLB_POOL_ENTRY_AFFINITY_LSB = 1;
localparam NLB_POOL_ENTRY_AFFINITY_W = 3;
localparam NLB_POOL_ENTRY_DELIVERY_LSB = 4;
localparam NLB_POOL_ENTRY_DELIVERY_W = 2;
localparam NLB_POOL_ENTRY_MAGLEV_BASE_LSB = 6; // first slot of the serving slice
localparam NLB_POOL_ENTRY_MAGLEV_BASE_W = 24;
localparam NLB_POOL_ENTRY_MAGLEV_SIZE_LSB = 30; // M: slots in the slice (prime, or 1); 0 = no backend
localparam NLB_POOL_ENTRY_MAGLEV_SIZE_W = 17;
localparam NLB_POOL_ENTRY_BACKUP_POOL_LSB = 47;
localparam NLB_POOL_ENTRY_BACKUP_POOL_W = 12;
localparam NLB_POOL_ENTRY_HAS_BACKUP_LSB = 59;
localparam NLB_POOL_ENTRY_HAS_BACKUP_W = 1;
localparam NLB_POOL_ENTRY_FAILOVER_RATIO_LSB = 60; // failoverRatio x 1000
localparam NLB_POOL_ENTRY_FAILOVER_RATIO_W = 10;
localparam NLB_POOL_ENTRY_FAILED_OVER_LSB = 70; // the backup pool's slice serves
localparam NLB_POOL_ENTRY_FAILED_OVER_W = 1;
localparam NLB_POOL_ENTRY_TRACK_LSB = 71; // trackable packets of this pool use the connection table
localparam NLB_POOL_ENTRY_TRACK_W = 1;
localparam NLB_POOL_ENTRY_IDLE_TIMEOUT_LSB = 72; // connection idle timeout, seconds (host ageing)
localparam NLB_POOL_ENTRY_IDLE_TIMEOUT_W = 16;
// maglev_slot: One Maglev lookup-table slot.
localparam NLB_MAGLEV_SLOT_WIDTH = 16;
localparam NLB_MAGLEV_SLOT_WORDS = 1;
localparam NLB_MAGLEV_SLOT_BACKEND_LSB = 0; // backend id
localparam NLB_MAGLEV_SLOT_BACKEND_W = 16;
// backend_entry: Backend entry, indexed by backend id.
localparam NLB_BACKEND_ENTRY_WIDTH = 178;
localparam NLB_BACKEND_ENTRY_WORDS = 6;
localparam NLB_BACKEND_ENTRY_VALID_LSB = 0;
localparam NLB_BACKEND_ENTRY_VALID_W = 1;
localparam NLB_BACKEND_ENTRY_IS_IPV6_LSB = 1;
localparam NLB_BACKEND_ENTRY_IS_IPV6_W = 1;
localparam NLB_BACKEND_ENTRY_ADDR_LSB = 2; // IPv4 mapped
localparam NLB_BACKEND_ENTRY_ADDR_W = 128;
localparam NLB_BACKEND_ENTRY_MAC_LSB = 130; // backend MAC (L2_DSR) or next-hop MAC (IPIP/GUE)
localparam NLB_BACKEND_ENTRY_MAC_W = 48;
// ct_entry: Connection table entry. Bucket = (hash(TUPLE5 key) * ct_buckets) >> 32; index = bucket * ct_ways + way. The host writes `valid` last (a separate write of the first data word).
localparam NLB_CT_ENTRY_WIDTH = 365;
localparam NLB_CT_ENTRY_WORDS = 12;
localparam NLB_CT_ENTRY_VALID_LSB = 0;
localparam NLB_CT_ENTRY_VALID_W = 1;
localparam NLB_CT_ENTRY_PROTOCOL_LSB = 1;
localparam NLB_CT_ENTRY_PROTOCOL_W = 8;
localparam NLB_CT_ENTRY_SRC_PORT_LSB = 9;
localparam NLB_CT_ENTRY_SRC_PORT_W = 16;
localparam NLB_CT_ENTRY_DST_PORT_LSB = 25;
localparam NLB_CT_ENTRY_DST_PORT_W = 16;
localparam NLB_CT_ENTRY_SRC_ADDR_LSB = 41;
localparam NLB_CT_ENTRY_SRC_ADDR_W = 128;
localparam NLB_CT_ENTRY_DST_ADDR_LSB = 169;
localparam NLB_CT_ENTRY_DST_ADDR_W = 128;
localparam NLB_CT_ENTRY_BACKEND_LSB = 297;
localparam NLB_CT_ENTRY_BACKEND_W = 16;
localparam NLB_CT_ENTRY_RULE_LSB = 313;
localparam NLB_CT_ENTRY_RULE_W = 12;
localparam NLB_CT_ENTRY_FLAGS_LSB = 325; // enum ct_flag bits; others reserved
localparam NLB_CT_ENTRY_FLAGS_W = 8;
localparam NLB_CT_ENTRY_TIMESTAMP_LSB = 333; // host time of install/last refresh, seconds
localparam NLB_CT_ENTRY_TIMESTAMP_W = 32;
// punt_header: Metadata beat prepended to every frame on the punt stream (first 64 bytes of the frame follow from the next beat).
localparam NLB_PUNT_HEADER_WIDTH = 102;
localparam NLB_PUNT_HEADER_WORDS = 4;
localparam NLB_PUNT_HEADER_REASON_LSB = 0;
localparam NLB_PUNT_HEADER_REASON_W = 8;
localparam NLB_PUNT_HEADER_VERDICT_LSB = 8;
localparam NLB_PUNT_HEADER_VERDICT_W = 2;
localparam NLB_PUNT_HEADER_BANK_LSB = 10;
localparam NLB_PUNT_HEADER_BANK_W = 1;
localparam NLB_PUNT_HEADER_RULE_VALID_LSB = 11;
localparam NLB_PUNT_HEADER_RULE_VALID_W = 1;
localparam NLB_PUNT_HEADER_RULE_LSB = 12;
localparam NLB_PUNT_HEADER_RULE_W = 12;
localparam NLB_PUNT_HEADER_FLOW_HASH_LSB = 24; // TUPLE5 hash (TUPLE3 for fragments)
localparam NLB_PUNT_HEADER_FLOW_HASH_W = 32;
localparam NLB_PUNT_HEADER_FRAME_LEN_LSB = 56;
localparam NLB_PUNT_HEADER_FRAME_LEN_W = 14;
localparam NLB_PUNT_HEADER_IP_ID_LSB = 70; // IPv4 identification or IPv6 fragment identification
localparam NLB_PUNT_HEADER_IP_ID_W = 32;
// learn_event: One record on the learn/teardown stream.
localparam NLB_LEARN_EVENT_WIDTH = 358;
localparam NLB_LEARN_EVENT_WORDS = 12;
localparam NLB_LEARN_EVENT_EVENT_LSB = 0;
localparam NLB_LEARN_EVENT_EVENT_W = 2;
localparam NLB_LEARN_EVENT_PROTOCOL_LSB = 2;
localparam NLB_LEARN_EVENT_PROTOCOL_W = 8;
localparam NLB_LEARN_EVENT_SRC_PORT_LSB = 10;
localparam NLB_LEARN_EVENT_SRC_PORT_W = 16;
localparam NLB_LEARN_EVENT_DST_PORT_LSB = 26;
localparam NLB_LEARN_EVENT_DST_PORT_W = 16;
localparam NLB_LEARN_EVENT_SRC_ADDR_LSB = 42;
localparam NLB_LEARN_EVENT_SRC_ADDR_W = 128;
localparam NLB_LEARN_EVENT_DST_ADDR_LSB = 170;
localparam NLB_LEARN_EVENT_DST_ADDR_W = 128;
localparam NLB_LEARN_EVENT_BACKEND_LSB = 298;
localparam NLB_LEARN_EVENT_BACKEND_W = 16;
localparam NLB_LEARN_EVENT_RULE_LSB = 314;
localparam NLB_LEARN_EVENT_RULE_W = 12;
localparam NLB_LEARN_EVENT_FLOW_HASH_LSB = 326;
localparam NLB_LEARN_EVENT_FLOW_HASH_W = 32;
// inject_header: Descriptor the host writes before an injected frame: send it to `backend` with `pool`'s delivery.
localparam NLB_INJECT_HEADER_WIDTH = 42;
localparam NLB_INJECT_HEADER_WORDS = 2;
localparam NLB_INJECT_HEADER_BACKEND_LSB = 0;
localparam NLB_INJECT_HEADER_BACKEND_W = 16;
localparam NLB_INJECT_HEADER_POOL_LSB = 16;
localparam NLB_INJECT_HEADER_POOL_W = 12;
localparam NLB_INJECT_HEADER_FRAME_LEN_LSB = 28;
localparam NLB_INJECT_HEADER_FRAME_LEN_W = 14;
// slot_marker: The validity marker of a flash slot, at the start of its segment's marker area ([flash]), stored as little-endian words (byte 0 = bits 7..0 of word 0). Written last, after the image has been verified; the boot logic loads a segment's image only when its marker is valid and the image matches it.
localparam NLB_SLOT_MARKER_WIDTH = 512;
localparam NLB_SLOT_MARKER_WORDS = 16;
localparam NLB_SLOT_MARKER_MAGIC_LSB = 0; // flash.marker_magic, NUL-padded
localparam NLB_SLOT_MARKER_MAGIC_W = 64;
localparam NLB_SLOT_MARKER_VERSION_LSB = 64; // flash.marker_version
localparam NLB_SLOT_MARKER_VERSION_W = 32;
localparam NLB_SLOT_MARKER_IMAGE_LEN_LSB = 96; // bytes of the image, from the segment base
localparam NLB_SLOT_MARKER_IMAGE_LEN_W = 32;
localparam NLB_SLOT_MARKER_IMAGE_CRC32_LSB = 128; // CRC-32 (ISO-HDLC, as zlib) of those bytes
localparam NLB_SLOT_MARKER_IMAGE_CRC32_W = 32;
localparam NLB_SLOT_MARKER_IDCODE_LSB = 160; // IDCODE the bitstream was built for (without revision), 0 when unknown
localparam NLB_SLOT_MARKER_IDCODE_W = 32;
localparam NLB_SLOT_MARKER_HAS_USR_ACCESS_LSB = 192; // usr_access holds the bitstream's USR_ACCESS word
localparam NLB_SLOT_MARKER_HAS_USR_ACCESS_W = 1;
localparam NLB_SLOT_MARKER_RESERVED_LSB = 193; // zero
localparam NLB_SLOT_MARKER_RESERVED_W = 31;
localparam NLB_SLOT_MARKER_USR_ACCESS_LSB = 224;
localparam NLB_SLOT_MARKER_USR_ACCESS_W = 32;
localparam NLB_SLOT_MARKER_WRITTEN_AT_LSB = 256; // seconds since the Unix epoch (informational)
localparam NLB_SLOT_MARKER_WRITTEN_AT_W = 32;
localparam NLB_SLOT_MARKER_DESIGN_LSB = 288; // design name from the .bit header, NUL-padded (empty for a raw .bin)
localparam NLB_SLOT_MARKER_DESIGN_W = 192;
localparam NLB_SLOT_MARKER_CRC_LSB = 480; // CRC-32 (ISO-HDLC) of the marker's bytes before this field
localparam NLB_SLOT_MARKER_CRC_W = 32;

// ---- register blocks (absolute byte addresses) ----
localparam NLB_BLK_HEADER_BYTES = 32'hc; // TYPE, VERSION, NEXT: the registers every block starts with
// fw_id: Firmware identity and capacities: the first block, read before anything else.
localparam NLB_BLK_FW_ID_BASE = 32'h0;
localparam NLB_BLK_FW_ID_TYPE = 32'h4e4c0001;
localparam NLB_BLK_FW_ID_VERSION = 32'h1;
localparam NLB_BLK_FW_ID_NEXT = 32'h1000;
localparam NLB_BLK_FW_ID_SPAN = 32'h1000; // bytes from the base the block's registers lie in
localparam NLB_REG_FW_ID_TYPE = 32'h0;
localparam NLB_REG_FW_ID_VERSION = 32'h4;
localparam NLB_REG_FW_ID_NEXT = 32'h8;
localparam NLB_REG_FW_ID_DESIGN_VERSION = 32'hc; // [ro] meta.design_version of the build
localparam NLB_REG_FW_ID_DESIGN_VERSION_RESET = 32'h0;
localparam NLB_REG_FW_ID_DESIGN_VERSION_DEFINED = 32'hffffffff; // bits the register defines
localparam NLB_REG_FW_ID_DESIGN_VERSION_MINOR_LSB = 0; // `minor`, bits 15..0
localparam NLB_REG_FW_ID_DESIGN_VERSION_MINOR_W = 16;
localparam NLB_REG_FW_ID_DESIGN_VERSION_MINOR_MASK = 32'hffff;
localparam NLB_REG_FW_ID_DESIGN_VERSION_MAJOR_LSB = 16; // `major`, bits 31..16
localparam NLB_REG_FW_ID_DESIGN_VERSION_MAJOR_W = 16;
localparam NLB_REG_FW_ID_DESIGN_VERSION_MAJOR_MASK = 32'hffff0000;
localparam NLB_REG_FW_ID_REGMAP_VERSION = 32'h10; // [ro] meta.regmap_version of the build
localparam NLB_REG_FW_ID_BUILD_ID = 32'h14; // [ro] build timestamp, seconds since the Unix epoch
localparam NLB_REG_FW_ID_GIT_HASH = 32'h18; // [ro] first 8 hex digits of the source commit
localparam NLB_REG_FW_ID_BOARD_ID = 32'h1c; // [ro] board code (0x0280 = Alveo U280, 0x5100 = simulated)
localparam NLB_REG_FW_ID_PART_ID = 32'h20; // [ro] FPGA part code (IDCODE without revision)
localparam NLB_REG_FW_ID_PROFILE_ID = 32'h24; // [ro] capacity profile id
localparam NLB_REG_FW_ID_CAP_VIP_BUCKETS = 32'h28; // [ro] 
localparam NLB_REG_FW_ID_CAP_VIP_WAYS = 32'h2c; // [ro] 
localparam NLB_REG_FW_ID_CAP_RULES = 32'h30; // [ro] 
localparam NLB_REG_FW_ID_CAP_POOLS = 32'h34; // [ro] 
localparam NLB_REG_FW_ID_CAP_MAGLEV_SLOTS = 32'h38; // [ro] 
localparam NLB_REG_FW_ID_CAP_BACKENDS = 32'h3c; // [ro] 
localparam NLB_REG_FW_ID_CAP_CT_BUCKETS = 32'h40; // [ro] 
localparam NLB_REG_FW_ID_CAP_CT_WAYS = 32'h44; // [ro] 
localparam NLB_REG_FW_ID_CAP_QUEUE_DEPTH = 32'h48; // [ro] 
// ctrl: Pipeline control. ACTIVE_BANK is latched per packet at its first beat.
localparam NLB_BLK_CTRL_BASE = 32'h1000;
localparam NLB_BLK_CTRL_TYPE = 32'h4e4c0002;
localparam NLB_BLK_CTRL_VERSION = 32'h1;
localparam NLB_BLK_CTRL_NEXT = 32'h2000;
localparam NLB_BLK_CTRL_SPAN = 32'h1000; // bytes from the base the block's registers lie in
localparam NLB_REG_CTRL_TYPE = 32'h1000;
localparam NLB_REG_CTRL_VERSION = 32'h1004;
localparam NLB_REG_CTRL_NEXT = 32'h1008;
localparam NLB_REG_CTRL_ENABLE = 32'h100c; // [rw] pipeline on/off
localparam NLB_REG_CTRL_ENABLE_RESET = 32'h0;
localparam NLB_REG_CTRL_ENABLE_DEFINED = 32'h1; // bits the register defines
localparam NLB_REG_CTRL_ENABLE_ENABLE_LSB = 0; // `enable`, bit 0: pipeline enabled (disabled: every frame is passed to host)
localparam NLB_REG_CTRL_ENABLE_ENABLE_W = 1;
localparam NLB_REG_CTRL_ENABLE_ENABLE_MASK = 32'h1;
localparam NLB_REG_CTRL_ACTIVE_BANK = 32'h1010; // [rw] table bank of new packets
localparam NLB_REG_CTRL_ACTIVE_BANK_RESET = 32'h0;
localparam NLB_REG_CTRL_ACTIVE_BANK_DEFINED = 32'h1; // bits the register defines
localparam NLB_REG_CTRL_ACTIVE_BANK_BANK_LSB = 0; // `bank`, bit 0: table bank used by new packets
localparam NLB_REG_CTRL_ACTIVE_BANK_BANK_W = 1;
localparam NLB_REG_CTRL_ACTIVE_BANK_BANK_MASK = 32'h1;
localparam NLB_REG_CTRL_GENERATION = 32'h1014; // [rw] table generation, written by the loader with the flip; the driver reads it back after a restart
localparam NLB_REG_CTRL_GENERATION_RESET = 32'h0;
localparam NLB_REG_CTRL_DEFAULT_ACTION = 32'h1018; // [rw] what happens to packets matching no rule
localparam NLB_REG_CTRL_DEFAULT_ACTION_RESET = 32'h0;
localparam NLB_REG_CTRL_DEFAULT_ACTION_DEFINED = 32'h1; // bits the register defines
localparam NLB_REG_CTRL_DEFAULT_ACTION_ACTION_LSB = 0; // `action`, bit 0 (enum `default_action`)
localparam NLB_REG_CTRL_DEFAULT_ACTION_ACTION_W = 1;
localparam NLB_REG_CTRL_DEFAULT_ACTION_ACTION_MASK = 32'h1;
localparam NLB_REG_CTRL_LOCAL_MAC_LO = 32'h101c; // [rw] NIC MAC (source MAC of forwarded frames), bits 31..0 of wide local_mac
localparam NLB_REG_CTRL_LOCAL_MAC_LO_RESET = 32'h1;
localparam NLB_REG_CTRL_LOCAL_MAC_HI = 32'h1020; // [rw] NIC MAC, bits 47..32 of wide local_mac (reset: the locally administered 02:00:00:00:00:01)
localparam NLB_REG_CTRL_LOCAL_MAC_HI_RESET = 32'h200;
localparam NLB_REG_CTRL_LOCAL_MAC_HI_DEFINED = 32'hffff; // bits the register defines
localparam NLB_REG_CTRL_LOCAL_MAC_HI_MAC_HI_LSB = 0; // `mac_hi`, bits 15..0: MAC bits 47..32
localparam NLB_REG_CTRL_LOCAL_MAC_HI_MAC_HI_W = 16;
localparam NLB_REG_CTRL_LOCAL_MAC_HI_MAC_HI_MASK = 32'hffff;
localparam NLB_REG_CTRL_GUE_PORT = 32'h1024; // [rw] UDP destination port of GUE encapsulation
localparam NLB_REG_CTRL_GUE_PORT_RESET = 32'h17c0;
localparam NLB_REG_CTRL_GUE_PORT_DEFINED = 32'hffff; // bits the register defines
localparam NLB_REG_CTRL_GUE_PORT_PORT_LSB = 0; // `port`, bits 15..0
localparam NLB_REG_CTRL_GUE_PORT_PORT_W = 16;
localparam NLB_REG_CTRL_GUE_PORT_PORT_MASK = 32'hffff;
localparam NLB_REG_CTRL_OUTER_SRC_V4 = 32'h1028; // [rw] outer IPv4 source prefix (IPIP/GUE)
localparam NLB_REG_CTRL_OUTER_SRC_V4_RESET = 32'h0;
localparam NLB_REG_CTRL_OUTER_SRC_V4_LEN = 32'h102c; // [rw] its length; host bits come from the flow hash. Writes above 32 store 32
localparam NLB_REG_CTRL_OUTER_SRC_V4_LEN_RESET = 32'h20;
localparam NLB_REG_CTRL_OUTER_SRC_V4_LEN_DEFINED = 32'h3f; // bits the register defines
localparam NLB_REG_CTRL_OUTER_SRC_V4_LEN_LEN_LSB = 0; // `len`, bits 5..0: 0..=32
localparam NLB_REG_CTRL_OUTER_SRC_V4_LEN_LEN_W = 6;
localparam NLB_REG_CTRL_OUTER_SRC_V4_LEN_LEN_MASK = 32'h3f;
localparam NLB_REG_CTRL_OUTER_SRC_V6_0 = 32'h1030; // [rw] outer IPv6 source prefix, bits 127..96 of wide outer_src_v6
localparam NLB_REG_CTRL_OUTER_SRC_V6_0_RESET = 32'h0;
localparam NLB_REG_CTRL_OUTER_SRC_V6_1 = 32'h1034; // [rw] bits 95..64 of wide outer_src_v6
localparam NLB_REG_CTRL_OUTER_SRC_V6_1_RESET = 32'h0;
localparam NLB_REG_CTRL_OUTER_SRC_V6_2 = 32'h1038; // [rw] bits 63..32 of wide outer_src_v6
localparam NLB_REG_CTRL_OUTER_SRC_V6_2_RESET = 32'h0;
localparam NLB_REG_CTRL_OUTER_SRC_V6_3 = 32'h103c; // [rw] bits 31..0 of wide outer_src_v6
localparam NLB_REG_CTRL_OUTER_SRC_V6_3_RESET = 32'h0;
localparam NLB_REG_CTRL_OUTER_SRC_V6_LEN = 32'h1040; // [rw] its length. Writes above 128 store 128
localparam NLB_REG_CTRL_OUTER_SRC_V6_LEN_RESET = 32'h80;
localparam NLB_REG_CTRL_OUTER_SRC_V6_LEN_DEFINED = 32'hff; // bits the register defines
localparam NLB_REG_CTRL_OUTER_SRC_V6_LEN_LEN_LSB = 0; // `len`, bits 7..0: 0..=128
localparam NLB_REG_CTRL_OUTER_SRC_V6_LEN_LEN_W = 8;
localparam NLB_REG_CTRL_OUTER_SRC_V6_LEN_LEN_MASK = 32'hff;
localparam NLB_REG_CTRL_PACKETS_IN_FLIGHT = 32'h1044; // [ro] packets between parser and editor (the loader waits for 0 after a flip before reusing the old bank)
localparam NLB_REG_CTRL_BANK_IN_USE = 32'h1048; // [ro] banks latched by packets in flight
localparam NLB_REG_CTRL_BANK_IN_USE_RESET = 32'h0;
localparam NLB_REG_CTRL_BANK_IN_USE_DEFINED = 32'h3; // bits the register defines
localparam NLB_REG_CTRL_BANK_IN_USE_BANK0_LSB = 0; // `bank0`, bit 0: a packet latched on bank 0 is in flight
localparam NLB_REG_CTRL_BANK_IN_USE_BANK0_W = 1;
localparam NLB_REG_CTRL_BANK_IN_USE_BANK0_MASK = 32'h1;
localparam NLB_REG_CTRL_BANK_IN_USE_BANK1_LSB = 1; // `bank1`, bit 1: a packet latched on bank 1 is in flight
localparam NLB_REG_CTRL_BANK_IN_USE_BANK1_W = 1;
localparam NLB_REG_CTRL_BANK_IN_USE_BANK1_MASK = 32'h2;
localparam NLB_WIDE_CTRL_LOCAL_MAC_W = 48; // the NIC's MAC, first octet in bits 47..40 (registers least significant first)
localparam NLB_REG_CTRL_LOCAL_MAC_LO_WIDE_LSB = 0; // first bit of wide local_mac held by local_mac_lo
localparam NLB_REG_CTRL_LOCAL_MAC_HI_WIDE_LSB = 32; // first bit of wide local_mac held by local_mac_hi
localparam NLB_WIDE_CTRL_OUTER_SRC_V6_W = 128; // outer IPv6 source prefix (registers least significant first)
localparam NLB_REG_CTRL_OUTER_SRC_V6_3_WIDE_LSB = 0; // first bit of wide outer_src_v6 held by outer_src_v6_3
localparam NLB_REG_CTRL_OUTER_SRC_V6_2_WIDE_LSB = 32; // first bit of wide outer_src_v6 held by outer_src_v6_2
localparam NLB_REG_CTRL_OUTER_SRC_V6_1_WIDE_LSB = 64; // first bit of wide outer_src_v6 held by outer_src_v6_1
localparam NLB_REG_CTRL_OUTER_SRC_V6_0_WIDE_LSB = 96; // first bit of wide outer_src_v6 held by outer_src_v6_0
// table: Table window: select table and bank, fill the data words that differ from what the window holds, issue WRITE_AT with the index; the data words then hold the stored entry (read them to verify).
localparam NLB_BLK_TABLE_BASE = 32'h2000;
localparam NLB_BLK_TABLE_TYPE = 32'h4e4c0003;
localparam NLB_BLK_TABLE_VERSION = 32'h2;
localparam NLB_BLK_TABLE_NEXT = 32'h3000;
localparam NLB_BLK_TABLE_SPAN = 32'h1000; // bytes from the base the block's registers lie in
localparam NLB_REG_TABLE_TYPE = 32'h2000;
localparam NLB_REG_TABLE_VERSION = 32'h2004;
localparam NLB_REG_TABLE_NEXT = 32'h2008;
localparam NLB_REG_TABLE_SELECT = 32'h200c; // [rw] the table and bank the window addresses
localparam NLB_REG_TABLE_SELECT_RESET = 32'h0;
localparam NLB_REG_TABLE_SELECT_DEFINED = 32'h1ff; // bits the register defines
localparam NLB_REG_TABLE_SELECT_TABLE_LSB = 0; // `table`, bits 7..0 (enum `table`)
localparam NLB_REG_TABLE_SELECT_TABLE_W = 8;
localparam NLB_REG_TABLE_SELECT_TABLE_MASK = 32'hff;
localparam NLB_REG_TABLE_SELECT_BANK_LSB = 8; // `bank`, bit 8
localparam NLB_REG_TABLE_SELECT_BANK_W = 1;
localparam NLB_REG_TABLE_SELECT_BANK_MASK = 32'h100;
localparam NLB_REG_TABLE_INDEX = 32'h2010; // [rw] entry index in the selected table (WRITE/READ); WRITE_AT/READ_AT set it to theirs
localparam NLB_REG_TABLE_INDEX_RESET = 32'h0;
localparam NLB_REG_TABLE_CMD = 32'h2014; // [wo] a command; executes at once
localparam NLB_REG_TABLE_CMD_RESET = 32'h0;
localparam NLB_REG_TABLE_CMD_DEFINED = 32'hffffffff; // bits the register defines
localparam NLB_REG_TABLE_CMD_OP_LSB = 0; // `op`, bits 7..0 (enum `table_cmd`)
localparam NLB_REG_TABLE_CMD_OP_W = 8;
localparam NLB_REG_TABLE_CMD_OP_MASK = 32'hff;
localparam NLB_REG_TABLE_CMD_INDEX_LSB = 8; // `index`, bits 31..8: entry index of WRITE_AT/READ_AT (0 for WRITE/READ)
localparam NLB_REG_TABLE_CMD_INDEX_W = 24;
localparam NLB_REG_TABLE_CMD_INDEX_MASK = 32'hffffff00;
localparam NLB_REG_TABLE_STATUS = 32'h2018; // [ro] outcome of the last command
localparam NLB_REG_TABLE_STATUS_RESET = 32'h0;
localparam NLB_REG_TABLE_STATUS_DEFINED = 32'h3; // bits the register defines
localparam NLB_REG_TABLE_STATUS_BUSY_LSB = 0; // `busy`, bit 0
localparam NLB_REG_TABLE_STATUS_BUSY_W = 1;
localparam NLB_REG_TABLE_STATUS_BUSY_MASK = 32'h1;
localparam NLB_REG_TABLE_STATUS_ERROR_LSB = 1; // `error`, bit 1: index out of range, bad table, bad command or an entry the table cannot hold
localparam NLB_REG_TABLE_STATUS_ERROR_W = 1;
localparam NLB_REG_TABLE_STATUS_ERROR_MASK = 32'h2;
localparam NLB_REG_TABLE_DATA = 32'h2100; // [rw] entry words, word 0 = bits 31..0
localparam NLB_REG_TABLE_DATA_COUNT = 64;
// conntrack: Connection table access (one bank; connections outlive table loads) and hit tracking.
localparam NLB_BLK_CONNTRACK_BASE = 32'h3000;
localparam NLB_BLK_CONNTRACK_TYPE = 32'h4e4c0004;
localparam NLB_BLK_CONNTRACK_VERSION = 32'h2;
localparam NLB_BLK_CONNTRACK_NEXT = 32'h4000;
localparam NLB_BLK_CONNTRACK_SPAN = 32'h1000; // bytes from the base the block's registers lie in
localparam NLB_REG_CONNTRACK_TYPE = 32'h3000;
localparam NLB_REG_CONNTRACK_VERSION = 32'h3004;
localparam NLB_REG_CONNTRACK_NEXT = 32'h3008;
localparam NLB_REG_CONNTRACK_INDEX = 32'h300c; // [rw] entry index = bucket * ct_ways + way (WRITE/READ, hit_read); WRITE_AT/READ_AT set it to theirs
localparam NLB_REG_CONNTRACK_INDEX_RESET = 32'h0;
localparam NLB_REG_CONNTRACK_CMD = 32'h3010; // [wo] a command; a write leaves the stored entry in the data words
localparam NLB_REG_CONNTRACK_CMD_RESET = 32'h0;
localparam NLB_REG_CONNTRACK_CMD_DEFINED = 32'hffffffff; // bits the register defines
localparam NLB_REG_CONNTRACK_CMD_OP_LSB = 0; // `op`, bits 7..0 (enum `table_cmd`)
localparam NLB_REG_CONNTRACK_CMD_OP_W = 8;
localparam NLB_REG_CONNTRACK_CMD_OP_MASK = 32'hff;
localparam NLB_REG_CONNTRACK_CMD_INDEX_LSB = 8; // `index`, bits 31..8: entry index of WRITE_AT/READ_AT (0 for WRITE/READ)
localparam NLB_REG_CONNTRACK_CMD_INDEX_W = 24;
localparam NLB_REG_CONNTRACK_CMD_INDEX_MASK = 32'hffffff00;
localparam NLB_REG_CONNTRACK_STATUS = 32'h3014; // [ro] outcome of the last command
localparam NLB_REG_CONNTRACK_STATUS_RESET = 32'h0;
localparam NLB_REG_CONNTRACK_STATUS_DEFINED = 32'h3; // bits the register defines
localparam NLB_REG_CONNTRACK_STATUS_BUSY_LSB = 0; // `busy`, bit 0
localparam NLB_REG_CONNTRACK_STATUS_BUSY_W = 1;
localparam NLB_REG_CONNTRACK_STATUS_BUSY_MASK = 32'h1;
localparam NLB_REG_CONNTRACK_STATUS_ERROR_LSB = 1; // `error`, bit 1: index out of range or bad command
localparam NLB_REG_CONNTRACK_STATUS_ERROR_W = 1;
localparam NLB_REG_CONNTRACK_STATUS_ERROR_MASK = 32'h2;
localparam NLB_REG_CONNTRACK_HIT_READ = 32'h3018; // [ro] hit bits of the 32 entries at index & ~31; reading clears them
localparam NLB_REG_CONNTRACK_COUNT = 32'h301c; // [ro] valid entries (maintained on writes)
localparam NLB_REG_CONNTRACK_DATA = 32'h3100; // [rw] entry words
localparam NLB_REG_CONNTRACK_DATA_COUNT = 32;
// counters: Packet, byte, punt and drop counters: select a counter, snapshot it, read the words.
localparam NLB_BLK_COUNTERS_BASE = 32'h4000;
localparam NLB_BLK_COUNTERS_TYPE = 32'h4e4c0005;
localparam NLB_BLK_COUNTERS_VERSION = 32'h2;
localparam NLB_BLK_COUNTERS_NEXT = 32'h6000;
localparam NLB_BLK_COUNTERS_SPAN = 32'h2000; // bytes from the base the block's registers lie in
localparam NLB_REG_COUNTERS_TYPE = 32'h4000;
localparam NLB_REG_COUNTERS_VERSION = 32'h4004;
localparam NLB_REG_COUNTERS_NEXT = 32'h4008;
localparam NLB_REG_COUNTERS_SELECT = 32'h400c; // [rw] the counter snapshot latches
localparam NLB_REG_COUNTERS_SELECT_RESET = 32'h0;
localparam NLB_REG_COUNTERS_SELECT_DEFINED = 32'hffffffff; // bits the register defines
localparam NLB_REG_COUNTERS_SELECT_INDEX_LSB = 0; // `index`, bits 23..0: rule id, backend id, reason or verdict value
localparam NLB_REG_COUNTERS_SELECT_INDEX_W = 24;
localparam NLB_REG_COUNTERS_SELECT_INDEX_MASK = 32'hffffff;
localparam NLB_REG_COUNTERS_SELECT_KIND_LSB = 24; // `kind`, bits 31..24 (enum `counter_kind`)
localparam NLB_REG_COUNTERS_SELECT_KIND_W = 8;
localparam NLB_REG_COUNTERS_SELECT_KIND_MASK = 32'hff000000;
localparam NLB_REG_COUNTERS_SNAPSHOT = 32'h4010; // [wo] latch the selected counter into the read registers
localparam NLB_REG_COUNTERS_SNAPSHOT_RESET = 32'h0;
localparam NLB_REG_COUNTERS_SNAPSHOT_DEFINED = 32'h3; // bits the register defines
localparam NLB_REG_COUNTERS_SNAPSHOT_OP_LSB = 0; // `op`, bits 1..0 (enum `counter_snapshot`)
localparam NLB_REG_COUNTERS_SNAPSHOT_OP_W = 2;
localparam NLB_REG_COUNTERS_SNAPSHOT_OP_MASK = 32'h3;
localparam NLB_REG_COUNTERS_PACKETS_LO = 32'h4014; // [ro] 
localparam NLB_REG_COUNTERS_PACKETS_HI = 32'h4018; // [ro] 
localparam NLB_REG_COUNTERS_BYTES_LO = 32'h401c; // [ro] 
localparam NLB_REG_COUNTERS_BYTES_HI = 32'h4020; // [ro] 
localparam NLB_REG_COUNTERS_PUNTS_LO = 32'h4024; // [ro] packets of this rule/backend punted to the host (SPEC R10.1)
localparam NLB_REG_COUNTERS_PUNTS_HI = 32'h4028; // [ro] 
localparam NLB_REG_COUNTERS_DROPS_LO = 32'h402c; // [ro] packets of this rule/backend dropped (SPEC R10.1)
localparam NLB_REG_COUNTERS_DROPS_HI = 32'h4030; // [ro] 
localparam NLB_WIDE_COUNTERS_PACKETS_W = 64; // packets counted, as latched by snapshot (registers least significant first)
localparam NLB_REG_COUNTERS_PACKETS_LO_WIDE_LSB = 0; // first bit of wide packets held by packets_lo
localparam NLB_REG_COUNTERS_PACKETS_HI_WIDE_LSB = 32; // first bit of wide packets held by packets_hi
localparam NLB_WIDE_COUNTERS_BYTES_W = 64; // bytes counted (frame bytes), as latched by snapshot (registers least significant first)
localparam NLB_REG_COUNTERS_BYTES_LO_WIDE_LSB = 0; // first bit of wide bytes held by bytes_lo
localparam NLB_REG_COUNTERS_BYTES_HI_WIDE_LSB = 32; // first bit of wide bytes held by bytes_hi
localparam NLB_WIDE_COUNTERS_PUNTS_W = 64; // packets punted, as latched by snapshot (registers least significant first)
localparam NLB_REG_COUNTERS_PUNTS_LO_WIDE_LSB = 0; // first bit of wide punts held by punts_lo
localparam NLB_REG_COUNTERS_PUNTS_HI_WIDE_LSB = 32; // first bit of wide punts held by punts_hi
localparam NLB_WIDE_COUNTERS_DROPS_W = 64; // packets dropped, as latched by snapshot (registers least significant first)
localparam NLB_REG_COUNTERS_DROPS_LO_WIDE_LSB = 0; // first bit of wide drops held by drops_lo
localparam NLB_REG_COUNTERS_DROPS_HI_WIDE_LSB = 32; // first bit of wide drops held by drops_hi
// spi_flash: SPI flash controller: shifts whole bytes per access (the configuration flash holding the bitstreams).
localparam NLB_BLK_SPI_FLASH_BASE = 32'h6000;
localparam NLB_BLK_SPI_FLASH_TYPE = 32'h4e4c0007;
localparam NLB_BLK_SPI_FLASH_VERSION = 32'h1;
localparam NLB_BLK_SPI_FLASH_NEXT = 32'h7000;
localparam NLB_BLK_SPI_FLASH_SPAN = 32'h1000; // bytes from the base the block's registers lie in
localparam NLB_REG_SPI_FLASH_TYPE = 32'h6000;
localparam NLB_REG_SPI_FLASH_VERSION = 32'h6004;
localparam NLB_REG_SPI_FLASH_NEXT = 32'h6008;
localparam NLB_REG_SPI_FLASH_CTRL = 32'h600c; // [rw] chip select, clock and transfer width (reset: divider 3). Accesses to ctrl and txrx wait while a transfer runs
localparam NLB_REG_SPI_FLASH_CTRL_RESET = 32'h300;
localparam NLB_REG_SPI_FLASH_CTRL_DEFINED = 32'h3ff01; // bits the register defines
localparam NLB_REG_SPI_FLASH_CTRL_CS_LSB = 0; // `cs`, bit 0: chip select asserted
localparam NLB_REG_SPI_FLASH_CTRL_CS_W = 1;
localparam NLB_REG_SPI_FLASH_CTRL_CS_MASK = 32'h1;
localparam NLB_REG_SPI_FLASH_CTRL_DIV_LSB = 8; // `div`, bits 15..8: clock divider: SCK = clk / (2 x (div + 1))
localparam NLB_REG_SPI_FLASH_CTRL_DIV_W = 8;
localparam NLB_REG_SPI_FLASH_CTRL_DIV_MASK = 32'hff00;
localparam NLB_REG_SPI_FLASH_CTRL_BYTES_M1_LSB = 16; // `bytes_m1`, bits 17..16: bytes per txrx access - 1 (N = 1..4)
localparam NLB_REG_SPI_FLASH_CTRL_BYTES_M1_W = 2;
localparam NLB_REG_SPI_FLASH_CTRL_BYTES_M1_MASK = 32'h30000;
localparam NLB_REG_SPI_FLASH_TXRX = 32'h6010; // [rw] write: shift out the low N bytes (N = ctrl.bytes_m1 + 1), most significant first (N = 1: bits 7..0); read: the N bytes shifted in by the last write, the last one in bits 7..0
localparam NLB_REG_SPI_FLASH_TXRX_RESET = 32'h0;
localparam NLB_REG_SPI_FLASH_STATUS = 32'h6014; // [ro] the shift engine
localparam NLB_REG_SPI_FLASH_STATUS_RESET = 32'h0;
localparam NLB_REG_SPI_FLASH_STATUS_DEFINED = 32'h1; // bits the register defines
localparam NLB_REG_SPI_FLASH_STATUS_BUSY_LSB = 0; // `busy`, bit 0: shifting
localparam NLB_REG_SPI_FLASH_STATUS_BUSY_W = 1;
localparam NLB_REG_SPI_FLASH_STATUS_BUSY_MASK = 32'h1;
// reboot: Reconfiguration from flash (ICAP IPROG) and what booted.
localparam NLB_BLK_REBOOT_BASE = 32'h7000;
localparam NLB_BLK_REBOOT_TYPE = 32'h4e4c0008;
localparam NLB_BLK_REBOOT_VERSION = 32'h1;
localparam NLB_BLK_REBOOT_NEXT = 32'h8000;
localparam NLB_BLK_REBOOT_SPAN = 32'h1000; // bytes from the base the block's registers lie in
localparam NLB_REG_REBOOT_TYPE = 32'h7000;
localparam NLB_REG_REBOOT_VERSION = 32'h7004;
localparam NLB_REG_REBOOT_NEXT = 32'h7008;
localparam NLB_REG_REBOOT_BOOT_ADDR = 32'h700c; // [rw] flash byte address of the image to load on reboot; returns to the user segment after every boot
localparam NLB_REG_REBOOT_BOOT_ADDR_RESET = 32'h0;
localparam NLB_REG_REBOOT_REBOOT = 32'h7010; // [wo] reload from flash
localparam NLB_REG_REBOOT_REBOOT_RESET = 32'h0;
localparam NLB_REG_REBOOT_REBOOT_DEFINED = 32'hffffffff; // bits the register defines
localparam NLB_REG_REBOOT_REBOOT_KEY_LSB = 0; // `key`, bits 31..0 (enum `reboot_key`): anything else is ignored
localparam NLB_REG_REBOOT_REBOOT_KEY_W = 32;
localparam NLB_REG_REBOOT_REBOOT_KEY_MASK = 32'hffffffff;
localparam NLB_REG_REBOOT_BOOT_STATUS = 32'h7014; // [ro] what booted
localparam NLB_REG_REBOOT_BOOT_STATUS_RESET = 32'h0;
localparam NLB_REG_REBOOT_BOOT_STATUS_DEFINED = 32'hfffffff1; // bits the register defines
localparam NLB_REG_REBOOT_BOOT_STATUS_FALLBACK_LSB = 0; // `fallback`, bit 0: the fallback image booted
localparam NLB_REG_REBOOT_BOOT_STATUS_FALLBACK_W = 1;
localparam NLB_REG_REBOOT_BOOT_STATUS_FALLBACK_MASK = 32'h1;
localparam NLB_REG_REBOOT_BOOT_STATUS_REJECTION_LSB = 4; // `rejection`, bits 7..4 (enum `boot_rejection`): why the requested image was refused
localparam NLB_REG_REBOOT_BOOT_STATUS_REJECTION_W = 4;
localparam NLB_REG_REBOOT_BOOT_STATUS_REJECTION_MASK = 32'hf0;
localparam NLB_REG_REBOOT_BOOT_STATUS_ADDRESS_LSB = 8; // `address`, bits 31..8: bits 31..8 of the flash address the running image came from (segments are 256-byte aligned): the register masked to this field is the address
localparam NLB_REG_REBOOT_BOOT_STATUS_ADDRESS_W = 24;
localparam NLB_REG_REBOOT_BOOT_STATUS_ADDRESS_MASK = 32'hffffff00;
// queues: Punt, learn and inject queues (the shell's DMA does this on hardware; the register path serves simulation and debug).
localparam NLB_BLK_QUEUES_BASE = 32'h8000;
localparam NLB_BLK_QUEUES_TYPE = 32'h4e4c0006;
localparam NLB_BLK_QUEUES_VERSION = 32'h1;
localparam NLB_BLK_QUEUES_NEXT = 32'h0;
localparam NLB_BLK_QUEUES_SPAN = 32'h7000; // bytes from the base the block's registers lie in
localparam NLB_REG_QUEUES_TYPE = 32'h8000;
localparam NLB_REG_QUEUES_VERSION = 32'h8004;
localparam NLB_REG_QUEUES_NEXT = 32'h8008;
localparam NLB_REG_QUEUES_PUNT_STATUS = 32'h800c; // [ro] the punt queue; reading clears overflow
localparam NLB_REG_QUEUES_PUNT_STATUS_RESET = 32'h0;
localparam NLB_REG_QUEUES_PUNT_STATUS_DEFINED = 32'h8000ffff; // bits the register defines
localparam NLB_REG_QUEUES_PUNT_STATUS_COUNT_LSB = 0; // `count`, bits 15..0: frames queued
localparam NLB_REG_QUEUES_PUNT_STATUS_COUNT_W = 16;
localparam NLB_REG_QUEUES_PUNT_STATUS_COUNT_MASK = 32'hffff;
localparam NLB_REG_QUEUES_PUNT_STATUS_OVERFLOW_LSB = 31; // `overflow`, bit 31: a frame was dropped (queue full) since the last read
localparam NLB_REG_QUEUES_PUNT_STATUS_OVERFLOW_W = 1;
localparam NLB_REG_QUEUES_PUNT_STATUS_OVERFLOW_MASK = 32'h80000000;
localparam NLB_REG_QUEUES_PUNT_POP = 32'h8010; // [wo] move the head frame into the punt window
localparam NLB_REG_QUEUES_PUNT_POP_RESET = 32'h0;
localparam NLB_REG_QUEUES_PUNT_POP_DEFINED = 32'h1; // bits the register defines
localparam NLB_REG_QUEUES_PUNT_POP_POP_LSB = 0; // `pop`, bit 0
localparam NLB_REG_QUEUES_PUNT_POP_POP_W = 1;
localparam NLB_REG_QUEUES_PUNT_POP_POP_MASK = 32'h1;
localparam NLB_REG_QUEUES_PUNT_LEN = 32'h8014; // [ro] bytes in the punt window after the punt header
localparam NLB_REG_QUEUES_LEARN_STATUS = 32'h8018; // [ro] the learn queue; reading clears overflow
localparam NLB_REG_QUEUES_LEARN_STATUS_RESET = 32'h0;
localparam NLB_REG_QUEUES_LEARN_STATUS_DEFINED = 32'h8000ffff; // bits the register defines
localparam NLB_REG_QUEUES_LEARN_STATUS_COUNT_LSB = 0; // `count`, bits 15..0: events queued
localparam NLB_REG_QUEUES_LEARN_STATUS_COUNT_W = 16;
localparam NLB_REG_QUEUES_LEARN_STATUS_COUNT_MASK = 32'hffff;
localparam NLB_REG_QUEUES_LEARN_STATUS_OVERFLOW_LSB = 31; // `overflow`, bit 31: an event was dropped (queue full) since the last read
localparam NLB_REG_QUEUES_LEARN_STATUS_OVERFLOW_W = 1;
localparam NLB_REG_QUEUES_LEARN_STATUS_OVERFLOW_MASK = 32'h80000000;
localparam NLB_REG_QUEUES_LEARN_POP = 32'h801c; // [wo] move the head event into learn_data
localparam NLB_REG_QUEUES_LEARN_POP_RESET = 32'h0;
localparam NLB_REG_QUEUES_LEARN_POP_DEFINED = 32'h1; // bits the register defines
localparam NLB_REG_QUEUES_LEARN_POP_POP_LSB = 0; // `pop`, bit 0
localparam NLB_REG_QUEUES_LEARN_POP_POP_W = 1;
localparam NLB_REG_QUEUES_LEARN_POP_POP_MASK = 32'h1;
localparam NLB_REG_QUEUES_INJECT_STATUS = 32'h8020; // [ro] the inject queue
localparam NLB_REG_QUEUES_INJECT_STATUS_RESET = 32'h0;
localparam NLB_REG_QUEUES_INJECT_STATUS_DEFINED = 32'hffff; // bits the register defines
localparam NLB_REG_QUEUES_INJECT_STATUS_FREE_LSB = 0; // `free`, bits 15..0: free entries
localparam NLB_REG_QUEUES_INJECT_STATUS_FREE_W = 16;
localparam NLB_REG_QUEUES_INJECT_STATUS_FREE_MASK = 32'hffff;
localparam NLB_REG_QUEUES_INJECT_PUSH = 32'h8024; // [wo] send inject_header + inject window
localparam NLB_REG_QUEUES_INJECT_PUSH_RESET = 32'h0;
localparam NLB_REG_QUEUES_INJECT_PUSH_DEFINED = 32'h1; // bits the register defines
localparam NLB_REG_QUEUES_INJECT_PUSH_PUSH_LSB = 0; // `push`, bit 0
localparam NLB_REG_QUEUES_INJECT_PUSH_PUSH_W = 1;
localparam NLB_REG_QUEUES_INJECT_PUSH_PUSH_MASK = 32'h1;
localparam NLB_REG_QUEUES_IRQ_MASK = 32'h8028; // [rw] which queues raise the interrupt when non-empty
localparam NLB_REG_QUEUES_IRQ_MASK_RESET = 32'h0;
localparam NLB_REG_QUEUES_IRQ_MASK_DEFINED = 32'h3; // bits the register defines
localparam NLB_REG_QUEUES_IRQ_MASK_PUNT_LSB = 0; // `punt`, bit 0
localparam NLB_REG_QUEUES_IRQ_MASK_PUNT_W = 1;
localparam NLB_REG_QUEUES_IRQ_MASK_PUNT_MASK = 32'h1;
localparam NLB_REG_QUEUES_IRQ_MASK_LEARN_LSB = 1; // `learn`, bit 1
localparam NLB_REG_QUEUES_IRQ_MASK_LEARN_W = 1;
localparam NLB_REG_QUEUES_IRQ_MASK_LEARN_MASK = 32'h2;
localparam NLB_REG_QUEUES_LEARN_DATA = 32'h8040; // [ro] learn_event words
localparam NLB_REG_QUEUES_LEARN_DATA_COUNT = 12;
localparam NLB_REG_QUEUES_INJECT_HEADER = 32'h8080; // [rw] inject_header words
localparam NLB_REG_QUEUES_INJECT_HEADER_COUNT = 2;
localparam NLB_REG_QUEUES_PUNT_HEADER = 32'h80c0; // [ro] punt_header words
localparam NLB_REG_QUEUES_PUNT_HEADER_COUNT = 4;
localparam NLB_REG_QUEUES_PUNT_DATA = 32'h9000; // [ro] punted frame bytes, little-endian words (up to 9728 bytes)
localparam NLB_REG_QUEUES_PUNT_DATA_COUNT = 2432;
localparam NLB_REG_QUEUES_INJECT_DATA = 32'hc000; // [wo] frame to inject
localparam NLB_REG_QUEUES_INJECT_DATA_COUNT = 2432;

// ---- configuration flash ----
// The flash is split into equal segments: segment 0 holds the fallback (golden) image the FPGA loads at power-on, segment 1 the user image it loads by multiboot. An image starts at its segment's first byte; the segment's last marker_area bytes (one erase subsector) hold its marker. The programmer erases the marker first and writes it last, so an interrupted flash leaves no valid marker and the boot logic falls back to segment 0.
localparam NLB_FLASH_SEGMENTS = 2;
localparam NLB_FLASH_MARKER_AREA = 32'h1000; // bytes at the end of each segment holding its marker
localparam NLB_FLASH_MARKER_VERSION = 32'h1;
localparam NLB_FLASH_MARKER_MAGIC = 64'h544f4c53424c4e; // "NLBSLOT", byte 0 in bits 7..0

/* verilator lint_on UNUSEDPARAM */
