//! `#[mtrace::profile]` on functions, methods, recursion, early returns,
//! panics and async fns; and `scope!`.

mod common;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use common::{decode, serial, steps, Step, TempTrace};
use mtrace::Config;

#[mtrace::profile]
fn fib(n: u32) -> u32 {
    if n < 2 {
        n
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

#[mtrace::profile]
fn is_even(n: u32) -> bool {
    if n == 0 {
        true
    } else {
        is_odd(n - 1)
    }
}

#[mtrace::profile]
fn is_odd(n: u32) -> bool {
    if n == 0 {
        false
    } else {
        is_even(n - 1)
    }
}

struct Counter {
    n: u32,
}

impl Counter {
    #[mtrace::profile]
    fn bump(&mut self) -> u32 {
        self.n += 1;
        self.n
    }
}

#[mtrace::profile(name = "renamed")]
fn original() {}

#[mtrace::profile]
fn early_return(x: i32) -> Result<i32, String> {
    if x < 0 {
        return Err("negative".into());
    }
    let y: i32 = "5".parse().map_err(|_| "bad".to_string())?;
    Ok(x + y)
}

#[mtrace::profile]
fn panics() {
    panic!("expected");
}

#[mtrace::profile]
async fn double(x: u32) -> u32 {
    x * 2
}

fn block_on<F: Future>(f: F) -> F::Output {
    fn clone(_: *const ()) -> RawWaker {
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable functions ignore the data pointer.
    let waker = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) {
            return v;
        }
    }
}

#[test]
fn attribute_records_every_kind_of_function() {
    let _serial = serial();
    let trace = TempTrace::new("profile-attr");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(4096)).unwrap();
    std::thread::Builder::new()
        .name("attr".into())
        .spawn(|| {
            assert_eq!(fib(3), 2);
            assert!(is_even(2));
            assert_eq!(Counter { n: 0 }.bump(), 1);
            original();
            assert_eq!(early_return(-1), Err("negative".into()));
            assert_eq!(early_return(1), Ok(6));
            assert!(std::panic::catch_unwind(panics).is_err());
            assert_eq!(block_on(double(21)), 42);
            let _outer = mtrace::scope!("a scope");
        })
        .unwrap()
        .join()
        .unwrap();
    recording.finish().unwrap();

    let d = decode(trace.path());
    let got = steps(&d, &d.events(d.tid("attr")));
    let e = |n: &str| Step::Enter(n.into());
    let x = |n: &str| Step::Exit(n.into());
    #[rustfmt::skip]
    let expected = [
        Step::Start,
        // fib(3) = fib(2) + fib(1); fib(2) = fib(1) + fib(0)
        e("fib"), e("fib"), e("fib"), x("fib"), e("fib"), x("fib"), x("fib"), e("fib"), x("fib"), x("fib"),
        e("is_even"), e("is_odd"), e("is_even"), x("is_even"), x("is_odd"), x("is_even"),
        e("bump"), x("bump"),
        e("renamed"), x("renamed"),
        e("early_return"), x("early_return"), e("early_return"), x("early_return"),
        e("panics"), x("panics"), // closed while unwinding
        e("double"), x("double"),
        e("a scope"), x("a scope"),
        Step::End,
    ];
    assert_eq!(got, expected);

    let fib_meta = d.function("fib");
    assert!(
        fib_meta.file.ends_with("profile_attr.rs"),
        "{}",
        fib_meta.file
    );
    assert_eq!(fib_meta.line, 14, "the line of `fn fib`");
    assert_eq!(fib_meta.module, "profile_attr");
    assert_eq!(d.function("bump").module, "profile_attr");
}
