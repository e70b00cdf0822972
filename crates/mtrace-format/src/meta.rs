//! The metadata region: names of functions, logical stacks and threads, and
//! named instants (marks).
//!
//! Names are written once, when first used, into an append-only log separate
//! from the event chunks, so a trace whose chunks were overwritten or lost
//! still names everything (and keeps its marks). Each record is
//! `u32 payload_len, u16 kind, u16 0, payload`, padded to 8 bytes; strings in
//! a payload are `u32 len, UTF-8 bytes`. Unknown kinds are skipped by length,
//! so newer writers can add kinds.
//!
//! The log starts in the region the header locates and may go on in
//! *segments* elsewhere in the file: a full part of the log ends with a
//! next-segment record ([`encode_next_segment`]) saying where the next
//! part is. This module reads one part ([`walk_part`]); following the
//! chain through a file is [`crate::TraceFile`]'s job.
use std::borrow::Cow;

use crate::event::{FunctionId, StackId, ThreadId};
use crate::layout::{
    read_u16, read_u32, read_u64, META_ALIGN, META_CONTINUED_STACK, META_FUNCTION, META_HOST,
    META_MARK, META_NEXT_SEGMENT, META_RECORD_HEADER, META_STACK, META_STRING_MAX, META_THREAD,
};

/// Where a function (or scope) was defined.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FunctionMeta {
    /// The id events refer to.
    pub id: FunctionId,
    /// The function or scope name.
    pub name: String,
    /// Source file, empty if unknown.
    pub file: String,
    /// Source line, 0 if unknown.
    pub line: u32,
    /// Module path, empty if unknown.
    pub module: String,
}

/// What a logical stack stands for: the stack record's `kind` field.
/// Readers group stacks by it (frames left open at a stack's end are
/// summarized per kind); a value a reader does not know reads as
/// [`StackKind::Unspecified`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StackKind {
    /// The record does not say (written before the field, or by a writer
    /// that does not know).
    #[default]
    Unspecified,
    /// Made by the program itself (`mtrace::LogicalStack::new`).
    Program,
    /// A future put on a stack of its own (`.on_logical_stack()`).
    Future,
    /// A tokio task (`mtrace-tokio`'s hooks).
    TokioTask,
    /// A `tracing` span on a stack of its own (`mtrace-tracing`).
    Span,
    /// A Python asyncio task.
    AsyncioTask,
    /// A Python greenlet.
    Greenlet,
    /// A Python callback context (the profiled program's own switch key).
    CallbackContext,
    /// A thread waiting for work (a parked tokio worker): while a thread
    /// is on it, the thread is idle, not running anything of the program.
    Idle,
}

impl StackKind {
    /// Every kind, in the order of their values.
    pub const ALL: [StackKind; 9] = [
        StackKind::Unspecified,
        StackKind::Program,
        StackKind::Future,
        StackKind::TokioTask,
        StackKind::Span,
        StackKind::AsyncioTask,
        StackKind::Greenlet,
        StackKind::CallbackContext,
        StackKind::Idle,
    ];

    /// The record's value.
    pub fn value(self) -> u32 {
        self as u32
    }

    /// The kind a record's value stands for; unknown values are
    /// [`StackKind::Unspecified`].
    pub fn from_value(value: u32) -> StackKind {
        usize::try_from(value)
            .ok()
            .and_then(|i| StackKind::ALL.get(i).copied())
            .unwrap_or_default()
    }

