//! Text from the traced program (function, stack, thread and task names,
//! files, marks) made safe for a terminal or a line-based file: every
//! control character is written as an escape (ESC as `\x1b`, a newline as
//! `\x0a`, U+009B as `\u{9b}`), so a name can neither move the cursor,
//! retitle the window or clear the screen, nor start a line of its own.
//! Everything else, printable Unicode included, is kept as it is.
//!
//! The text renderers (tables, `--stacks`, the diff's table, `top`, folded
//! lines, callgrind, check and warning lines) call [`escape`] where they
//! write a name; the model keeps the true names, which JSON carries
//! escaped by its own rules and the HTML page and markdown by theirs.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` with each control character escaped; borrowed when it has none.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            // Writing to a String cannot fail.
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(escape("a\x1b[2Jb\x07"), "a\\x1b[2Jb\\x07");
        assert_eq!(escape("x\ny\tz\x7f"), "x\\x0ay\\x09z\\x7f");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m");
        assert!(matches!(
            escape("µs 日本 ✓ [u8; 4]"),
            Cow::Borrowed("µs 日本 ✓ [u8; 4]")
        ));
    }
}
