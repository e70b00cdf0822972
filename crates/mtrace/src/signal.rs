//! Toggling the running recording from outside: `kill -USR2 PID` with
//! `MTRACE_SIGNAL=SIGUSR2` (or [`Config::signal`](crate::Config::signal)).
//!
//! The handler does only what a signal handler may: it adds one to an
//! atomic count and writes a byte into a pipe (both async-signal-safe).
//! A thread of the recorder, blocked on the pipe, wakes and toggles the
//! running recording once per signal counted (a pause or a resume takes
//! the control lock and writes a mark, which a handler must not do).

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::shared::lock;

/// Signals received and not yet acted on.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// The pipe's write end (-1 until the toggling thread runs).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// The process whose toggling thread reads the pipe, and the signals
/// whose handler is installed. A child made by `fork` inherits the handler
/// and the pipe but not the thread: its first `install` makes its own.
static INSTALLED: Mutex<(u32, Vec<i32>)> = Mutex::new((0, Vec::new()));

extern "C" fn on_signal(_: libc::c_int) {
    PENDING.fetch_add(1, Ordering::Relaxed);
    let fd = WAKE_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write is async-signal-safe; a full pipe (EAGAIN) already
        // holds a wake-up, and the count says how many signals came.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Makes `signal` run `toggle` (the recording's pause-or-resume, passed in
/// so this module does not import the one that calls it): starts the
/// toggling thread (once per process) and installs the handler (once per
/// signal). Best effort: an error leaves the recording without the signal.
pub(crate) fn install(signal: i32, toggle: fn()) -> std::io::Result<()> {
    let mut installed = lock(&INSTALLED);
    let pid = std::process::id();
    let (owner, signals) = &mut *installed;
    if *owner == pid && signals.contains(&signal) {
        return Ok(());
    }
    if *owner != pid {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Out of the program's way, as the trace file's descriptor.
        let read_fd = crate::fds::move_fd_out_of_the_way(fds[0]);
        let write_fd = crate::fds::move_fd_out_of_the_way(fds[1]);
        std::thread::Builder::new()
            .name("mtrace-signal".into())
            .spawn(move || toggle_on_wake(read_fd, toggle))?;
        // The parent's write end (if any) stays open in this process:
        // closing it here would not reach the parent's, and it is one fd.
        WAKE_FD.store(write_fd, Ordering::Relaxed);
        *owner = pid;
        signals.clear();
    }
    // SAFETY: a zeroed sigaction with our handler, an empty mask and
    // SA_RESTART (interrupted system calls of the program restart).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    signals.push(signal);
    Ok(())
}

/// The toggling thread: waits on the pipe, then runs `toggle` once per
/// pending signal.
fn toggle_on_wake(read_fd: i32, toggle: fn()) {
    loop {
        let mut poll = libc::pollfd {
            fd: read_fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut poll, 1, -1) } < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let mut buf = [0u8; 64];
        // SAFETY: reading into a buffer of that size (non-blocking).
        while unsafe { libc::read(read_fd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
        for _ in 0..PENDING.swap(0, Ordering::Relaxed) {
            toggle();
        }
    }
}
