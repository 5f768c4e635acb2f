//! Embeds the guest module built by scripts/build-codemode-guest. The guest is a separate
//! wasm32-wasip1 build (its own workspace) in the same target folder; a missing file is a
//! clear build error naming the script, never a silent empty module.
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=OPENBOT_CODEMODE_GUEST");
    let wasm = match std::env::var_os("OPENBOT_CODEMODE_GUEST") {
        Some(path) => PathBuf::from(path),
        None => target_dir().join("wasm32-wasip1/release/openbot-codemode-guest.wasm"),
    };
    println!("cargo:rerun-if-changed={}", wasm.display());
    if !wasm.is_file() {
        panic!(
            "the Code Mode guest {} is missing: run scripts/build-codemode-guest first \
             (with the same CARGO_TARGET_DIR), or set OPENBOT_CODEMODE_GUEST to its path",
            wasm.display()
        );
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::copy(&wasm, out.join("guest.wasm")).expect("copy the guest module into OUT_DIR");
}

/// The target folder: OUT_DIR is <target>/<profile>/build/<package>-<hash>/out.
fn target_dir() -> PathBuf {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    out.ancestors().nth(4).map(PathBuf::from).unwrap_or(out)
}
