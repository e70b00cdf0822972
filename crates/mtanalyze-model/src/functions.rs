//! A function as a trace's metadata names it, borrowed from the file where
//! it can be: what the analysis keeps per function index, and what the
//! timeline exports name their frames by.

use std::borrow::Cow;

use crate::report::FunctionKey;

/// One function of the report: its identity and module, borrowed from the
/// trace's metadata when valid UTF-8 (a merge of many traces reads every
/// trace's function table; its strings need not be made and freed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionEntry<'a> {
    /// Name, file and line.
    pub key: EntryKey<'a>,
    /// Module path ("" if unknown).
    pub module: Cow<'a, str>,
}

/// A function's name, file and line as the metadata gives them (see
/// [`FunctionEntry`]); [`EntryKey::to_key`] makes the report's
/// [`FunctionKey`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EntryKey<'a> {
    /// Function or scope name.
    pub function: Cow<'a, str>,
    /// Source file ("" if unknown).
    pub file: Cow<'a, str>,
    /// Source line (0 if unknown).
    pub line: u32,
}

impl<'a> FunctionEntry<'a> {
    /// The entry of a function record's strings.
    #[doc(hidden)]
    pub fn new(
        function: Cow<'a, str>,
        file: Cow<'a, str>,
        line: u32,
        module: Cow<'a, str>,
    ) -> FunctionEntry<'a> {
        FunctionEntry {
            key: EntryKey {
                function,
                file,
                line,
            },
            module,
        }
    }
}

impl EntryKey<'_> {
    /// The report's key (its strings copied).
    pub fn to_key(&self) -> FunctionKey {
        FunctionKey::new(&self.function, &self.file, self.line)
    }
}
