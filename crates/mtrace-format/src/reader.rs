//! The zero-copy reader: a trace borrowed from a byte slice (usually a memory map).
//!
//! Nothing the file claims is trusted: every offset and count is checked
//! against the slice's real length, and the number of chunks visited is the
//! number that physically fit, however many the header claims.

use crate::chunk::Chunk;
use crate::error::{ChunkProblem, ChunkProblemKind, FormatError};
use crate::header::Header;
use crate::layout::{COMPACT_FORMAT_VERSION, HEADER_SIZE};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

use crate::layout::{read_u64, SEGMENT_HEADER_SIZE, SEGMENT_MAGIC, S_MAGIC, S_META_LEN};
use crate::meta::{walk_part, MetaProblem, MetaRecord, MetaRecordRef, NextSegment, PartEnd};

/// A trace file in memory.
#[derive(Clone, Debug)]
pub struct TraceFile<'a> {
    bytes: &'a [u8],
    header: Header,
}

impl<'a> TraceFile<'a> {
    /// Checks the header. Chunks and metadata are decoded on demand.
    pub fn parse(bytes: &'a [u8]) -> Result<TraceFile<'a>, FormatError> {
        let header = Header::decode(bytes)?;
        if header.chunk_count > 0 && header.chunks_offset < HEADER_SIZE as u64 {
            return Err(FormatError::BadHeader {
                field: "chunks_offset",
                offset: crate::layout::H_CHUNKS_OFFSET as u64,
                why: format!("{} lies inside the header", header.chunks_offset),
            });
        }
        Ok(TraceFile { bytes, header })
    }

    /// The decoded header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The whole file.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Chunk slots that start inside the file (at most the header's count).
    pub fn chunk_slots(&self) -> u64 {
        let h = &self.header;
        let len = self.bytes.len() as u64;
        if h.chunk_count == 0 || h.chunks_offset >= len {
            return 0;
        }
        let in_file = (len - h.chunks_offset).div_ceil(h.chunk_size as u64);
        in_file.min(h.chunk_count)
    }

    /// Slots the header claims but the file does not hold (it was cut short).
    pub fn missing_slots(&self) -> u64 {
        self.header.chunk_count - self.chunk_slots()
    }

    /// Decodes slot `index` (`Ok(None)` for an unused slot). A slot that
    /// does not start inside the file (see [`TraceFile::chunk_slots`]) is
    /// [`ChunkProblemKind::Truncated`], whatever the header claims.
    pub fn chunk(&self, index: u64) -> Result<Option<Chunk<'a>>, ChunkProblem> {
        let size = self.header.chunk_size as u64;
        let offset = index
            .checked_mul(size)
            .and_then(|o| o.checked_add(self.header.chunks_offset));
        let (Some(offset), true) = (offset, index < self.chunk_slots()) else {
            return Err(ChunkProblem {
                index,
                offset: offset.unwrap_or(u64::MAX),
                kind: ChunkProblemKind::Truncated,
            });
        };
        let start = offset.min(self.bytes.len() as u64) as usize;
        let end = offset.saturating_add(size).min(self.bytes.len() as u64) as usize;
        let bytes = &self.bytes[start..end];
        if self.is_compact() {
            Chunk::decode_compact(bytes, index, offset, size as usize)
        } else {
            Chunk::decode(bytes, index, offset, size as usize)
        }
    }

    /// The file's events are compact (format version 4): its chunks
    /// decode through [`crate::compact`].
    pub fn is_compact(&self) -> bool {
        self.header.version >= COMPACT_FORMAT_VERSION
    }

    /// The metadata records, and the damage that stopped the read if any.
    pub fn metadata(&self) -> (Vec<MetaRecord>, Option<MetaProblem>) {
        let mut records = Vec::new();
        let problem = self.for_each_metadata(|r| records.push(r));
        (records, problem)
    }

    /// [`TraceFile::metadata`], handing each record to `f` as it is
    /// decoded instead of collecting them; returns the problem, if any.
    pub fn for_each_metadata(&self, mut f: impl FnMut(MetaRecord)) -> Option<MetaProblem> {
        self.for_each_metadata_borrowed(|r| f(r.into_owned()))
    }

