//! The guide's three-line tokio setup (`docs/GUIDE.md`) is `examples/service.rs`'s, word
//! for word: the example compiles (with the `tracing` feature), so the
//! snippet a user copies does too.

use std::path::Path;

/// The first ```rust block after the heading `heading` in `text`.
fn block_after<'a>(text: &'a str, heading: &str) -> Option<&'a str> {
    let from = text.find(heading)?;
    let rest = &text[from..];
    let start = rest.find("```rust\n")? + "```rust\n".len();
    let len = rest[start..].find("```")?;
    Some(&rest[start..start + len])
}

/// The lines of `example` between its `// README: begin` and `end` marks.
fn marked(example: &str) -> Option<&str> {
    let begin = example.find("// README: begin\n")? + "// README: begin\n".len();
    let len = example[begin..].find("// README: end")?;
    Some(&example[begin..begin + len])
}

#[test]
fn the_readme_setup_is_the_examples() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../../docs/GUIDE.md")).expect("docs/GUIDE.md");
    let example = std::fs::read_to_string(root.join("examples/service.rs")).expect("service.rs");
    let shown = block_after(&readme, "### A tokio service, three lines").expect("a rust block");
    let compiled = marked(&example).expect("README marks in the example");
    assert_eq!(
        shown, compiled,
        "docs/GUIDE.md's tokio setup and examples/service.rs differ"
    );
}
