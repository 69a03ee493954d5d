//! Generates the Rust layer of the HW/SW contract from `hw/regmap.toml`.

#[path = "src/codegen.rs"]
#[allow(dead_code)]
mod codegen;
#[path = "src/model.rs"]
#[allow(dead_code)]
mod model;

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=../regmap.toml");
    println!("cargo:rerun-if-changed=src/model.rs");
    println!("cargo:rerun-if-changed=src/codegen.rs");
    let text = match std::fs::read_to_string("../regmap.toml") {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read hw/regmap.toml: {e}");
            std::process::exit(1);
        }
    };
    let map = match model::Regmap::parse(&text) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    if let Err(e) = std::fs::write(out.join("regmap.rs"), codegen::rust(&map)) {
        eprintln!("cannot write generated regmap.rs: {e}");
        std::process::exit(1);
    }
}
