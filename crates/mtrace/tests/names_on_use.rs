//! `Config::names_on_use`: a recording names the functions the
//! instrumentation asks it to (`mtrace::name_function`), once each, not
//! every function the process registered; a function registered while it
//! runs is named at once; a rotating recording refuses it.

mod common;

use common::{decode_bytes, serial};
use mtrace::{Config, ConfigError, Rotation, StartError};

fn named(d: &common::Decoded, f: mtrace::FunctionId) -> bool {
    d.functions.contains_key(&f.0)
}

#[test]
fn a_recording_names_only_the_functions_it_is_asked_to_once_each() {
    let _serial = serial();
    let used = mtrace::register_function("used-on-use", file!(), line!(), "");
    let unused = mtrace::register_function("unused-on-use", file!(), line!(), "");
    let config = Config::new("names-on-use")
        .in_memory(true)
        .names_on_use(true);
    let recording = mtrace::start(config).expect("start");
    // Asked for twice (two threads, or two code objects of one function):
    // named once (the decoder refuses a function named twice).
    mtrace::name_function(used);
    mtrace::name_function(used);
    mtrace::enter(used);
    mtrace::exit(used);
    let during = mtrace::register_function("registered-during", file!(), line!(), "");
    mtrace::name_function(during);
    let view = recording.memory_view().expect("view");
    recording.finish().expect("finish");
    let d = decode_bytes(view.bytes());
    assert!(named(&d, used));
    assert!(named(&d, during), "registered while it ran: named at once");
    assert!(!named(&d, unused), "never asked for: not named");

    // The next recording of the kind starts with none again.
    let config = Config::new("names-on-use")
        .in_memory(true)
        .names_on_use(true);
    let recording = mtrace::start(config).expect("start");
    mtrace::name_function(unused);
    let view = recording.memory_view().expect("view");
    recording.finish().expect("finish");
    let d = decode_bytes(view.bytes());
    assert!(named(&d, unused));
    assert!(!named(&d, used) && !named(&d, during));

    // Without the option, every registered function is named, and
    // `name_function` adds nothing.
    let recording = mtrace::start(Config::new("all-names").in_memory(true)).expect("start");
    mtrace::name_function(used);
    let view = recording.memory_view().expect("view");
    recording.finish().expect("finish");
    let d = decode_bytes(view.bytes());
    assert!(named(&d, used) && named(&d, unused) && named(&d, during));
}

#[test]
fn a_rotating_recording_cannot_name_on_use() {
    let _serial = serial();
    let config = Config::new("rotating-names")
        .names_on_use(true)
        .rotate(Rotation::Size(64 << 20));
    let started = mtrace::start(config);
    assert!(
        matches!(
            started,
            Err(StartError::Config(ConfigError::NamesOnUseRotating))
        ),
        "{started:?}"
    );
}
