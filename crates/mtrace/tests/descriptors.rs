//! The recorder's descriptors stay out of the program's way: a recording
//! holds no descriptor of its file on disk (it opens it by its path to grow
//! it), and what it holds open (a file in memory) is at a high number, so
//! the files the program opens get the numbers they would get without
//! mtrace (one test, so no other test of this binary opens descriptors
//! meanwhile).

use std::os::fd::AsRawFd;

#[test]
fn the_program_s_files_get_the_numbers_they_get_without_a_recording() {
    let dir = std::env::temp_dir().join(format!("mtrace-descriptors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.bin");
    let opened = dir.join("program.txt");
    std::fs::write(&opened, b"x").unwrap();

    let before = std::fs::File::open(&opened).unwrap().as_raw_fd();
    let recording = mtrace::start(mtrace::Config::new(&trace)).unwrap();
    let during = std::fs::File::open(&opened).unwrap();
    assert_eq!(
        during.as_raw_fd(),
        before,
        "the recording took the lowest free descriptor"
    );
    // The file on disk is not held open, also while it grows.
    let named = |target: &std::path::Path| -> Vec<i32> {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == target))
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect()
    };
    assert_eq!(named(&trace), Vec::<i32>::new());
    let f = mtrace::register_function("grow", file!(), line!(), "");
    for _ in 0..200_000 {
        mtrace::enter(f);
        mtrace::exit(f);
    }
    assert_eq!(named(&trace), Vec::<i32>::new());

    // A recording into memory holds its file, at a high number (unless
    // the limit is too low).
    drop(during);
    let summary = recording.finish().unwrap();
    assert!(summary.growths > 0, "the file grew: {summary:?}");
    assert_eq!(summary.growth_failure, None);
    let memory = mtrace::start(mtrace::Config::new(&trace).in_memory(true)).unwrap();
    let own: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("/memfd:"))
        })
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    assert_eq!(own.len(), 1, "{own:?}");
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit to fill.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    if limit.rlim_cur >= 1024 {
        assert!(own[0] >= 512, "the trace is at descriptor {}", own[0]);
    }
    memory.finish().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
