//! Builds the RTL of `hw/rtl` into C++ with Verilator, compiles it with a small `extern "C"`
//! shim per model, and generates the Rust side of the shim (port tables and declarations).
//!
//! Verilator is required: without it the build stops with a message saying how to install it
//! (CI installs the Debian package). Set `VERILATOR` to use a binary that is not on `PATH`.
//! Everything Verilator writes goes under `OUT_DIR`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One Verilated model: a top module with parameter overrides.
struct ModelSpec {
    /// Rust/C identifier of the model (snake_case).
    name: &'static str,
    /// Top module (file `<top>.v` in hw/rtl, verif/hbm or hw/boards/opennic's folders).
    top: &'static str,
    /// `-G` overrides.
    params: Vec<String>,
}

/// A port parsed from the Verilated header.
struct PortDecl {
    name: String,
    width: u32,
    input: bool,
    /// C++ storage: 8, 16, 32, 64, or 0 for a wide (VlWide) port.
    storage: u32,
}

fn main() {
    if let Err(msg) = run() {
        eprintln!("\nerror: nlb-verif cannot be built: {msg}\n");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let manifest = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    let out = PathBuf::from(env("OUT_DIR")?);
    // NLB_RTL_DIR: Verilog from another directory (the mutation run builds planted bugs from
    // a copy of hw/rtl; hw/scripts/mutants.sh).
    println!("cargo:rerun-if-env-changed=NLB_RTL_DIR");
    let rtl = match std::env::var_os("NLB_RTL_DIR") {
        Some(d) => PathBuf::from(d),
        None => manifest
            .parent()
            .ok_or("the crate must sit inside the workspace")?
            .join("hw/rtl"),
    };
    // Simulation-only Verilog (the HBM model and the top level that puts it under nlb_top).
    let sim_rtl = manifest.join("hbm");
    // The OpenNIC board: the plugin's modules, its include files (one folder per shell box)
    // and the shell stand-ins of the board bench (tests/rtl/board.rs).
    let board = manifest
        .parent()
        .ok_or("the crate must sit inside the workspace")?
        .join("hw/boards/opennic");
    let board_dirs = [
        board.join("rtl"),
        board.join("sim"),
        board.join("plugin/box_322mhz"),
        board.join("plugin/box_250mhz"),
    ];
    let search: Vec<PathBuf> = [rtl.clone(), sim_rtl.clone()]
        .into_iter()
        .chain(board_dirs.iter().cloned())
        .collect();
    println!("cargo:rerun-if-changed={}", rtl.display());
    println!("cargo:rerun-if-changed={}", sim_rtl.display());
    for d in &board_dirs {
        println!("cargo:rerun-if-changed={}", d.display());
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=VERILATOR");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-env-changed=NLB_VERIF_COVERAGE");
    // RTL code coverage (hw/scripts/coverage.sh): `nlb_top` Verilated with line and toggle
    // coverage; each instance writes its counts when dropped. Off, the build is unchanged.
    let coverage = std::env::var("NLB_VERIF_COVERAGE").is_ok_and(|v| v == "1");
    // VCD tracing compiled into the models (NLB_TRACE=1 and the replays of failing seeds
    // write waveforms): on unless NLB_VERILATED_TRACE=0, which halves the models' C++ compile
    // (`./test.sh` turns it off; a failing seed is replayed with a waveform by running its test
    // again with tracing built).
    println!("cargo:rerun-if-env-changed=NLB_VERILATED_TRACE");
    let trace = match std::env::var("NLB_VERILATED_TRACE").as_deref() {
        Err(_) | Ok("1") => true,
        Ok("0") => false,
        Ok(v) => return Err(format!("NLB_VERILATED_TRACE must be 0 or 1, not {v:?}")),
    };

    let verilator = std::env::var("VERILATOR").unwrap_or_else(|_| "verilator".to_string());
    let version = verilator_version(&verilator)?;
    let root = verilator_root(&verilator)?;

    let build_id = build_id();
    let git_hash = git_hash(&manifest);
    println!("cargo:rustc-env=NLB_VERIF_BUILD_ID={build_id}");
    println!("cargo:rustc-env=NLB_VERIF_GIT_HASH={git_hash}");
    println!("cargo:rustc-env=NLB_VERIF_VERILATOR_VERSION={version}");

    let mut models = vec![
        ModelSpec {
            name: "flow_hash",
            top: "nlb_flow_hash",
            params: vec!["USER_WIDTH=32".into()],
        },
        ModelSpec {
            name: "mul_all_ones",
            top: "nlb_mul_const_csa",
            params: vec!["CONST=32'hffffffff".into()],
        },
        ModelSpec {
            name: "mul_two_bits",
            top: "nlb_mul_const_csa",
            params: vec!["CONST=32'h00010001".into()],
        },
        ModelSpec {
            name: "mul_one_bit",
            top: "nlb_mul_const_csa",
            params: vec!["CONST=32'h00000100".into()],
        },
        ModelSpec {
            name: "axis_skid",
            top: "nlb_axis_skid",
            params: vec!["USER_WIDTH=16".into()],
        },
        ModelSpec {
            name: "parser",
            top: "nlb_parser",
            params: vec!["USER_WIDTH=8".into()],
        },
        ModelSpec {
            name: "spi_flash",
            top: "nlb_spi_flash",
            params: Vec::new(),
        },
        ModelSpec {
            name: "top",
            top: "nlb_top",
            params: vec![
                format!("BUILD_ID=32'd{build_id}"),
                format!("GIT_HASH=32'h{git_hash:08x}"),
            ],
        },
        // The whole pipeline with its connection table and Maglev slots on HBM ports, each
        // table behind the HBM model (verif/hbm/nlb_top_hbm.v; docs/verification.md).
        ModelSpec {
            name: "top_hbm",
            top: "nlb_top_hbm",
            params: vec![
                format!("BUILD_ID=32'd{build_id}"),
                format!("GIT_HASH=32'h{git_hash:08x}"),
            ],
        },
        // nlb-offload's OpenNIC plugin inside stand-ins of the shell's two boxes, with BAR 2,
        // the packet adapters, and the three clocks (hw/boards/opennic/sim/nlb_opennic_sim.v).
        ModelSpec {
            name: "board",
            top: "nlb_opennic_sim",
            params: Vec::new(),
        },
        ModelSpec {
            name: "regs",
            top: "nlb_regs",
            params: vec![
                format!("BUILD_ID=32'd{build_id}"),
                format!("GIT_HASH=32'h{git_hash:08x}"),
            ],
        },
    ];
    models.extend(block_bench_models());

    let mut units: Vec<(String, Vec<PathBuf>, Vec<PathBuf>)> = Vec::new();
    let mut global: Vec<String> = Vec::new();
    let mut defines: Vec<(String, String)> = Vec::new();
    let mut rust = String::new();
    let base_includes = vec![root.join("include"), root.join("include/vltstd")];
    rust.push_str("// @generated by verif/build.rs from the Verilated headers.\n\n");

    for m in &models {
        let mdir = out.join(format!("vl_{}", m.name));
        let prefix = format!("V{}", m.name);
        let covered = coverage && m.name == COVERAGE_MODEL;
        let traced = trace || m.name == ALWAYS_TRACED;
        let instrument = Instrument {
            coverage: covered,
            trace: traced,
        };
        verilate(&verilator, &search, &mdir, &prefix, m, instrument)?;
        let classes = std::fs::read_to_string(mdir.join(format!("{prefix}_classes.mk")))
            .map_err(|e| format!("Verilator wrote no classes file for {}: {e}", m.top))?;
        let mut sources: Vec<PathBuf> = Vec::new();
        for list in [
            "VM_CLASSES_FAST",
            "VM_CLASSES_SLOW",
            "VM_SUPPORT_FAST",
            "VM_SUPPORT_SLOW",
        ] {
            for class in make_list(&classes, list) {
                sources.push(mdir.join(format!("{class}.cpp")));
            }
        }
        for g in make_list(&classes, "VM_GLOBAL_FAST")
            .into_iter()
            .chain(make_list(&classes, "VM_GLOBAL_SLOW"))
        {
            if !global.contains(&g) {
                global.push(g);
            }
        }
        for var in ["VM_TRACE", "VM_TRACE_VCD", "VM_TRACE_FST", "VM_COVERAGE"] {
            let value = make_scalar(&classes, var).unwrap_or_else(|| "0".to_string());
            // One runtime for every model: a feature any model uses is on (coverage is on
            // for one model only).
            match defines.iter_mut().find(|(k, _)| k == var) {
                Some((_, v)) if value != "0" => *v = value,
                Some(_) => {}
                None => defines.push((var.to_string(), value)),
            }
        }
        let header = std::fs::read_to_string(mdir.join(format!("{prefix}.h")))
            .map_err(|e| format!("Verilator wrote no header for {}: {e}", m.top))?;
        let ports = parse_ports(&header);
        if ports.is_empty() {
            return Err(format!(
                "no ports found in the Verilated header of {} (unexpected Verilator output)",
                m.top
            ));
        }
        let shim = out.join(format!("shim_{}.cpp", m.name));
        write_if_changed(&shim, &shim_cpp(m, &prefix, &ports, covered, traced))?;
        sources.push(shim);
        let mut includes = base_includes.clone();
        includes.push(mdir);
        units.push((format!("nlb_vl_{}", m.name), sources, includes));
        rust.push_str(&shim_rs(m, &ports));
    }
    defines.push(("VM_SC".into(), "0".into()));
    // Verilator's runtime: included by every model's headers, so every model directory is
    // on its include path.
    let runtime: Vec<PathBuf> = global
        .iter()
        .map(|g| root.join("include").join(format!("{g}.cpp")))
        .collect();
    let mut all_includes = base_includes.clone();
    for (_, _, inc) in &units {
        all_includes.extend(inc.iter().skip(base_includes.len()).cloned());
    }
    units.push(("nlb_vl_runtime".into(), runtime, all_includes));

    write_if_changed(&out.join("models.rs"), &rust)?;

    // Each model's C++ (its classes and shim) and the runtime in a static library of its own,
    // compiled again only when its sources, the flags or the compiler changed: an edit of one
    // RTL module recompiles the models that contain it, not all of them (the mutation run,
    // hw/scripts/mutants.sh, builds one mutant after another on it).
    println!("cargo:rerun-if-env-changed=CXX");
    println!("cargo:rerun-if-env-changed=CXXFLAGS");
    println!("cargo:rerun-if-env-changed=NLB_VERILATED_OPT");
    for (name, sources, includes) in &units {
        compile_cached(&out, name, sources, includes, &defines)?;
    }
    println!("cargo:rustc-link-search=native={}", out.display());
    for (name, _, _) in &units {
        println!("cargo:rustc-link-lib=static={name}");
    }
    println!("cargo:rustc-link-lib=stdc++");
    println!("cargo:rustc-link-lib=pthread");
    Ok(())
}

/// Compiles `sources` into `lib<name>.a` in `out` unless a library built from the same
/// sources, include paths, defines, flags and compiler is already there (a stamp beside it
/// holds the hash of all of them), or in the target directory's shared cache
/// ([`shared_cache`]), from which it is then copied.
fn compile_cached(
    out: &Path,
    name: &str,
    sources: &[PathBuf],
    includes: &[PathBuf],
    defines: &[(String, String)],
) -> Result<(), String> {
    // FNV-1a over everything the objects depend on.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for x in b {
            h ^= u64::from(*x);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    let opt = opt_level()?;
    eat(OPT_FLAGS.as_bytes());
    if opt != 2 {
        eat(format!(" -O{opt} instead").as_bytes());
    }
    for var in ["CXX", "CXXFLAGS", "TARGET"] {
        eat(std::env::var(var).unwrap_or_default().as_bytes());
        eat(b"\0");
    }
    for (k, v) in defines {
        eat(format!("-D{k}={v}\0").as_bytes());
    }
    // Paths under `out` differ between builds of this script (clippy's and the tests'), so
    // they count by their name and contents only: the library is the same for both.
    for inc in includes.iter().filter(|i| !i.starts_with(out)) {
        eat(inc.to_string_lossy().as_bytes());
        eat(b"\0");
    }
    for src in sources {
        let shown = src.strip_prefix(out).unwrap_or(src);
        eat(shown.to_string_lossy().as_bytes());
        eat(b"\0");
        eat(&std::fs::read(src).map_err(|e| format!("cannot read {}: {e}", src.display()))?);
    }
    // Headers of the model's own directory (the classes include them).
    for inc in includes.iter().filter(|i| i.starts_with(out)) {
        eat(inc
            .strip_prefix(out)
            .unwrap_or(inc)
            .to_string_lossy()
            .as_bytes());
        eat(b"\0");
        let mut headers: Vec<PathBuf> = std::fs::read_dir(inc)
            .map_err(|e| format!("cannot list {}: {e}", inc.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "h"))
            .collect();
        headers.sort();
        for p in headers {
            eat(&std::fs::read(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?);
        }
    }
    let stamp = out.join(format!("lib{name}.stamp"));
    let lib = out.join(format!("lib{name}.a"));
    let want = format!("{h:016x}");
    if lib.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == want) {
        return Ok(());
    }
    let cache = shared_cache(out);
    let cached = cache
        .as_ref()
        .map(|c| c.join(format!("lib{name}-{want}.a")));
    if let Some(cached) = cached.as_ref().filter(|c| c.is_file()) {
        std::fs::copy(cached, &lib)
            .map_err(|e| format!("cannot copy {} to {}: {e}", cached.display(), lib.display()))?;
        return std::fs::write(&stamp, want)
            .map_err(|e| format!("cannot write {}: {e}", stamp.display()));
    }
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .warnings(false)
        .extra_warnings(false)
        // -O2 unless NLB_VERILATED_OPT says otherwise: the differential test spends 86% of its
        // time in nlb_top's Verilated posedge logic, which runs about 1.45 times as fast as at
        // -O1 (docs/verification.md); the mutation run, which rebuilds nlb_top's model for
        // every mutant, compiles at -O1.
        .opt_level(opt)
        .debug(false)
        .cargo_metadata(false)
        .flag_if_supported("-faligned-new")
        .flag_if_supported("-fcf-protection=none")
        .flag("-pthread");
    for (k, v) in defines {
        build.define(k, Some(v.as_str()));
    }
    for inc in includes {
        build.include(inc);
    }
    build.files(sources);
    build
        .try_compile(name)
        .map_err(|e| format!("compiling the Verilated models failed ({name}): {e}"))?;
    if let (Some(cache), Some(cached)) = (cache, cached) {
        store_in_cache(&cache, name, &lib, &cached)?;
    }
    std::fs::write(&stamp, want).map_err(|e| format!("cannot write {}: {e}", stamp.display()))
}

/// The directory of compiled model libraries shared by every build of this script in one
/// target directory and profile: `cargo clippy` and `cargo test` run the script in different
/// `OUT_DIR`s, and without it `./test.sh` compiled every Verilated model twice.
/// `OUT_DIR` is `<target>/<profile>/build/nlb-verif-<hash>/out`; the cache is
/// `<target>/<profile>/verilated`. None if `OUT_DIR` does not have that shape.
fn shared_cache(out: &Path) -> Option<PathBuf> {
    let build = out.parent()?.parent()?;
    if build.file_name()? != "build" {
        return None;
    }
    Some(build.parent()?.join("verilated"))
}

/// Puts `lib` into the shared cache as `cached` (written beside it, then renamed, so that a
/// build running at the same time never links a half-written file), and removes the older
/// libraries of the same unit, keeping the three newest: the cache stays the size of a few
/// builds however many RTL edits it has seen.
fn store_in_cache(cache: &Path, name: &str, lib: &Path, cached: &Path) -> Result<(), String> {
    std::fs::create_dir_all(cache)
        .map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    let partial = cached.with_extension(format!("partial{}", std::process::id()));
    std::fs::copy(lib, &partial)
        .and_then(|_| std::fs::rename(&partial, cached))
        .map_err(|e| format!("cannot store {} in {}: {e}", lib.display(), cache.display()))?;
    let prefix = format!("lib{name}-");
    let mut older: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(cache)
        .map_err(|e| format!("cannot list {}: {e}", cache.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .and_then(|f| f.strip_prefix(&prefix)?.strip_suffix(".a"))
                // Only finished libraries (a store cut short leaves `.partial<pid>`).
                .is_some_and(|hash| hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    older.sort();
    let excess = older.len().saturating_sub(3);
    for (_, p) in older.into_iter().take(excess) {
        // A build reading it at this moment has its own copy or will compile again.
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}

/// The compiler settings of [`compile_cached`], part of its stamp (with [`opt_level`] when it
/// is not 2).
const OPT_FLAGS: &str = "c++17 -O2 -faligned-new -fcf-protection=none -pthread";

/// The C++ optimisation level of the Verilated models: `NLB_VERILATED_OPT` (0-3), 2 without it.
fn opt_level() -> Result<u32, String> {
    match std::env::var("NLB_VERILATED_OPT") {
        Err(_) => Ok(2),
        Ok(v) => match v.parse::<u32>() {
            Ok(n) if n <= 3 => Ok(n),
            _ => Err(format!("NLB_VERILATED_OPT must be 0, 1, 2 or 3, not {v:?}")),
        },
    }
}

// ---- per-block benches -------------------------------------------------------------------------
// Models of the blocks that `nlb_top` instantiates, each driven on its own by
// verif/tests/<block>.rs against the golden model's function for that block.

/// The models of the per-block benches.
fn block_bench_models() -> Vec<ModelSpec> {
    let spec = |name, top, params: &[&str]| ModelSpec {
        name,
        top,
        params: params.iter().map(|p| p.to_string()).collect(),
    };
    vec![
        spec("l3_csum", "nlb_l3_csum", &[]),
        spec("editor", "nlb_editor", &[]),
        spec("table_cmd", "nlb_table_cmd", &[]),
        // Small enough that full and empty come every few words.
        spec("fifo", "nlb_fifo", &["WIDTH=16", "DEPTH=4"]),
        // The clock-domain crossings (two clocks each; nlb_verif::clocks steps them).
        spec("async_fifo", "nlb_async_fifo", &["WIDTH=16", "DEPTH=4"]),
        spec("axil_cdc", "nlb_axil_cdc", &[]),
        // The AXI4 bridge of the OpenNIC plugin's host DMA port (64-bit addresses, 512-bit data).
        spec("axi_cdc", "nlb_axi_cdc", &[]),
        // Store-and-forward frame FIFOs of the OpenNIC plugin's transmit and host paths, small
        // enough that frames fill them: with back-pressure, and for an input without tready.
        spec(
            "frame_fifo",
            "nlb_axis_frame_fifo",
            &["DATA_WIDTH=32", "DEPTH=16"],
        ),
        spec(
            "frame_fifo_drop",
            "nlb_axis_frame_fifo",
            &["DATA_WIDTH=32", "DEPTH=16", "DROP_WHEN_FULL=1"],
        ),
        // 64 entries (the least the block takes): two hit words, every entry reachable often.
        spec("hit_bits", "nlb_hit_bits", &["ROWS=4"]),
        spec("counter_bank", "nlb_counter_bank", &["ENTRIES=4"]),
        // Two banks of 8 rows of 4 lanes: both banks' ends and every lane in a short run.
        spec(
            "table_mem",
            "nlb_table_mem",
            &["WIDTH=20", "ROWS=8", "LANES=4", "OUTPUT_REG=1", "BANKS=2"],
        ),
        spec(
            "conntrack",
            "nlb_conntrack",
            &["CT_BUCKETS=16", "CT_WAYS=4"],
        ),
        // The `sim` profile's table depths (the defaults): the bench plays every table from
        // `nlb_hw::Tables` of that profile, as the golden model reads them; its memory stages
        // on 4 + 2 channels of 256 bits with few slots, so that reads come back out of order
        // across and within channels and the stages fill.
        spec(
            "lookup",
            "nlb_lookup",
            &[
                "CT_CHANNELS=4",
                "CT_DATA_W=256",
                "CT_SLOTS=32",
                "MG_CHANNELS=2",
                "MG_DATA_W=256",
                "MG_SLOTS=32",
            ],
        ),
        // The `sim` profile's rule and backend counts (the defaults), as the model device's.
        spec("counters", "nlb_counters", &[]),
    ]
}

// ---- end of the per-block benches' models --------------------------------------------------------

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set (run through cargo)"))
}

const INSTALL_HINT: &str = "Verilator is required to build nlb-verif (the RTL simulation). \
     Install it (Debian/Ubuntu: `apt-get install verilator`; 5.006 or newer) or point the \
     VERILATOR environment variable at the binary. Builds that do not need the RTL can \
     leave this crate out: `cargo build --workspace --exclude nlb-verif`.";

fn verilator_version(verilator: &str) -> Result<String, String> {
    let out = Command::new(verilator)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run `{verilator} --version`: {e}. {INSTALL_HINT}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{verilator} --version` failed ({}). {INSTALL_HINT}",
            out.status
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // "Verilator 5.006 2023-01-22 rev (Debian 5.006-3)"
    let major = text
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok())
        .ok_or_else(|| format!("cannot read the Verilator version from {text:?}"))?;
    if major < 5 {
        return Err(format!(
            "{text} is too old: nlb-verif needs Verilator 5 (5.006 or newer). {INSTALL_HINT}"
        ));
    }
    Ok(text)
}

fn verilator_root(verilator: &str) -> Result<PathBuf, String> {
    let out = Command::new(verilator)
        .args(["--getenv", "VERILATOR_ROOT"])
        .output()
        .map_err(|e| format!("cannot run `{verilator} --getenv VERILATOR_ROOT`: {e}"))?;
    let root = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !root.join("include/verilated.cpp").is_file() {
        return Err(format!(
            "Verilator's runtime sources are not under {} (include/verilated.cpp missing)",
            root.display()
        ));
    }
    Ok(root)
}

/// What a model is Verilated with besides its logic.
#[derive(Clone, Copy)]
struct Instrument {
    /// Line and toggle coverage.
    coverage: bool,
    /// VCD tracing.
    trace: bool,
}

/// The model Verilated with tracing even under `NLB_VERILATED_TRACE=0`: the harness's own
/// test writes waveforms of it (tests/rtl/harness.rs), and it is small.
const ALWAYS_TRACED: &str = "flow_hash";

/// The model Verilated with coverage under `NLB_VERIF_COVERAGE=1`: the whole pipeline, which
/// the differential, corners and overlap tests drive.
const COVERAGE_MODEL: &str = "top";

/// Verilates model `m` into `mdir`. `dirs`: where modules and include files are searched, in
/// order (hw/rtl first); the top's file is the first `<top>.v` among them.
fn verilate(
    verilator: &str,
    dirs: &[PathBuf],
    mdir: &Path,
    prefix: &str,
    m: &ModelSpec,
    instrument: Instrument,
) -> Result<(), String> {
    let mut cmd = Command::new(verilator);
    if instrument.coverage {
        cmd.args(["--coverage-line", "--coverage-toggle"]);
    }
    if instrument.trace {
        cmd.arg("--trace");
    }
    cmd.arg("--cc")
        .args([
            "-O3",
            "--x-assign",
            "fast",
            "--x-initial",
            "fast",
            "--noassert",
        ])
        .args(["-Wall", "--Wno-fatal"])
        // Simulation-only test hooks (the counter preset ports of nlb_top, used by
        // tests/corners.rs); synthesis and hw/scripts/synth.sh never define it.
        .arg("+define+NLB_SIM_HOOKS")
        .arg("--Mdir")
        .arg(mdir)
        .args(["--prefix", prefix, "--top-module", m.top]);
    for d in dirs {
        cmd.arg("-y").arg(d).arg(format!("-I{}", d.display()));
    }
    for p in &m.params {
        cmd.arg(format!("-G{p}"));
    }
    // The top's file: hw/rtl's, a simulation-only one of verif/hbm, or the board's.
    let name = format!("{}.v", m.top);
    let file = dirs
        .iter()
        .map(|d| d.join(&name))
        .find(|f| f.is_file())
        .ok_or_else(|| format!("no file {name} for the model {}", m.name))?;
    cmd.arg(file);
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {verilator}: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "Verilator failed on {} ({}):\n{stderr}",
            m.top, out.status
        ));
    }
    // Lint findings do not stop the build (hw/scripts/lint.sh gates them), but show them.
    for line in stderr.lines().filter(|l| l.starts_with("%Warning")) {
        println!("cargo:warning={}: {line}", m.top);
    }
    Ok(())
}

/// The words of a `NAME += \` list in a Verilator makefile fragment.
fn make_list(text: &str, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let t = line.trim();
        if !inside {
            if t.starts_with(name) && t[name.len()..].trim_start().starts_with("+=") {
                inside = true;
            }
            continue;
        }
        if t.is_empty() {
            break;
        }
        let word = t.trim_end_matches('\\').trim();
        if !word.is_empty() {
            out.push(word.to_string());
        }
        if !t.ends_with('\\') {
            break;
        }
    }
    out
}

/// The value of a `NAME = value` line.
fn make_scalar(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == name).then(|| v.trim().to_string())
    })
}

/// Ports from the `VL_IN8(&clk,0,0);` style declarations of the Verilated model header.
fn parse_ports(header: &str) -> Vec<PortDecl> {
    let mut ports = Vec::new();
    for line in header.lines() {
        let t = line.trim();
        let Some(rest) = t.strip_prefix("VL_") else {
            continue;
        };
        let Some((kind, args)) = rest.split_once('(') else {
            continue;
        };
        let (input, storage) = match kind {
            "IN8" => (true, 8),
            "IN16" => (true, 16),
            "IN" => (true, 32),
            "IN64" => (true, 64),
            "INW" => (true, 0),
            "OUT8" => (false, 8),
            "OUT16" => (false, 16),
            "OUT" => (false, 32),
            "OUT64" => (false, 64),
            "OUTW" => (false, 0),
            _ => continue,
        };
        let args = args.trim_end_matches(';').trim_end_matches(')');
        let parts: Vec<&str> = args.split(',').map(str::trim).collect();
        if parts.len() < 3 {
            continue;
        }
        let name = parts[0].trim_start_matches('&').to_string();
        let (Ok(msb), Ok(lsb)) = (parts[1].parse::<u32>(), parts[2].parse::<u32>()) else {
            continue;
        };
        ports.push(PortDecl {
            name,
            width: msb - lsb + 1,
            input,
            storage,
        });
    }
    ports
}

fn words(width: u32) -> u32 {
    width.div_ceil(32)
}

fn shim_cpp(
    m: &ModelSpec,
    prefix: &str,
    ports: &[PortDecl],
    coverage: bool,
    trace: bool,
) -> String {
    let n = m.name;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// @generated by verif/build.rs: the C shim of the Verilated model {prefix} ({}).",
        m.top
    );
    s.push_str("#include <cstdint>\n#include \"verilated.h\"\n");
    if trace {
        s.push_str("#include \"verilated_vcd_c.h\"\n");
    }
    // Without tracing built, the handle's waveform is a placeholder that is never set.
    let (vcd_type, trace_on) = if trace {
        ("VerilatedVcdC", "    h->ctx->traceEverOn(true);\n")
    } else {
        ("void", "")
    };
    // With coverage, each instance writes its counts to $NLB_COVERAGE_DIR when it is deleted
    // (one file per instance; hw/scripts/coverage.sh merges them).
    let write_coverage = if coverage {
        s.push_str("#include <atomic>\n#include <cstdlib>\n#include <string>\n#include <unistd.h>\n#include \"verilated_cov.h\"\n");
        format!(
            "    if (const char* dir = std::getenv(\"NLB_COVERAGE_DIR\")) {{
        static std::atomic<unsigned> serial{{0}};
        std::string path = std::string(dir) + \"/{n}-\" + std::to_string(getpid()) + \"-\"
            + std::to_string(serial++) + \".dat\";
        h->ctx->coveragep()->write(path.c_str());
    }}
",
            n = m.name
        )
    } else {
        String::new()
    };
    let _ = writeln!(s, "#include \"{prefix}.h\"\n");
    let _ = writeln!(
        s,
        "namespace {{\nstruct Handle {{\n    VerilatedContext* ctx;\n    {prefix}* top;\n    {vcd_type}* vcd;\n}};\n}}\n"
    );
    let _ = writeln!(
        s,
        "extern \"C\" void* nlbv_{n}_new() {{
    Handle* h = new Handle;
    h->ctx = new VerilatedContext;
{trace_on}    h->top = new {prefix}(h->ctx, \"top\");
    h->vcd = nullptr;
    return h;
}}

extern \"C\" void nlbv_{n}_delete(void* p) {{
    Handle* h = static_cast<Handle*>(p);
{close_vcd}    h->top->final();
{write_coverage}    delete h->top;
    delete h->ctx;
    delete h;
}}

extern \"C\" void nlbv_{n}_eval(void* p) {{
    static_cast<Handle*>(p)->top->eval();
}}

extern \"C\" int nlbv_{n}_time_precision(void* p) {{
    return static_cast<Handle*>(p)->ctx->timeprecision();
}}
",
        close_vcd = if trace {
            "    if (h->vcd) { h->vcd->close(); delete h->vcd; }\n"
        } else {
            ""
        }
    );
    if trace {
        let _ = writeln!(
            s,
            "extern \"C\" int nlbv_{n}_trace_open(void* p, const char* path) {{
    Handle* h = static_cast<Handle*>(p);
    if (h->vcd) return -1;
    h->vcd = new VerilatedVcdC;
    h->top->trace(h->vcd, 99);
    h->vcd->open(path);
    if (!h->vcd->isOpen()) {{ delete h->vcd; h->vcd = nullptr; return -2; }}
    return 0;
}}

extern \"C\" void nlbv_{n}_trace_dump(void* p, uint64_t time) {{
    Handle* h = static_cast<Handle*>(p);
    if (h->vcd) h->vcd->dump(time);
}}

extern \"C\" void nlbv_{n}_trace_close(void* p) {{
    Handle* h = static_cast<Handle*>(p);
    if (h->vcd) {{ h->vcd->close(); delete h->vcd; h->vcd = nullptr; }}
}}
"
        );
    } else {
        // Built without tracing (NLB_VERILATED_TRACE=0): opening a waveform says so.
        let _ = writeln!(
            s,
            "extern \"C\" int nlbv_{n}_trace_open(void*, const char*) {{ return -3; }}
extern \"C\" void nlbv_{n}_trace_dump(void*, uint64_t) {{}}
extern \"C\" void nlbv_{n}_trace_close(void*) {{}}
"
        );
    }
    // Setters mask the top word: Verilated code assumes the bits above a port's width are 0.
    let _ = writeln!(
        s,
        "extern \"C\" int nlbv_{n}_set(void* p, uint32_t id, const uint32_t* w) {{\n    {prefix}* t = static_cast<Handle*>(p)->top;\n    switch (id) {{"
    );
    for (i, port) in ports.iter().enumerate() {
        if !port.input {
            continue;
        }
        let mask = top_mask(port.width);
        let name = &port.name;
        match port.storage {
            8 | 16 | 32 => {
                let _ = writeln!(
                    s,
                    "    case {i}: t->{name} = w[0] & 0x{mask:08x}u; return 0;"
                );
            }
            64 => {
                let lo = if port.width > 32 {
                    0xffff_ffffu32
                } else {
                    mask
                };
                let hi = if port.width > 32 { mask } else { 0 };
                let _ = writeln!(
                    s,
                    "    case {i}: t->{name} = (uint64_t)(w[0] & 0x{lo:08x}u) | ((uint64_t)(w[1] & 0x{hi:08x}u) << 32); return 0;"
                );
            }
            _ => {
                let nw = words(port.width);
                let _ = writeln!(
                    s,
                    "    case {i}: for (int k = 0; k < {nw}; ++k) t->{name}[k] = w[k]; t->{name}[{}] &= 0x{mask:08x}u; return 0;",
                    nw - 1
                );
            }
        }
    }
    s.push_str("    default: return -1;\n    }\n}\n\n");
    let _ = writeln!(
        s,
        "extern \"C\" int nlbv_{n}_get(void* p, uint32_t id, uint32_t* w) {{\n    {prefix}* t = static_cast<Handle*>(p)->top;\n    switch (id) {{"
    );
    for (i, port) in ports.iter().enumerate() {
        let name = &port.name;
        match port.storage {
            8 | 16 | 32 => {
                let _ = writeln!(s, "    case {i}: w[0] = t->{name}; return 0;");
            }
            64 => {
                let _ = writeln!(
                    s,
                    "    case {i}: w[0] = (uint32_t)t->{name}; w[1] = (uint32_t)(t->{name} >> 32); return 0;"
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "    case {i}: for (int k = 0; k < {}; ++k) w[k] = t->{name}[k]; return 0;",
                    words(port.width)
                );
            }
        }
    }
    s.push_str("    default: return -1;\n    }\n}\n");
    s
}

fn top_mask(width: u32) -> u32 {
    match width % 32 {
        0 => 0xffff_ffff,
        r => (1u32 << r) - 1,
    }
}

fn camel(name: &str) -> String {
    name.split('_')
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

fn shim_rs(m: &ModelSpec, ports: &[PortDecl]) -> String {
    let n = m.name;
    let ty = camel(n);
    let upper = n.to_ascii_uppercase();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "extern \"C\" {{
    fn nlbv_{n}_new() -> *mut c_void;
    fn nlbv_{n}_delete(h: *mut c_void);
    fn nlbv_{n}_eval(h: *mut c_void);
    fn nlbv_{n}_time_precision(h: *mut c_void) -> c_int;
    fn nlbv_{n}_trace_open(h: *mut c_void, path: *const c_char) -> c_int;
    fn nlbv_{n}_trace_dump(h: *mut c_void, time: u64);
    fn nlbv_{n}_trace_close(h: *mut c_void);
    fn nlbv_{n}_set(h: *mut c_void, id: u32, words: *const u32) -> c_int;
    fn nlbv_{n}_get(h: *mut c_void, id: u32, words: *mut u32) -> c_int;
}}

static {upper}_PORTS: &[PortInfo] = &["
    );
    for p in ports {
        let _ = writeln!(
            s,
            "    PortInfo {{ name: \"{}\", width: {}, input: {} }},",
            p.name, p.width, p.input
        );
    }
    let params = m
        .params
        .iter()
        .map(|p| format!("{p:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        s,
        "];

/// The Verilated model of `{top}` (parameters: {params_doc}).
#[derive(Debug, Clone, Copy)]
pub struct {ty};

impl Model for {ty} {{
    const NAME: &'static str = \"{n}\";
    const TOP: &'static str = \"{top}\";
    const PARAMS: &'static [&'static str] = &[{params}];
    const PORTS: &'static [PortInfo] = {upper}_PORTS;
    const VTABLE: &'static VTable = &VTable {{
        new: nlbv_{n}_new,
        delete: nlbv_{n}_delete,
        eval: nlbv_{n}_eval,
        time_precision: nlbv_{n}_time_precision,
        trace_open: nlbv_{n}_trace_open,
        trace_dump: nlbv_{n}_trace_dump,
        trace_close: nlbv_{n}_trace_close,
        set: nlbv_{n}_set,
        get: nlbv_{n}_get,
    }};
}}
",
        top = m.top,
        params_doc = if m.params.is_empty() {
            "defaults".to_string()
        } else {
            m.params.join(", ")
        },
    );
    s
}

fn write_if_changed(path: &Path, text: &str) -> Result<(), String> {
    if std::fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(());
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Build time for fw_id.build_id: SOURCE_DATE_EPOCH when set (reproducible builds), else now.
fn build_id() -> u32 {
    if let Some(t) = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        return t as u32;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

/// First 8 hex digits of the checked-out commit, or 0 outside a git checkout.
fn git_hash(dir: &Path) -> u32 {
    Command::new("git")
        .args(["rev-parse", "--short=8", "HEAD"])
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            let s = String::from_utf8_lossy(&o.stdout).trim().to_string();
            u32::from_str_radix(s.get(..8)?, 16).ok()
        })
        .unwrap_or(0)
}