    /// The kind's machine-readable name (`asyncio_task`), as reports'
    /// JSON writes it.
    pub fn name(self) -> &'static str {
        match self {
            StackKind::Unspecified => "unspecified",
            StackKind::Program => "program",
            StackKind::Future => "future",
            StackKind::TokioTask => "tokio_task",
            StackKind::Span => "span",
            StackKind::AsyncioTask => "asyncio_task",
            StackKind::Greenlet => "greenlet",
            StackKind::CallbackContext => "callback_context",
            StackKind::Idle => "idle",
        }
    }

    /// The kind [`StackKind::name`] gives `name`, if any.
    pub fn from_name(name: &str) -> Option<StackKind> {
        StackKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Plural words for stacks of this kind, as reports write them.
    pub fn plural(self) -> &'static str {
        match self {
            StackKind::Unspecified => "other stacks",
            StackKind::Program => "program stacks",
            StackKind::Future => "futures",
            StackKind::TokioTask => "tokio tasks",
            StackKind::Span => "spans",
            StackKind::AsyncioTask => "asyncio tasks",
            StackKind::Greenlet => "greenlets",
            StackKind::CallbackContext => "callback contexts",
            StackKind::Idle => "idle stacks",
        }
    }
}

/// One metadata record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaRecord {
    /// A function definition.
    Function(FunctionMeta),
    /// A logical stack's name.
    Stack {
        /// The stack's id as used in `switch` events.
        id: StackId,
        /// Its name.
        name: String,
        /// What made it ([`StackKind::Unspecified`] in records written
        /// before the field).
        kind: StackKind,
    },
    /// A thread's name.
    Thread {
        /// The trace's thread id.
        tid: ThreadId,
        /// The operating system's id for the thread (0 if unknown).
        os_tid: u64,
        /// The thread's name (may be empty).
        name: String,
    },
    /// The name of the host the process ran on.
    Host {
        /// The host name (may be empty).
        name: String,
    },
    /// A named instant (`mtrace::mark("warm-up done")`).
    Mark {
        /// When: a raw tick of the trace's clock, the same clock as the
        /// events' ticks (all 64 bits; events keep 60).
        tick: u64,
        /// The trace thread id of the thread that wrote it (0: the thread
        /// had none yet, or unknown).
        tid: u32,
        /// The mark's name (may be empty).
        name: String,
    },
    /// A logical stack that ran in the file before this one of a rotating
    /// series, first switched onto in this file at `tick` with `frames`
    /// open (outermost first): they were opened before this file began, so
    /// a reader counts their time here but not their calls.
    ContinuedStack {
        /// The stack's id as used in `switch` events.
        id: StackId,
        /// The switch onto it (a raw tick, as a mark's).
        tick: u64,
        /// Its open frames, outermost first.
        frames: Vec<FunctionId>,
    },
}

impl MetaRecord {
    /// Appends the encoded record (header, payload, padding) to `out`.
    /// Strings longer than [`META_STRING_MAX`] are cut at a character boundary.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            MetaRecord::Function(f) => encode_record(out, META_FUNCTION, |out| {
                out.extend_from_slice(&f.id.0.to_le_bytes());
                out.extend_from_slice(&f.line.to_le_bytes());
                put_str(out, &f.name);
                put_str(out, &f.file);
                put_str(out, &f.module);
            }),
            MetaRecord::Stack { id, name, kind } => encode_stack_of_kind(out, *id, name, *kind),
            MetaRecord::Thread { tid, os_tid, name } => encode_record(out, META_THREAD, |out| {
                out.extend_from_slice(&tid.0.to_le_bytes());
                out.extend_from_slice(&os_tid.to_le_bytes());
                put_str(out, name);
            }),
            MetaRecord::Host { name } => encode_record(out, META_HOST, |out| put_str(out, name)),
            MetaRecord::Mark { tick, tid, name } => encode_mark(out, *tick, *tid, name),
            MetaRecord::ContinuedStack { id, tick, frames } => {
                let ids: Vec<u32> = frames.iter().map(|f| f.0).collect();
                encode_continued_stack(out, *id, *tick, &ids);
            }
        }
    }
}

/// Appends a [`MetaRecord::Stack`] record naming stack `id`, without
/// making the record (a writer names every task's stack as it is created:
/// this spares it copying the name).
pub fn encode_stack(out: &mut Vec<u8>, id: StackId, name: &str) {
    encode_stack_of_kind(out, id, name, StackKind::Unspecified);
}

