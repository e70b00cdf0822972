//! Rotation: a recording rotated by size or by age writes a numbered
//! series of files, each of which analyzes alone without a warning, and
//! whose reports, summed, count every call exactly as one file of the
//! same work does: frames open across a switch (each thread's `serve`,
//! each task's `task_body`, suspended on its logical stack) are counted
//! in the file where they were entered and only timed in later ones.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::serial;
use mtanalyze::AnalyzeOptions;
use mtrace::{Config, LogicalStack, Rotation};

const THREADS: u64 = 3;
const TASKS: u64 = 4;
const ROUNDS: u64 = 30;
const HANDLES: u64 = 200;

/// Every function's calls in the workload below.
fn expected_calls() -> BTreeMap<String, u64> {
    BTreeMap::from([
        ("serve".into(), THREADS),
        ("handle".into(), THREADS * ROUNDS * HANDLES),
        ("leaf".into(), THREADS * ROUNDS * HANDLES),
        ("task_body".into(), THREADS * TASKS),
        ("step".into(), THREADS * TASKS * ROUNDS),
    ])
}

/// `THREADS` threads, each in `serve` for the whole run, handling
/// requests in rounds a few milliseconds apart, and running its `TASKS`
/// tasks (logical stacks) a step each round, every task's `task_body`
/// open from its first step to its last.
fn workload() {
    let workers: Vec<_> = (0..THREADS)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(|| {
                    let f = |name| mtrace::register_function(name, file!(), 1, module_path!());
                    let (serve, handle, leaf, body, step) = (
                        f("serve"),
                        f("handle"),
                        f("leaf"),
                        f("task_body"),
                        f("step"),
                    );
                    let mut tasks: Vec<LogicalStack> = (0..TASKS)
                        .map(|t| LogicalStack::new(format!("task-{t}")))
                        .collect();
                    mtrace::enter(serve);
                    for round in 0..ROUNDS {
                        for _ in 0..HANDLES {
                            mtrace::enter(handle);
                            mtrace::enter(leaf);
                            mtrace::exit(leaf);
                            mtrace::exit(handle);
                        }
                        for task in &mut tasks {
                            let _on = task.enter();
                            if round == 0 {
                                mtrace::enter(body);
                            }
                            mtrace::enter(step);
                            mtrace::exit(step);
                            if round == ROUNDS - 1 {
                                mtrace::exit(body);
                            }
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    mtrace::exit(serve);
                })
                .expect("spawn")
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
}

/// A fresh directory for one test's series.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mtrace-rotation-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// The series' files on disk, in series order (`trace.bin`, `trace.1.bin`, ...).
fn series_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_owned();
            let n = match name.as_str() {
                "trace.bin" => 0,
                _ => name
                    .strip_prefix("trace.")?
                    .strip_suffix(".bin")?
                    .parse()
                    .ok()?,
            };
            Some((n, p))
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

/// Analyzes `path` alone; it must have no warning. Returns its calls per function.
fn calls_of(path: &Path) -> BTreeMap<String, u64> {
    let loaded = mtanalyze::load(path).expect("load");
    let report = mtanalyze::analyze(&loaded, &AnalyzeOptions::default()).expect("analyze");
    assert!(
        report.warnings.is_empty(),
        "{} must analyze without repairs: {:?}",
        path.display(),
        report.warnings
    );
    report
        .functions
        .iter()
        .filter(|f| f.ncalls > 0)
        .map(|f| (f.function.clone(), f.ncalls))
        .collect()
}

fn sum(reports: impl IntoIterator<Item = BTreeMap<String, u64>>) -> BTreeMap<String, u64> {
    let mut total = BTreeMap::new();
    for r in reports {
        for (f, n) in r {
            *total.entry(f).or_insert(0) += n;
        }
    }
    total
}

/// Records the workload with `config`; returns the summary.
fn record(config: Config) -> mtrace::Summary {
    let recording = mtrace::start(config).expect("start");
    workload();
    recording.finish().expect("finish")
}

/// The workload recorded into one file: its calls (equal to the counts
/// the workload makes).
fn single_file_calls() -> BTreeMap<String, u64> {
    let d = dir("single");
    let summary = record(Config::new(d.join("trace.bin")));
    assert_eq!(summary.files, 1);
    let calls = calls_of(&d.join("trace.bin"));
    let _ = std::fs::remove_dir_all(&d);
    calls
}

#[test]
fn rotation_by_size_gives_files_that_add_up_to_one_recording() {
    let _serial = serial();
    let single = single_file_calls();
    assert_eq!(single, expected_calls());

    let d = dir("size");
    let config = Config::new(d.join("trace.bin"))
        .chunk_size(4096)
        .rotate(Rotation::Size(64 << 10));
    let summary = record(config);
    let files = series_files(&d);
    assert!(files.len() >= 3, "only {} files: {files:?}", files.len());
    assert_eq!(summary.files, files.len() as u64);
    assert_eq!(summary.path, d.join("trace.bin"));
    // Each worker once, not once a file it moved to.
    assert_eq!(summary.threads, THREADS);
    let per_file: Vec<_> = files.iter().map(|f| calls_of(f)).collect();
    // Each file after the first continues the frames open at its start.
    let decoded = common::decode(&files[1]);
    let continued = decoded
        .chunks
        .values()
        .flatten()
        .filter(|c| c.continued)
        .count();
    assert!(
        continued > 0,
        "no thread continued into {}",
        files[1].display()
    );
    assert_eq!(sum(per_file), single, "summed over {} files", files.len());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn rotation_by_age_keeps_the_newest_files() {
    let _serial = serial();
    let d = dir("age");
    let config = Config::new(d.join("trace.bin"))
        .rotate(Rotation::Every(Duration::from_millis(40)))
        .keep(2);
    let summary = record(config);
    let files = series_files(&d);
    assert!(summary.files >= 3, "only {} files made", summary.files);
    // The newest two are left: trace.(N-2).bin and trace.(N-1).bin.
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let n = summary.files;
    assert_eq!(
        names,
        [
            format!("trace.{}.bin", n - 2),
            format!("trace.{}.bin", n - 1)
        ]
    );
    // Each kept file analyzes without repairs (`calls_of`), and together
    // they saw the workload's requests. Not each one: the newest may have
    // been opened just before the finish, and a workload descheduled for
    // a rotation's age leaves a file with no call (busy machines do).
    let calls: u64 = files
        .iter()
        .map(|f| calls_of(f).values().sum::<u64>())
        .sum();
    assert!(calls > 0, "no call in the kept files {files:?}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn rotation_by_age_adds_up_to_the_workload() {
    let _serial = serial();
    let d = dir("age-all");
    let config =
        Config::new(d.join("trace.bin")).rotate(Rotation::Every(Duration::from_millis(30)));
    let summary = record(config);
    let files = series_files(&d);
    assert_eq!(summary.files, files.len() as u64);
    assert!(files.len() >= 3, "only {} files: {files:?}", files.len());
    let per_file: Vec<_> = files.iter().map(|f| calls_of(f)).collect();
    assert_eq!(sum(per_file), expected_calls());
    // A task suspended across a switch is named and continued in the
    // next file with the frames it had open (`task_body`).
    let continued: usize = files[1..]
        .iter()
        .map(|f| common::decode(f).continued_stacks.len())
        .sum();
    assert!(continued > 0, "no continued-stack record in {files:?}");
    // A worker has one trace id in every file (the series' id).
    let mut ids: BTreeMap<String, u64> = BTreeMap::new();
    for f in &files {
        for (tid, (_, name)) in common::decode(f).threads {
            let first = *ids.entry(name.clone()).or_insert(tid);
            assert_eq!(tid, first, "{name} in {}", f.display());
        }
    }
    let workers = ids.keys().filter(|n| n.starts_with("worker-")).count();
    assert_eq!(workers as u64, THREADS, "{ids:?}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_series_counts_each_thread_once() {
    let _serial = serial();
    let d = dir("threads");
    let config =
        Config::new(d.join("trace.bin")).rotate(Rotation::Every(Duration::from_millis(20)));
    let recording = mtrace::start(config).expect("start");
    let f = mtrace::register_function("work", file!(), 1, module_path!());
    // A thread that records in the first file only, then ends.
    std::thread::spawn(move || {
        mtrace::enter(f);
        mtrace::exit(f);
    })
    .join()
    .expect("thread");
    // This one records in every file.
    for _ in 0..8 {
        mtrace::enter(f);
        std::thread::sleep(Duration::from_millis(15));
        mtrace::exit(f);
    }
    let summary = recording.finish().expect("finish");
    assert!(summary.files >= 3, "only {} files", summary.files);
    assert_eq!(summary.threads, 2);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_series_stays_beside_its_first_file_when_the_program_changes_directory() {
    let _serial = serial();
    let d = dir("cwd");
    let elsewhere = dir("cwd-elsewhere");
    let before = std::env::current_dir().expect("cwd");
    std::env::set_current_dir(&d).expect("cd");
    let config = Config::new("trace.bin")
        .rotate(Rotation::Every(Duration::from_millis(20)))
        .keep(3);
    let recording = mtrace::start(config).expect("start");
    // As a test runner does, into a scratch directory.
    std::env::set_current_dir(&elsewhere).expect("cd");
    let f = mtrace::register_function("work", file!(), 1, module_path!());
    for _ in 0..8 {
        mtrace::enter(f);
        std::thread::sleep(Duration::from_millis(15));
        mtrace::exit(f);
    }
    let summary = recording.finish();
    std::env::set_current_dir(&before).expect("cd back");
    let summary = summary.expect("finish");
    assert_eq!(summary.path, Path::new("trace.bin"));
    assert!(summary.files > 3, "only {} files", summary.files);
    // The newest three, beside the first file; none where the program went.
    let files = series_files(&d);
    assert_eq!(files.len(), 3, "{files:?}");
    assert_eq!(files[2], d.join(format!("trace.{}.bin", summary.files - 1)));
    let strays: Vec<_> = std::fs::read_dir(&elsewhere).expect("read dir").collect();
    assert!(strays.is_empty(), "{strays:?}");
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&elsewhere);
}

/// Mappings of this process.
#[cfg(target_os = "linux")]
/// Mappings of the files in `dir` (the series' files, deleted or not):
/// counted by path, as the test's other threads map and unmap too.
fn mappings_of(dir: &Path) -> usize {
    let dir = dir.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/maps")
        .expect("/proc/self/maps")
        .lines()
        .filter(|line| line.contains(dir.as_str()))
        .count()
}

/// A server that rotates for months writes tens of thousands of files:
/// each finished file's range must be given back, or the process reaches
/// the system's limit of mappings (65530 by default) and every `mmap`
/// fails. Only the file a thread still holds (an idle thread's) is kept.
#[cfg(target_os = "linux")]
#[test]
fn a_long_series_gives_back_the_ranges_of_its_finished_files() {
    let _serial = serial();
    let d = dir("ranges");
    let config = Config::new(d.join("trace.bin"))
        .rotate(Rotation::Every(Duration::from_millis(4)))
        .keep(2);
    let recording = mtrace::start(config).expect("start");
    let f = mtrace::register_function("work", file!(), 1, module_path!());
    // Records in the first file, then idles through the others.
    let (wake, woken) = std::sync::mpsc::channel::<()>();
    let idle = std::thread::spawn(move || {
        mtrace::enter(f);
        mtrace::exit(f);
        woken.recv().expect("wake");
        mtrace::enter(f);
        mtrace::exit(f);
    });
    std::thread::sleep(Duration::from_millis(10));
    let before = mappings_of(&d);
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(400) {
        for _ in 0..100 {
            mtrace::enter(f);
            mtrace::exit(f);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let during = mappings_of(&d);
    wake.send(()).expect("wake");
    idle.join().expect("idle thread");
    let summary = recording.finish().expect("finish");
    assert!(summary.files >= 20, "only {} files", summary.files);
    // Before, one more mapping for each file finished. Now: the first
    // file (the idle thread is bound to it), the current one, and a file
    // or two not yet given back when counted (a file is given back once
    // no thread is bound to it).
    assert!(
        during <= before + 4,
        "{before} mappings of the series with the first file, {during} after {} files",
        summary.files
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Threads that start, record (events, marks, names) and exit while the
/// files rotate every millisecond and the recording pauses now and then:
/// files are given back while threads come and go, and none of them
/// writes into a range that is gone (that would crash this test), and
/// every file kept analyzes.
#[test]
fn threads_come_and_go_while_files_rotate_every_millisecond() {
    let _serial = serial();
    let d = dir("churn");
    let config = Config::new(d.join("trace.bin"))
        .rotate(Rotation::Every(Duration::from_millis(1)))
        .keep(4);
    let recording = mtrace::start(config).expect("start");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spawners: Vec<_> = (0..3)
        .map(|s| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut round = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    round += 1;
                    let short = std::thread::spawn(move || {
                        let f = mtrace::register_function(
                            &format!("f{}", round % 50),
                            file!(),
                            s,
                            module_path!(),
                        );
                        let mut task = LogicalStack::new(format!("task-{s}-{round}"));
                        for _ in 0..200 {
                            mtrace::enter(f);
                            {
                                let _on = task.enter();
                                mtrace::enter(f);
                                mtrace::exit(f);
                            }
                            mtrace::exit(f);
                        }
                        mtrace::mark("round");
                    });
                    short.join().expect("short thread");
                }
            })
        })
        .collect();
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(20));
        mtrace::pause();
        std::thread::sleep(Duration::from_millis(2));
        mtrace::resume();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in spawners {
        s.join().expect("spawner");
    }
    let summary = recording.finish().expect("finish");
    assert!(summary.files >= 20, "only {} files", summary.files);
    for f in series_files(&d) {
        let loaded = mtanalyze::load(&f).expect("load");
        mtanalyze::analyze(&loaded, &AnalyzeOptions::default()).expect("analyze");
    }
    let _ = std::fs::remove_dir_all(&d);
}
