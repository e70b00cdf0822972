//! A disk that fills up mid-run ends the recording honestly: the file stops
//! growing, every thread stops recording at its next chunk, the lost events
//! are counted exactly, and the file reads and finishes as usual. A disk
//! without room for the file's first step refuses the recording at start.
//!
//! The disk is a 4 MiB tmpfs mounted for the test (skipped, saying so, where
//! mounting is not allowed).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{decode, serial};
use mtrace::{Config, StartError};
use mtrace_format::EventKind;

/// A small tmpfs, unmounted (and its folder removed) when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    /// Mounts a `size`-byte tmpfs, or says why not.
    fn mount(name: &str, size: &str) -> Result<SmallDisk, String> {
        let dir = std::env::temp_dir().join(format!("mtrace-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output();
        match out {
            Ok(out) if out.status.success() => Ok(SmallDisk(dir)),
            Ok(out) => {
                let _ = std::fs::remove_dir(&dir);
                Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
            }
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(format!("cannot run mount: {e}"))
            }
        }
    }

    /// A 4 MiB tmpfs, or None after saying on stderr why the test is
    /// skipped (mounting needs privileges a machine may not give).
    fn mount_or_skip(name: &str) -> Option<SmallDisk> {
        SmallDisk::mount(name, "4m")
            .map_err(|why| eprintln!("skipped: cannot mount a tmpfs ({why})"))
            .ok()
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Still busy (a failed test): detach it lazily.
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_disk_that_fills_up_ends_the_recording_honestly() {
    let _serial = serial();
    let Some(disk) = SmallDisk::mount_or_skip("disk-full") else {
        return;
    };
    let path = disk.path().join("full.mtrace");
    // Default settings: the maximum (at least 256 MiB) is far beyond the disk.
    let recording = mtrace::start(Config::new(&path)).unwrap();
    const THREADS: u64 = 2;
    // 2 x 3,000,000 pairs: some 15 MiB of compact events (96 MiB of
    // 16-byte ones) for a 4 MiB disk.
    const PAIRS: u64 = 3_000_000;
    // Both threads hold a chunk before the disk fills.
    let together = std::sync::Arc::new(std::sync::Barrier::new(THREADS as usize));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let together = together.clone();
            std::thread::spawn(move || {
                let f = mtrace::register_function("filling", file!(), t as u32, module_path!());
                together.wait();
                for _ in 0..PAIRS {
                    mtrace::enter(f);
                    mtrace::exit(f);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let summary = recording.finish().expect("finishing works on a full disk");
    let failure = summary
        .growth_failure
        .clone()
        .expect("the file stopped growing");
    assert!(
        failure.contains("No space left"),
        "stopped growing because: {failure}"
    );
    assert!(summary.growths >= 1, "it grew before the disk filled");
    assert!(summary.dropped_events > 0);

    let len = std::fs::metadata(&path).unwrap().len();
    eprintln!(
        "4 MiB disk: {} events recorded, {} dropped, {} growths, file {len} bytes",
        summary.events, summary.dropped_events, summary.growths
    );
    assert!(len <= 4 << 20, "{len} bytes on a 4 MiB disk");
    let d = decode(&path);
    assert!(d.header.finished());
    assert_eq!(d.header.chunk_count, summary.chunk_count);
    assert_eq!(
        len,
        d.header.chunks_offset + d.header.chunk_count * d.header.chunk_size as u64
    );
    // Counted exactly: each thread's start, its pairs and its exit were
    // either recorded or dropped; the `lost` marks come on top.
    assert_eq!(d.event_count(), summary.events);
    let recorded = d.event_count() - d.lost_marks();
    assert_eq!(d.header.dropped_events, summary.dropped_events);
    assert_eq!(recorded + summary.dropped_events, THREADS * (2 * PAIRS + 2));
    // Both threads were cut short, and say so last, from when.
    for (&tid, chunks) in &d.chunks {
        let events = d.events(tid);
        let last = events.last().expect("a chunk holds events");
        assert_eq!(
            last.kind,
            EventKind::Lost,
            "thread {tid} ends with a lost mark"
        );
        assert!(events.len() < 2 || last.tick >= events[events.len() - 2].tick);
        assert_eq!(
            chunks
                .iter()
                .flat_map(|c| &c.events)
                .filter(|e| e.kind == EventKind::Lost)
                .count(),
            1,
            "thread {tid}: one mark"
        );
    }
    assert_eq!(d.lost_marks(), THREADS);
    // More than the first step was used: the disk's room, not a guess.
    let chunk_bytes = d.header.chunk_count * d.header.chunk_size as u64;
    assert!(
        chunk_bytes > 2 << 20,
        "{recorded} events in {chunk_bytes} bytes of chunks on a 4 MiB disk"
    );
    // Each thread's chunks follow one another without a hole.
    for &tid in d.threads.keys() {
        let _ = d.events(tid);
    }
    let loaded = mtanalyze::load(&path).expect("load");
    let report =
        mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
    assert!(report.functions.iter().any(|f| f.function == "filling"));
    drop(disk);
}

#[test]
fn a_disk_without_room_for_the_first_step_refuses_at_start() {
    let _serial = serial();
    let Some(disk) = SmallDisk::mount_or_skip("disk-tiny") else {
        return;
    };
    // Leave less than the first step (header, 1 MiB of names, 1 MiB of chunks).
    let filler = disk.path().join("filler");
    std::fs::write(&filler, vec![1u8; 3 << 20]).unwrap();
    let path = disk.path().join("refused.mtrace");
    let err = mtrace::start(Config::new(&path)).unwrap_err();
    assert!(matches!(err, StartError::NoSpace { .. }), "{err}");
    assert!(!path.exists(), "no half-made file is left behind");
    assert!(!mtrace::is_recording());
    // With the room back, the same disk records.
    std::fs::remove_file(&filler).unwrap();
    let recording = mtrace::start(Config::new(&path)).unwrap();
    assert!(recording.finish().unwrap().growth_failure.is_none());
    drop(disk);
}

#[test]
fn names_past_a_full_disk_are_dropped_and_counted() {
    let _serial = serial();
    let Some(disk) = SmallDisk::mount_or_skip("meta-full") else {
        return;
    };
    let path = disk.path().join("names.mtrace");
    // Names past the first region go on in segments, chunk slots the file
    // grows by with their blocks reserved: a name that finds no room is
    // dropped, never written into a hole (a SIGBUS on a full disk).
    let recording = mtrace::start(Config::new(&path)).unwrap();
    const NAMES: usize = 80_000; // some 6 MB of records
    let stacks: Vec<_> = (0..NAMES)
        .map(|i| mtrace::LogicalStack::new(format!("request-{i:06}-{}", "y".repeat(40))))
        .collect();
    recording.finish().expect("finishing works on a full disk");
    drop(stacks);
    let d = decode(&path);
    assert!(d.header.finished());
    assert!(d.header.meta_dropped > 0, "the disk cannot hold every name");
    assert_eq!(d.stacks.len() as u64 + d.header.meta_dropped, NAMES as u64);
    assert!(d.stacks.len() > 10_000, "{} names kept", d.stacks.len());
    // The names kept are the first ones, whole.
    for (_, name) in d.stacks.iter().take(100) {
        assert!(name.starts_with("request-") && name.ends_with(&"y".repeat(40)));
    }
}
