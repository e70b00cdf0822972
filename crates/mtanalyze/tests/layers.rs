//! The library's layers depend one way (the crate README's "where things
//! live"): `input` reads files, `analysis` replays them into `model`
//! values, and `view` and `render` read model values only. The crates
//! (`mtanalyze-model`, `mtanalyze-engine`, `mtanalyze-render`) keep the
//! model below the rest (`tests/e2e/docs.rs` checks their graph); inside
//! `mtanalyze-render`, this test reads the sources and fails when a file of
//! a layer names a module it must not (outside its `#[cfg(test)]` code,
//! which may load a trace to test with).

use std::fs;
use std::path::{Path, PathBuf};

/// Each layer and the modules of this crate its code must not name.
const RULES: &[(&str, &[&str])] = &[
    ("view", &["analysis", "input", "render"]),
    ("render", &["analysis", "input"]),
];

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|x| x == "rs") {
            found.push(path);
        }
    }
}

/// The lines of `text` that name `module` as a path of this crate: `crate::module`,
/// `super::module` or `module::` inside a `use crate::{...}` group.
fn naming(text: &str, module: &str) -> Vec<(usize, String)> {
    let mut hits = Vec::new();
    let mut in_crate_group = false;
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("").trim();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("use crate::{") || code.starts_with("pub use crate::{") {
            in_crate_group = true;
        }
        let named = code.contains(&format!("crate::{module}"))
            || code.contains(&format!("super::{module}"))
            || (in_crate_group && code.contains(&format!("{module}::")));
        if named {
            hits.push((n + 1, line.trim().to_string()));
        }
        if in_crate_group && code.contains("};") {
            in_crate_group = false;
        }
    }
    hits
}

#[test]
fn view_and_render_read_model_values_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mtanalyze-render/src");
    let mut breaches = Vec::new();
    let mut files = 0;
    for (layer, forbidden) in RULES {
        let mut found = Vec::new();
        sources(&src.join(layer), &mut found);
        assert!(!found.is_empty(), "no sources under src/{layer}");
        for path in found {
            files += 1;
            let text = fs::read_to_string(&path).expect("a source file");
            for module in *forbidden {
                for (line, code) in naming(&text, module) {
                    breaches.push(format!(
                        "src/{}:{line}: {layer} names {module}: {code}",
                        path.strip_prefix(&src).unwrap_or(&path).display()
                    ));
                }
            }
        }
    }
    assert!(files > 20, "only {files} files read");
    assert!(
        breaches.is_empty(),
        "imports against the layers:\n{}",
        breaches.join("\n")
    );
}

#[test]
fn the_check_sees_an_import_against_the_layers() {
    let text = "use crate::model::report::Report;\nuse crate::analysis::timeline::Timelines;\n";
    assert_eq!(naming(text, "analysis").len(), 1);
    let grouped = "use crate::{\n    model::Report,\n    input::load,\n};\n";
    assert_eq!(naming(grouped, "input").len(), 1);
    let in_tests =
        "use crate::model::Report;\n#[cfg(test)]\nmod tests {\n    use crate::input::load;\n}\n";
    assert!(naming(in_tests, "input").is_empty());
    assert!(naming("// see crate::analysis for why\n", "analysis").is_empty());
}