/// [`encode_stack`] with the stack's kind.
///
/// Written in three appends (the same bytes as its fields appended one by
/// one): the recorder writes one per stack it names, and a `tracing`
/// layer names one per root span.
pub fn encode_stack_of_kind(out: &mut Vec<u8>, id: StackId, name: &str, kind: StackKind) {
    let name = clip_str(name);
    let payload_len = 8 + 4 + name.len() + 4;
    let end = (out.len() + META_RECORD_HEADER + payload_len).next_multiple_of(META_ALIGN);
    out.reserve(end - out.len());
    // Header (payload length, kind, reserved), the stack id, the name's length.
    let mut head = [0u8; META_RECORD_HEADER + 12];
    head[0..4].copy_from_slice(&(payload_len as u32).to_le_bytes());
    head[4..6].copy_from_slice(&META_STACK.to_le_bytes());
    head[8..16].copy_from_slice(&id.0.to_le_bytes());
    head[16..20].copy_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&kind.value().to_le_bytes());
    out.resize(end, 0);
}

/// Appends a [`MetaRecord::Mark`] record without making the record (the
/// recorder encodes a mark straight from the caller's `&str`).
pub fn encode_mark(out: &mut Vec<u8>, tick: u64, tid: u32, name: &str) {
    encode_record(out, META_MARK, |out| {
        out.extend_from_slice(&tick.to_le_bytes());
        out.extend_from_slice(&tid.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // reserved
        put_str(out, name);
    });
}

/// Appends a [`MetaRecord::ContinuedStack`] record from the recorder's
/// frame list (function ids, outermost first).
pub fn encode_continued_stack(out: &mut Vec<u8>, id: StackId, tick: u64, frames: &[u32]) {
    encode_record(out, META_CONTINUED_STACK, |out| {
        out.extend_from_slice(&id.0.to_le_bytes());
        out.extend_from_slice(&tick.to_le_bytes());
        out.extend_from_slice(&(frames.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // reserved
        for f in frames {
            out.extend_from_slice(&f.to_le_bytes());
        }
    });
}

/// Appends a next-segment record: the log goes on in the segment at file
/// offset `offset`, `size` bytes long (its header included). It is the
/// last record of its part of the log: a reader follows it and reads
/// nothing after it there.
pub fn encode_next_segment(out: &mut Vec<u8>, offset: u64, size: u64) {
    encode_record(out, META_NEXT_SEGMENT, |out| {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
    });
}

/// A next-segment record: where the metadata log goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextSegment {
    /// File offset of the record itself (where damage in the link is reported).
    pub record_offset: u64,
    /// File offset of the segment (its header).
    pub offset: u64,
    /// Bytes of the segment, its header included.
    pub size: u64,
}

/// How reading one part of the log ([`walk_part`]) ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartEnd {
    /// The damage that stopped the read, if any.
    pub problem: Option<MetaProblem>,
    /// The next-segment record that ended the part, if one did.
    pub next: Option<NextSegment>,
}

/// Appends a record of `kind` whose payload `payload` appends: the header
/// before it, the padding after it.
fn encode_record(out: &mut Vec<u8>, kind: u16, payload: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; META_RECORD_HEADER]);
    payload(out);
    let payload_len = (out.len() - start - META_RECORD_HEADER) as u32;
    out[start..start + 4].copy_from_slice(&payload_len.to_le_bytes());
    out[start + 4..start + 6].copy_from_slice(&kind.to_le_bytes());
    // In one step: a byte at a time, the padding cost a stack's name
    // record (one per root `tracing` span) a capacity check per byte.
    out.resize(out.len().next_multiple_of(META_ALIGN), 0);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let s = clip_str(s);
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// `s` cut to the longest prefix of at most [`META_STRING_MAX`] bytes that
/// ends on a character boundary.
fn clip_str(s: &str) -> &str {
    let mut end = s.len().min(META_STRING_MAX);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Why the metadata region could not be read to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaProblem {
    /// Offset of the bad record from the start of the file.
    pub offset: u64,
    /// What was wrong.
    pub why: &'static str,
}

/// Decodes records from `region` (the committed bytes of the metadata region,
/// which starts at file offset `base`). Returns the records read before the
/// first damaged one, and the damage if any.
pub fn decode_records(region: &[u8], base: u64) -> (Vec<MetaRecord>, Option<MetaProblem>) {
    let mut records = Vec::new();
    let problem = for_each_record(region, base, |r| records.push(r));
    (records, problem)
}

/// [`decode_records`], handing each record to `f` as it is decoded
/// instead of collecting them (half a million task names need not be
/// held twice). Returns the first problem, if any.
pub fn for_each_record(
    region: &[u8],
    base: u64,
    mut f: impl FnMut(MetaRecord),
) -> Option<MetaProblem> {
    for_each_record_borrowed(region, base, |r| f(r.into_owned()))
}

/// A record as [`for_each_record_borrowed`] hands it over: a logical
/// stack's name and a function's strings borrowed from the region (a
/// task-per-request trace has a name per task, a merge of many traces
/// reads every trace's function table, and a reader that keeps them its
/// own way need not have each made a `String` first), any other record as
/// [`MetaRecord`]. Strings come as their bytes, not yet checked to be
/// UTF-8: a reader that has met the same bytes before (a merge of many
/// traces of one program) need not check them again, and one that only
/// notes where a task's name is (to read it later) need not check half a
/// million of them. [`text`] reads them as
/// [`MetaRecord`] has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaRecordRef<'a> {
    /// [`MetaRecord::Stack`], its name's bytes borrowed, as written.
    Stack {
        /// The stack's id as used in `switch` events.
        id: StackId,
        /// Its name.
        name: &'a [u8],
        /// What made it.
        kind: StackKind,
    },
    /// [`MetaRecord::Function`], its strings' bytes borrowed, as written
    /// (see above).
    Function {
        /// The id events refer to.
        id: FunctionId,
        /// The function or scope name.
        name: &'a [u8],
        /// Source file, empty if unknown.
        file: &'a [u8],
        /// Source line, 0 if unknown.
        line: u32,
        /// Module path, empty if unknown.
        module: &'a [u8],
    },
    /// Any other record.
    Other(MetaRecord),
}

