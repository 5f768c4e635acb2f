//! The guest's shadow stack: QuickJS recursion lives here, so it gets room beyond the 1 MiB
//! default; QuickJS's own stack check (set by the host below this size) stops deep recursion first.
fn main() {
    println!("cargo:rustc-link-arg=-zstack-size=8388608");
}
