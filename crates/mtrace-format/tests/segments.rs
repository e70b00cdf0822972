//! The metadata log in segments: a reader follows next-segment records
//! from the first region through segments in chunk slots (in any order in
//! the file, as a ring places them), reads segment slots as empty chunks,
//! and on damage or a cut keeps every record before it and says where.

use mtrace_format::layout::{
    COMPACT_FORMAT_VERSION, HEADER_SIZE, H_VERSION, META_NEXT_SEGMENT_LEN, SEGMENT_HEADER_SIZE,
    SEGMENT_MAGIC, SEGMENT_STATE, S_META_LEN,
};
use mtrace_format::meta::encode_next_segment;
use mtrace_format::{ClockInfo, Header, MetaRecord, StackId, StackKind, TraceFile};

const CHUNK: usize = 1024;
const FIRST: usize = 512;
const PARTS: usize = 4;

/// The records of part `p`: stack names.
fn records(p: usize) -> Vec<MetaRecord> {
    (0..8)
        .map(|i| MetaRecord::Stack {
            id: StackId((p * 100 + i) as u64),
            name: format!("part-{p}-task-{i}"),
            kind: StackKind::Program,
        })
        .collect()
}

/// A trace whose log is [`PARTS`] parts: the first region, then segments
/// in the chunk slots from the last one backwards (a later segment at a
/// lower offset, as a ring may place it). Returns the file and, for each
/// part, the file offset of each of its records.
fn segmented() -> (Vec<u8>, Vec<Vec<usize>>) {
    let meta_offset = HEADER_SIZE;
    let chunks_offset = HEADER_SIZE + FIRST;
    let slots = PARTS - 1;
    let mut file = vec![0u8; chunks_offset + slots * CHUNK];
    let part_at = |p: usize| match p {
        0 => meta_offset,
        p => chunks_offset + (slots - p) * CHUNK,
    };
    let mut offsets = Vec::new();
    let mut first_len = 0;
    for p in 0..PARTS {
        let mut bytes = Vec::new();
        let mut at = Vec::new();
        let log_start = part_at(p) + if p == 0 { 0 } else { SEGMENT_HEADER_SIZE };
        for r in records(p) {
            at.push(log_start + bytes.len());
            r.encode(&mut bytes);
        }
        if p + 1 < PARTS {
            encode_next_segment(&mut bytes, part_at(p + 1) as u64, CHUNK as u64);
        }
        let room = if p == 0 {
            FIRST
        } else {
            CHUNK - SEGMENT_HEADER_SIZE
        };
        assert!(bytes.len() <= room, "part {p}: {} bytes", bytes.len());
        file[log_start..log_start + bytes.len()].copy_from_slice(&bytes);
        if p == 0 {
            first_len = bytes.len();
        } else {
            let s = part_at(p);
            file[s..s + 8].copy_from_slice(&SEGMENT_STATE.to_le_bytes());
            file[s + 8..s + 16].copy_from_slice(&SEGMENT_MAGIC.to_le_bytes());
            file[s + S_META_LEN..s + S_META_LEN + 8]
                .copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        }
        offsets.push(at);
    }
    let mut header = Header::new(ClockInfo::nanoseconds(), CHUNK as u32);
    header.chunk_count = slots as u64;
    header.chunks_offset = chunks_offset as u64;
    header.meta_offset = meta_offset as u64;
    header.meta_capacity = FIRST as u64;
    header.meta_len = first_len as u64;
    file[..HEADER_SIZE].copy_from_slice(&header.encode());
    (file, offsets)
}

fn all_records() -> Vec<MetaRecord> {
    (0..PARTS).flat_map(records).collect()
}