/// A string's bytes as text, as `String::from_utf8_lossy` reads them
/// (invalid bytes as U+FFFD), the common case (valid UTF-8, names) first
/// with the standard library's fast check rather than the lossy one's
/// byte-by-byte walk: a profile per request reads every name of its
/// trace at each analysis.
pub fn text(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

impl MetaRecordRef<'_> {
    /// The record, its strings copied if borrowed.
    pub fn into_owned(self) -> MetaRecord {
        match self {
            MetaRecordRef::Stack { id, name, kind } => MetaRecord::Stack {
                id,
                name: text(name).into_owned(),
                kind,
            },
            MetaRecordRef::Function {
                id,
                name,
                file,
                line,
                module,
            } => MetaRecord::Function(FunctionMeta {
                id,
                name: text(name).into_owned(),
                file: text(file).into_owned(),
                line,
                module: text(module).into_owned(),
            }),
            MetaRecordRef::Other(r) => r,
        }
    }
}

/// [`for_each_record`], stack names borrowed (see [`MetaRecordRef`]).
pub fn for_each_record_borrowed<'a>(
    region: &'a [u8],
    base: u64,
    mut f: impl FnMut(MetaRecordRef<'a>),
) -> Option<MetaProblem> {
    for_each_record_located(region, base, |_, r| f(r))
}

/// [`for_each_record_borrowed`], handing each record with its offset in
/// `region`: [`record_at`] reads it again from there. (A reader of half a
/// million task names can keep where each is, 4 bytes, instead of the
/// name.)
///
/// A next-segment record ends the read (the records of the segment it
/// names are not in `region`; [`walk_part`] hands it over).
pub fn for_each_record_located<'a>(
    region: &'a [u8],
    base: u64,
    f: impl FnMut(usize, MetaRecordRef<'a>),
) -> Option<MetaProblem> {
    walk_part(region, base, f).problem
}

