//! The zero-copy reader: a trace borrowed from a byte slice (usually a memory map).
//!
//! Nothing the file claims is trusted: every offset and count is checked
//! against the slice's real length, and the number of chunks visited is the
//! number that physically fit, however many the header claims.

use crate::chunk::Chunk;
use crate::error::{ChunkProblem, ChunkProblemKind, FormatError};
use crate::header::Header;
use crate::layout::{COMPACT_FORMAT_VERSION, HEADER_SIZE};
use crate::meta::{for_each_record_located, MetaProblem, MetaRecord, MetaRecordRef};

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
    /// offset in [`TraceFile::metadata_region`] (see
    /// [`crate::meta::for_each_record_located`]).
    pub fn for_each_metadata_located(
        &self,
        f: impl FnMut(usize, MetaRecordRef<'a>),
    ) -> Option<MetaProblem> {
        let (region, start) = self.metadata_region();
        let mut problem = for_each_record_located(region, start, f);
        let end = start + region.len() as u64;
        if problem.is_none() && end < self.claimed_metadata_end() {
            problem = Some(MetaProblem {
                offset: end,
                why: "file ends inside the metadata region",
            });
        }
        problem
    }

    /// The committed bytes of the metadata region that are in the file,
    /// and the file offset they start at. [`crate::meta::record_at`]
    /// reads a record of it by its offset.
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