#[test]
fn every_part_of_the_log_is_read_in_order_and_segment_slots_are_empty_chunks() {
    let (file, offsets) = segmented();
    let trace = TraceFile::parse(&file).unwrap();
    let (read, problem) = trace.metadata();
    assert_eq!(problem, None);
    assert_eq!(read, all_records());
    // Each record comes with its file offset, where it reads again.
    let mut located = Vec::new();
    trace.for_each_metadata_located(|at, r| {
        assert_eq!(
            mtrace_format::meta::record_at(&file, at).map(|r| r.into_owned()),
            Some(r.into_owned())
        );
        located.push(at);
    });
    assert_eq!(located, offsets.concat());
    // Every slot is a segment, and no chunk.
    for i in 0..trace.chunk_slots() {
        assert!(trace.chunk(i).unwrap().is_none(), "slot {i}");
    }
    // The log as one run: the records, without the links.
    let mut want = Vec::new();
    for r in all_records() {
        r.encode(&mut want);
    }
    assert_eq!(&*trace.metadata_log(), &want[..]);
    // The first region alone, as a reader that predates segments reads
    // it: its records, the link skipped as an unknown kind would be.
    let (first, start) = trace.metadata_region();
    let (alone, problem) = mtrace_format::meta::decode_records(first, start);
    assert_eq!((alone, problem), (records(0), None));
    let mut first_records = Vec::new();
    for r in records(0) {
        r.encode(&mut first_records);
    }
    assert_eq!(first.len(), first_records.len() + META_NEXT_SEGMENT_LEN);
}

/// The records of parts before `p`, then those of part `p` before its
/// record `k`.
fn before(p: usize, k: usize) -> Vec<MetaRecord> {
    let mut want: Vec<MetaRecord> = (0..p).flat_map(records).collect();
    want.extend(records(p).into_iter().take(k));
    want
}