/// [`for_each_record_located`] over one part of the log (the first region,
/// or a segment's committed bytes), which starts at file offset `base`:
/// also says which next-segment record ended it, if one did.
pub fn walk_part<'a>(
    region: &'a [u8],
    base: u64,
    mut f: impl FnMut(usize, MetaRecordRef<'a>),
) -> PartEnd {
    let mut at = 0usize;
    while at + META_RECORD_HEADER <= region.len() {
        match record_and_end(region, at) {
            Ok(None) => break, // zero bytes: the rest was never written
            Ok(Some((Entry::Record(r), end))) => {
                f(at, r);
                at = end;
            }
            // A kind from a newer writer, skipped.
            Ok(Some((Entry::Unknown, end))) => at = end,
            Ok(Some((Entry::Next { offset, size }, _))) => {
                return PartEnd {
                    problem: None,
                    next: Some(NextSegment {
                        record_offset: base + at as u64,
                        offset,
                        size,
                    }),
                }
            }
            Err(why) => {
                return PartEnd {
                    problem: Some(MetaProblem {
                        offset: base + at as u64,
                        why,
                    }),
                    next: None,
                }
            }
        }
    }
    PartEnd::default()
}

/// What a record header and payload decode to.
enum Entry<'a> {
    Record(MetaRecordRef<'a>),
    /// A kind this reader does not know: skipped by its length.
    Unknown,
    /// A next-segment record.
    Next {
        offset: u64,
        size: u64,
    },
}

/// The record at offset `at` of `region` (an offset
/// [`for_each_record_located`] handed over), or `None` if there is none
/// there that can be read.
pub fn record_at(region: &[u8], at: usize) -> Option<MetaRecordRef<'_>> {
    match record_and_end(region, at) {
        Ok(Some((Entry::Record(r), _))) => Some(r),
        _ => None,
    }
}