    /// [`TraceFile::for_each_metadata`], stack names borrowed from the
    /// file (see [`MetaRecordRef`]).
    pub fn for_each_metadata_borrowed(
        &self,
        mut f: impl FnMut(MetaRecordRef<'a>),
    ) -> Option<MetaProblem> {
        self.for_each_metadata_located(|_, r| f(r))
    }

    /// [`TraceFile::for_each_metadata_borrowed`], each record with its
    /// file offset: [`crate::meta::record_at`] reads it again from
    /// [`TraceFile::bytes`] there (a reader of a million task names can
    /// keep where each is instead of the name).
    pub fn for_each_metadata_located(
        &self,
        mut f: impl FnMut(usize, MetaRecordRef<'a>),
    ) -> Option<MetaProblem> {
        self.walk_metadata(|part, start| walk_part(part, start, |at, r| f(start as usize + at, r)))
    }

    /// The metadata log as one run of records: the first region's and each
    /// segment's, without the next-segment records that link them (what a
    /// writer of a file with the log in one region copies). Borrowed when
    /// the log is all in the first region.
    pub fn metadata_log(&self) -> Cow<'a, [u8]> {
        let mut parts: Vec<&'a [u8]> = Vec::new();
        self.walk_metadata(|part, start| {
            let end = walk_part(part, start, |_, _| {});
            let kept = match end.next {
                Some(next) => &part[..(next.record_offset - start) as usize],
                None => part,
            };
            parts.push(kept);
            end
        });
        match parts.as_slice() {
            [] => Cow::Borrowed(&[]),
            [one] => Cow::Borrowed(one),
            _ => Cow::Owned(parts.concat()),
        }
    }

    /// The byte ranges of the file the metadata log is read from, in the
    /// order it is read: the first region's committed bytes, then, for
    /// each next-segment record, the header of the segment it names and,
    /// if that header holds, the segment's committed bytes; each range
    /// ends at the file's end at most. The same bytes at the same offsets
    /// in an otherwise zero buffer read as the same log, with the same
    /// damage at the same offsets (unless a part runs past the file's
    /// end): what [`crate::convert::image_start`] copies into a compact
    /// file's image, whose chunk slots, segments among them, are
    /// rewritten elsewhere. A rejected segment's header is kept too, so
    /// that the image rejects it for the same reason.
    pub fn metadata_spans(&self) -> Vec<Range<usize>> {
        let len = self.bytes.len();
        let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX).min(len);
        let mut spans = Vec::new();
        self.walk_metadata(|part, start| {
            let from = to_usize(start);
            spans.push(from..from + part.len());
            let end = walk_part(part, start, |_, _| {});
            // The header of the segment the part links to, whether or not
            // it holds (a link outside the file gives an empty range).
            if let Some(next) = &end.next {
                let header_end = next.offset.saturating_add(SEGMENT_HEADER_SIZE as u64);
                spans.push(to_usize(next.offset)..to_usize(header_end));
            }
            end
        });
        spans
    }

