// Compiles the extension's C sources (ext/*.c) into the crate with the cc
// crate, as a part of the program (-DSQLITE_CORE: the functions call the
// SQLite the program links, the system library rusqlite links too).
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ext = root.join("ext");
    let mut build = cc::Build::new();
    build.define("SQLITE_CORE", None).include(root.join("include")).include(&ext).opt_level(2).warnings(false);
    let mut files: Vec<_> = std::fs::read_dir(&ext)
        .expect("sqlite-idempotency: ext/ (the extension's C sources) is not beside bindings/rust")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().map_or(false, |x| x == "c"))
        .collect();
    files.sort();
    for f in &files {
        build.file(f);
        println!("cargo:rerun-if-changed={}", f.display());
    }
    for d in [&ext, &root.join("include")] {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            if e.path().extension().map_or(false, |x| x == "h") {
                println!("cargo:rerun-if-changed={}", e.path().display());
            }
        }
    }
    build.compile("idempotency");
    println!("cargo:rustc-link-lib=sqlite3");
    println!("cargo:rustc-link-lib=m");
}
