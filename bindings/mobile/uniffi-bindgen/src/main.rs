//! `uniffi-bindgen` at the version the mobile binding is built with, so the generated Kotlin and
//! Swift always match the scaffolding in the library.

fn main() {
    uniffi::uniffi_bindgen_main()
}