    /// Reads the metadata log part by part: `part` is handed each part's
    /// committed bytes in the file and its file offset, and says how its
    /// read ended; a next-segment record leads to the next part. Returns
    /// the damage that stopped the log, if any: every record before it
    /// was handed over.
    fn walk_metadata(&self, mut part: impl FnMut(&'a [u8], u64) -> PartEnd) -> Option<MetaProblem> {
        let bytes: &'a [u8] = self.bytes;
        let len = bytes.len() as u64;
        let h = &self.header;
        // Every part's bytes, so that a link into one already read (a
        // loop, or an overlap) is damage, and no byte is read twice.
        let mut taken: BTreeMap<u64, u64> = BTreeMap::new();
        let mut start = h.meta_offset;
        let mut claimed_end = self.claimed_metadata_end();
        taken.insert(start, start.saturating_add(h.meta_capacity.max(1)));
        loop {
            let from = start.min(len);
            let to = claimed_end.min(len).max(from);
            let end = part(&bytes[from as usize..to as usize], from);
            if end.problem.is_some() {
                return end.problem;
            }
            let Some(next) = end.next else {
                // The whole part was read: the file may end inside it.
                return (to < claimed_end).then_some(MetaProblem {
                    offset: to,
                    why: "file ends inside the metadata log",
                });
            };
            let (seg_start, seg_end) = match self.segment(next, &taken) {
                Ok(found) => found,
                Err(problem) => return Some(problem),
            };
            taken.insert(next.offset, next.offset + next.size);
            start = seg_start;
            claimed_end = seg_end;
        }
    }

    /// Where the log of the segment `next` names lies (its first byte and
    /// the end of its committed bytes, which may lie past the file's end),
    /// or the damage that keeps it from being read.
    fn segment(
        &self,
        next: NextSegment,
        taken: &BTreeMap<u64, u64>,
    ) -> Result<(u64, u64), MetaProblem> {
        let bad = |offset, why| MetaProblem { offset, why };
        let len = self.bytes.len() as u64;
        let end = next.offset.checked_add(next.size);
        let Some(end) = end.filter(|_| {
            next.size > SEGMENT_HEADER_SIZE as u64 && next.offset >= HEADER_SIZE as u64
        }) else {
            return Err(bad(
                next.record_offset,
                "next metadata segment lies outside the file",
            ));
        };
        // The parts taken so far: the one starting last at or before this
        // segment's end must end at or before its start.
        let overlaps = taken
            .range(..end)
            .next_back()
            .is_some_and(|(_, &taken_end)| taken_end > next.offset);
        if overlaps {
            return Err(bad(
                next.record_offset,
                "next metadata segment overlaps a part of the log already read",
            ));
        }
        let header = (next.offset as usize)
            .checked_add(SEGMENT_HEADER_SIZE)
            .and_then(|e| self.bytes.get(next.offset as usize..e));
        let Some(header) = header.filter(|_| next.offset < len) else {
            return Err(bad(
                next.offset,
                "file ends inside a metadata segment's header",
            ));
        };
        if read_u64(header, S_MAGIC) != Some(SEGMENT_MAGIC) {
            return Err(bad(next.offset, "no metadata segment where its link says"));
        }
        let committed = read_u64(header, S_META_LEN).unwrap_or(0);
        let start = next.offset + SEGMENT_HEADER_SIZE as u64;
        if committed > end - start {
            return Err(bad(
                next.offset + S_META_LEN as u64,
                "metadata segment's committed length runs past its size",
            ));
        }
        Ok((start, start + committed))
    }

    /// The committed bytes of the first metadata region that are in the
    /// file, and the file offset they start at. The log may go on in
    /// segments: [`TraceFile::for_each_metadata`] reads them all.
    pub fn metadata_region(&self) -> (&'a [u8], u64) {
        let len = self.bytes.len() as u64;
        let start = self.header.meta_offset.min(len);
        let end = self.claimed_metadata_end().min(len);
        let bytes: &'a [u8] = self.bytes;
        (&bytes[start as usize..end as usize], start)
    }

    /// Where the header says the committed metadata ends (a claim: it may
    /// lie past the file's end).
    fn claimed_metadata_end(&self) -> u64 {
        let h = &self.header;
        h.meta_offset
            .saturating_add(h.meta_len.min(h.meta_capacity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, FunctionId, ThreadId};
    use crate::writer::{TraceWriter, WriterOptions};

    #[test]
    fn slots_outside_the_file_are_errors_whatever_the_header_claims() {
        let mut w =
            TraceWriter::new(std::io::Cursor::new(Vec::new()), WriterOptions::default()).unwrap();
        let f = w.function("f", "", 0, "");
        w.event(ThreadId(1), 5, EventKind::Enter(f)).unwrap();
        let mut bytes = w.finish(None).unwrap().into_inner();
        // Claim 2^40 slots: only those starting inside the file are visited
        // (the chunk, and the metadata after it read as a second slot).
        bytes[crate::layout::H_CHUNK_COUNT..][..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let t = TraceFile::parse(&bytes).unwrap();
        assert_eq!(t.chunk_slots(), 2);
        assert_eq!(t.missing_slots(), (1 << 40) - 2);
        assert!(t.chunk(0).unwrap().is_some());
        assert_eq!(FunctionId(1), f);
        for i in [2, 1 << 39, u64::MAX] {
            let p = t.chunk(i).unwrap_err();
            assert_eq!(p.kind, ChunkProblemKind::Truncated, "slot {i}");
        }
    }
}