/// The record at `at` and the offset of the next one; `Ok(None)` where
/// the region was never written (zero bytes).
fn record_and_end(region: &[u8], at: usize) -> Result<Option<(Entry<'_>, usize)>, &'static str> {
    let header = at
        .checked_add(META_RECORD_HEADER)
        .and_then(|end| region.get(at..end));
    let (Some(len), Some(kind)) = (
        header.and_then(|h| read_u32(h, 0)),
        header.and_then(|h| read_u16(h, 4)),
    ) else {
        return Err("record header cut short");
    };
    if len == 0 && kind == 0 {
        return Ok(None);
    }
    let payload_start = at + META_RECORD_HEADER;
    let Some(payload) = payload_start
        .checked_add(len as usize)
        .and_then(|end| region.get(payload_start..end))
    else {
        return Err("record longer than the metadata region");
    };
    let record = decode_payload(kind, payload)?;
    let end = (payload_start + len as usize).div_ceil(META_ALIGN) * META_ALIGN;
    Ok(Some((record, end)))
}

fn decode_payload(kind: u16, p: &[u8]) -> Result<Entry<'_>, &'static str> {
    let mut cursor = Cursor { bytes: p, at: 0 };
    let record = match kind {
        META_STACK => {
            let id = StackId(cursor.u64()?);
            let name = cursor.bytes()?;
            // Appended to the record later: absent in older files.
            let kind = cursor
                .u32()
                .map_or(StackKind::Unspecified, StackKind::from_value);
            return Ok(Entry::Record(MetaRecordRef::Stack { id, name, kind }));
        }
        META_NEXT_SEGMENT => {
            return Ok(Entry::Next {
                offset: cursor.u64()?,
                size: cursor.u64()?,
            })
        }
        META_FUNCTION => {
            // In the record's order: id, line, name, file, module.
            return Ok(Entry::Record(MetaRecordRef::Function {
                id: FunctionId(cursor.u32()?),
                line: cursor.u32()?,
                name: cursor.bytes()?,
                file: cursor.bytes()?,
                module: cursor.bytes()?,
            }));
        }
        META_THREAD => MetaRecord::Thread {
            tid: ThreadId(cursor.u64()?),
            os_tid: cursor.u64()?,
            name: cursor.str()?,
        },
        META_HOST => MetaRecord::Host {
            name: cursor.str()?,
        },
        META_MARK => {
            let tick = cursor.u64()?;
            let tid = cursor.u32()?;
            let _reserved = cursor.u32()?;
            MetaRecord::Mark {
                tick,
                tid,
                name: cursor.str()?,
            }
        }
        META_CONTINUED_STACK => {
            let id = StackId(cursor.u64()?);
            let tick = cursor.u64()?;
            let count = cursor.u32()? as usize;
            let _reserved = cursor.u32()?;
            // The count is checked against the payload before anything is
            // allocated for it.
            if count > cursor.bytes.len().saturating_sub(cursor.at) / 4 {
                return Err("continued stack's frame count runs past its record");
            }
            let frames = (0..count)
                .map(|_| cursor.u32().map(FunctionId))
                .collect::<Result<_, _>>()?;
            MetaRecord::ContinuedStack { id, tick, frames }
        }
        _ => return Ok(Entry::Unknown),
    };
    Ok(Entry::Record(MetaRecordRef::Other(record)))
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn u32(&mut self) -> Result<u32, &'static str> {
        let v = read_u32(self.bytes, self.at).ok_or("record payload cut short")?;
        self.at += 4;
        Ok(v)
    }

    fn u64(&mut self) -> Result<u64, &'static str> {
        let v = read_u64(self.bytes, self.at).ok_or("record payload cut short")?;
        self.at += 8;
        Ok(v)
    }

    fn str(&mut self) -> Result<String, &'static str> {
        Ok(self.borrowed_str()?.into_owned())
    }

    fn borrowed_str(&mut self) -> Result<Cow<'a, str>, &'static str> {
        Ok(text(self.bytes()?))
    }

    /// A string's bytes, as written.
    fn bytes(&mut self) -> Result<&'a [u8], &'static str> {
        let len = self.u32()? as usize;
        if len > META_STRING_MAX {
            return Err("string longer than the format allows");
        }
        let end = self.at.checked_add(len).ok_or("string length overflows")?;
        let bytes = self
            .bytes
            .get(self.at..end)
            .ok_or("string runs past its record")?;
        self.at = end;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn text_reads_as_from_utf8_lossy_does() {
        for bytes in [
            &b"main.<locals>.f"[..],
            "caf\u{e9} \u{1F600}".as_bytes(),
            b"a\xffb\xc3",
            b"",
        ] {
            assert_eq!(
                super::text(bytes),
                String::from_utf8_lossy(bytes),
                "{bytes:?}"
            );
        }
        assert!(matches!(super::text(b"valid"), Cow::Borrowed("valid")));
    }

    use super::*;

    #[test]
    fn a_stack_record_has_the_bytes_of_its_fields_appended_one_by_one() {
        let long = "\u{e9}".repeat(META_STRING_MAX); // cut inside a character
        for name in ["", "t", "task-7", "span name!", long.as_str()] {
            for kind in [StackKind::Unspecified, StackKind::Span] {
                let mut fast = vec![0xAA; 3];
                encode_stack_of_kind(&mut fast, StackId(0x0102_0304_0506), name, kind);
                let mut slow = vec![0xAA; 3];
                encode_record(&mut slow, META_STACK, |out| {
                    out.extend_from_slice(&0x0102_0304_0506u64.to_le_bytes());
                    put_str(out, name);
                    out.extend_from_slice(&kind.value().to_le_bytes());
                });
                assert_eq!(fast, slow, "{:?} {kind:?}", &name[..name.len().min(8)]);
            }
        }
    }

    fn sample() -> Vec<MetaRecord> {
        vec![
            MetaRecord::Function(FunctionMeta {
                id: FunctionId(1),
                name: "parse".into(),
                file: "src/p.rs".into(),
                line: 10,
                module: "app::p".into(),
            }),
            MetaRecord::Stack {
                id: StackId(7),
                name: "task-7".into(),
                kind: StackKind::TokioTask,
            },
            MetaRecord::Thread {
                tid: ThreadId(2),
                os_tid: 4242,
                name: "worker-é".into(),
            },
            MetaRecord::Host {
                name: "build-7".into(),
            },
            MetaRecord::Mark {
                tick: u64::MAX,
                tid: 2,
                name: "warm-up done".into(),
            },
            MetaRecord::Mark {
                tick: 0,
                tid: 0,
                name: String::new(),
            },
            MetaRecord::ContinuedStack {
                id: StackId(9),
                tick: 77,
                frames: vec![FunctionId(1), FunctionId(3)],
            },
            MetaRecord::ContinuedStack {
                id: StackId(10),
                tick: 78,
                frames: Vec::new(),
            },
        ]
    }

    #[test]
    fn a_continued_stack_claiming_more_frames_than_it_holds_is_damage() {
        let mut bytes = Vec::new();
        encode_continued_stack(&mut bytes, StackId(9), 1, &[1, 2]);
        // The count (after the 8-byte header, id and tick) says a billion.
        bytes[META_RECORD_HEADER + 16..META_RECORD_HEADER + 20]
            .copy_from_slice(&1_000_000_000u32.to_le_bytes());
        let (records, problem) = decode_records(&bytes, 100);
        assert!(records.is_empty());
        assert_eq!(problem.map(|p| p.offset), Some(100));
    }

    #[test]
    fn records_round_trip() {
        let mut bytes = Vec::new();
        for r in sample() {
            r.encode(&mut bytes);
        }
        assert_eq!(bytes.len() % 8, 0);
        assert_eq!(decode_records(&bytes, 0), (sample(), None));
    }

    #[test]
    fn a_stack_record_without_a_kind_or_with_an_unknown_one_reads_unspecified() {
        // As recorders wrote it before the kind was appended: id and name.
        let mut old = Vec::new();
        encode_record(&mut old, META_STACK, |out| {
            out.extend_from_slice(&7u64.to_le_bytes());
            put_str(out, "task-7");
        });
        let mut unknown = Vec::new();
        encode_record(&mut unknown, META_STACK, |out| {
            out.extend_from_slice(&7u64.to_le_bytes());
            put_str(out, "task-7");
            out.extend_from_slice(&999u32.to_le_bytes());
        });
        for bytes in [old, unknown] {
            let want = MetaRecord::Stack {
                id: StackId(7),
                name: "task-7".into(),
                kind: StackKind::Unspecified,
            };
            assert_eq!(decode_records(&bytes, 0), (vec![want], None));
        }
        for kind in StackKind::ALL {
            assert_eq!(StackKind::from_value(kind.value()), kind);
            assert_eq!(StackKind::from_name(kind.name()), Some(kind));
        }
    }

    #[test]
    fn names_come_borrowed_and_are_made_valid_when_owned() {
        let mut bytes = Vec::new();
        for r in sample() {
            r.encode(&mut bytes);
        }
        let mut borrowed = 0;
        for_each_record_borrowed(&bytes, 0, |r| match r {
            MetaRecordRef::Function {
                name, file, module, ..
            } => {
                assert_eq!(
                    (name, file, module),
                    (&b"parse"[..], &b"src/p.rs"[..], &b"app::p"[..])
                );
                borrowed += 1;
            }
            MetaRecordRef::Stack { name, .. } => {
                assert_eq!(name, b"task-7");
                borrowed += 1;
            }
            MetaRecordRef::Other(_) => {}
        });
        assert_eq!(borrowed, 2);
        // A name that is not UTF-8 is made valid, as the owned reader does.
        let mut bytes = Vec::new();
        MetaRecord::Function(FunctionMeta {
            id: FunctionId(3),
            name: "x".into(),
            file: String::new(),
            line: 1,
            module: String::new(),
        })
        .encode(&mut bytes);
        let at = bytes
            .iter()
            .position(|&b| b == b'x')
            .expect("the name's byte");
        bytes[at] = 0xff;
        let mut seen = None;
        for_each_record_borrowed(&bytes, 0, |r| seen = Some(r.into_owned()));
        match seen {
            Some(MetaRecord::Function(f)) => assert_eq!((f.name.as_str(), f.line), ("\u{fffd}", 1)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_record_is_read_again_at_the_offset_it_was_handed_with() {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for r in sample() {
            starts.push(bytes.len());
            r.encode(&mut bytes);
        }
        let mut located = Vec::new();
        let problem = for_each_record_located(&bytes, 0, |at, r| {
            assert_eq!(record_at(&bytes, at), Some(r.clone()));
            located.push((at, r.into_owned()));
        });
        assert_eq!(problem, None);
        let want: Vec<(usize, MetaRecord)> = starts.into_iter().zip(sample()).collect();
        assert_eq!(located, want);
        // Anywhere else: nothing, or a record, never a panic.
        for at in (0..bytes.len() + 16).filter(|at| !want.iter().any(|(s, _)| s == at)) {
            let _ = record_at(&bytes, at);
        }
        assert_eq!(record_at(&bytes, bytes.len()), None);
        assert_eq!(record_at(&bytes, usize::MAX), None);
    }

    #[test]
    fn every_truncation_keeps_the_whole_records_before_it() {
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        for r in sample() {
            r.encode(&mut bytes);
            ends.push(bytes.len());
        }
        for cut in 0..bytes.len() {
            let (records, _) = decode_records(&bytes[..cut], 100);
            // Every record that ends (with its padding) before the cut is
            // kept; one whose payload is whole but whose padding is cut may be too.
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            assert!(
                records.len() == whole || records.len() == whole + 1,
                "cut at {cut}"
            );
            assert_eq!(records, sample()[..records.len()].to_vec(), "cut at {cut}");
        }
    }

    #[test]
    fn a_mark_has_its_documented_bytes() {
        let mut bytes = Vec::new();
        MetaRecord::Mark {
            tick: 0x0102_0304_0506_0708,
            tid: 3,
            name: "go".into(),
        }
        .encode(&mut bytes);
        #[rustfmt::skip]
        let want = [
            22, 0, 0, 0, 5, 0, 0, 0,         // payload_len 22, kind 5 (mark), reserved
            8, 7, 6, 5, 4, 3, 2, 1,          // tick
            3, 0, 0, 0, 0, 0, 0, 0,          // tid 3, reserved
            2, 0, 0, 0, b'g', b'o', 0, 0,    // name "go", padding to 32
        ];
        assert_eq!(bytes, want);
    }

    #[test]
    fn a_mark_cut_inside_its_payload_is_a_problem_not_a_panic() {
        // A record header that claims less payload than a mark's fields:
        // every length from 0 to the whole record but one byte.
        let mut whole = Vec::new();
        MetaRecord::Mark {
            tick: 7,
            tid: 1,
            name: "warm-up done".into(),
        }
        .encode(&mut whole);
        let payload_len = u32::from_le_bytes(whole[..4].try_into().unwrap()) as usize;
        for len in 0..payload_len {
            let mut bytes = whole.clone();
            bytes[..4].copy_from_slice(&(len as u32).to_le_bytes());
            let (records, problem) = decode_records(&bytes, 64);
            assert!(records.is_empty(), "payload of {len} bytes");
            let problem = problem.unwrap_or_else(|| panic!("payload of {len} bytes: no problem"));
            assert_eq!(problem.offset, 64);
        }
    }

    #[test]
    fn a_huge_claimed_length_is_an_error_not_an_allocation() {
        let mut bytes = vec![0u8; 16];
        bytes[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        bytes[4..6].copy_from_slice(&META_STACK.to_le_bytes());
        let (records, problem) = decode_records(&bytes, 4096);
        assert!(records.is_empty());
        assert_eq!(problem.map(|p| p.offset), Some(4096));
    }
}