#[test]
fn a_damaged_record_in_a_segment_keeps_every_record_before_it() {
    let (mut file, offsets) = segmented();
    let (p, k) = (2, 5);
    let at = offsets[p][k];
    // Its payload length runs past the segment.
    file[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let trace = TraceFile::parse(&file).unwrap();
    let (read, problem) = trace.metadata();
    assert_eq!(read, before(p, k));
    assert_eq!(problem.map(|p| p.offset), Some(at as u64));
}

#[test]
fn a_file_cut_inside_a_segment_keeps_every_whole_record_before_the_cut() {
    let (file, offsets) = segmented();
    // Part 1 lies last in the file: cut inside its record 3.
    let (p, k) = (1, 3);
    for into in [5, 12] {
        let cut = offsets[p][k] + into;
        let trace = TraceFile::parse(&file[..cut]).unwrap();
        let (read, problem) = trace.metadata();
        assert_eq!(read, before(p, k));
        // At the record (its header whole) or at the cut (inside it).
        let at = problem.map(|p| p.offset as usize);
        let want = if into < 8 { cut } else { offsets[p][k] };
        assert_eq!(at, Some(want), "cut {into} bytes into the record");
    }
    // Any cut: what is read is a prefix of the log, and all of it only
    // if nothing was cut from it.
    let all = all_records();
    for cut in HEADER_SIZE..=file.len() {
        let trace = TraceFile::parse(&file[..cut]).unwrap();
        let (read, problem) = trace.metadata();
        assert_eq!(read[..], all[..read.len()], "cut at {cut}");
        assert_eq!(problem.is_none(), read.len() == all.len(), "cut at {cut}");
    }
}

#[test]
fn a_bad_link_ends_the_log_where_it_is() {
    let (file, offsets) = segmented();
    let link_at = |p: usize| {
        // The link follows part p's last record.
        let last = *offsets[p].last().unwrap();
        let mut b = Vec::new();
        records(p)[7].encode(&mut b);
        last + b.len()
    };
    let set_link = |file: &mut Vec<u8>, p: usize, offset: u64, size: u64| {
        let at = link_at(p) + 8;
        file[at..at + 8].copy_from_slice(&offset.to_le_bytes());
        file[at + 8..at + 16].copy_from_slice(&size.to_le_bytes());
    };
    let segment_at = |p: usize| (offsets[p][0] - SEGMENT_HEADER_SIZE) as u64;
    let check = |file: &[u8], p: usize, offset: u64, case: &str| {
        let trace = TraceFile::parse(file).unwrap();
        let (read, problem) = trace.metadata();
        assert_eq!(read, before(p + 1, 0), "{case}");
        assert_eq!(problem.map(|p| p.offset), Some(offset), "{case}");
    };
    // A loop back to a segment already read.
    let mut bad = file.clone();
    set_link(&mut bad, 2, segment_at(1), CHUNK as u64);
    check(&bad, 2, link_at(2) as u64, "loop");
    // Into the first region, the header, or past the end of the file.
    for (case, offset, size) in [
        ("first region", HEADER_SIZE as u64, CHUNK as u64),
        ("header", 0, CHUNK as u64),
        ("past the end", file.len() as u64, CHUNK as u64),
        ("overflow", u64::MAX - 8, CHUNK as u64),
        ("too small", segment_at(2), 16),
    ] {
        let mut bad = file.clone();
        set_link(&mut bad, 1, offset, size);
        let at = if case == "past the end" {
            offset
        } else {
            link_at(1) as u64
        };
        check(&bad, 1, at, case);
    }
    // No segment where the link points.
    let mut bad = file.clone();
    let s = segment_at(3) as usize;
    bad[s + 8] ^= 0xff;
    check(&bad, 2, s as u64, "no magic");
    // A committed length larger than the segment.
    let mut bad = file.clone();
    bad[s + S_META_LEN..s + S_META_LEN + 8].copy_from_slice(&(CHUNK as u64).to_le_bytes());
    check(&bad, 2, (s + S_META_LEN) as u64, "committed too long");
}

/// `file` as format version 4 (compact events): the metadata log is laid
/// out the same whatever the events' encoding.
fn as_compact(file: &[u8]) -> Vec<u8> {
    let mut file = file.to_vec();
    file[H_VERSION..H_VERSION + 4].copy_from_slice(&COMPACT_FORMAT_VERSION.to_le_bytes());
    file
}

/// The records of a log, each with its file offset, and the damage (its
/// offset and why) that ended it.
type LocatedLog = (Vec<(usize, MetaRecord)>, Option<(u64, &'static str)>);

/// The records of `file`'s log, each with its file offset, and the damage
/// that ended it.
fn located_log(file: &[u8]) -> LocatedLog {
    let trace = TraceFile::parse(file).unwrap();
    let mut read = Vec::new();
    let problem = trace.for_each_metadata_located(|at, r| read.push((at, r.into_owned())));
    (read, problem.map(|p| (p.offset, p.why)))
}

/// A compact file's version-3 image (what the analyzer reads) holds the
/// log's segments where the file held them: the segments live in chunk
/// slots, which the image writes anew elsewhere, so an image of the first
/// region alone lost every name past it (`damaged_metadata` at the first
/// segment, `unknown_function` for each function named there). Damage in
/// a segment or a link reads as the same damage at the same offset.
#[test]
fn a_compact_files_image_reads_every_segment_and_the_same_damage() {
    let (file, offsets) = segmented();
    let s = offsets[3][0] - SEGMENT_HEADER_SIZE;
    let mut cases = vec![("whole", file.clone())];
    let mut bad_record = file.clone();
    let at = offsets[2][5];
    bad_record[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    cases.push(("damaged record", bad_record));
    let mut no_magic = file.clone();
    no_magic[s + 8] ^= 0xff;
    cases.push(("no magic", no_magic));
    let mut too_long = file.clone();
    too_long[s + S_META_LEN..s + S_META_LEN + 8].copy_from_slice(&(CHUNK as u64).to_le_bytes());
    cases.push(("committed too long", too_long));
    for (case, file) in cases {
        let compact = as_compact(&file);
        let trace = TraceFile::parse(&compact).unwrap();
        assert!(trace.is_compact());
        let image = mtrace_format::convert::expand(&trace).unwrap().bytes;
        assert!(!TraceFile::parse(&image).unwrap().is_compact());
        let want = located_log(&compact);
        assert_eq!(located_log(&image), want, "{case}");
        if case == "whole" {
            let records: Vec<MetaRecord> = want.0.into_iter().map(|(_, r)| r).collect();
            assert_eq!((records, want.1), (all_records(), None));
        }
    }
}
