//! What the recorder asks the system about its own process, asked once:
//! the process id (asked again after a fork), the host name, the command
//! line and each thread's id. A profile per request starts and stops a recording per
//! request; each of these was a system call per recording, and on a
//! virtual machine a system call costs more than its own instructions
//! (the caches and TLB it disturbs).
//!
//! A fork is noticed by a `pthread_atfork` child handler of this
//! module's own ([`watch_forks`]), registered before an id is first
//! remembered, so no child can inherit its parent's. (Its own, not the
//! recorder's in `shared.rs`: this module sits below every other and
//! imports none of them.)

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Once, OnceLock};

/// The process id, 0 until asked and again after a fork.
static PID: AtomicU32 = AtomicU32::new(0);
/// Forks this process's line has been through ([`forks`]).
static FORKS: AtomicU64 = AtomicU64::new(0);

/// How many forks this process's line has been through, counted in each
/// child by the fork handler: what a thread remembered under another
/// count is its parent's (its id; a chunk of the parent's recording,
/// mapped shared with the parent, which it must drop without writing to
/// it). Counted once [`watch_forks`] has run.
pub(crate) fn forks() -> u64 {
    FORKS.load(Ordering::Relaxed)
}

/// Registers [`forked`] once a process: before any id is remembered here,
/// and before the recorder's first recording (`shared::watch_forks`).
pub(crate) fn watch_forks() {
    static AT_FORK: Once = Once::new();
    AT_FORK.call_once(|| {
        // SAFETY: registering a plain extern "C" function.
        unsafe { libc::pthread_atfork(None, None, Some(forked as unsafe extern "C" fn())) };
    });
}

/// In a forked child: the ids are the child's own, asked again.
extern "C" fn forked() {
    PID.store(0, Ordering::Relaxed);
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// This process's id.
pub(crate) fn pid() -> u32 {
    match PID.load(Ordering::Relaxed) {
        0 => {
            watch_forks();
            let pid = std::process::id();
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// This machine's host name as the process first saw it ("" if the
/// system does not say): a trace says where it was recorded.
pub(crate) fn host_name() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc != 0 {
            return String::new();
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    })
}

/// The process's command line, its arguments joined by NULs, as the
/// trace's header holds it (the arguments the process started with).
pub(crate) fn command_line() -> &'static str {
    static LINE: OnceLock<String> = OnceLock::new();
    LINE.get_or_init(|| {
        std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("\0")
    })
}

thread_local! {
    /// The calling thread's id and the fork epoch it was asked in: a
    /// forked child's thread has a new id.
    static THREAD_ID: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

/// The calling thread's id in the operating system (0 where there is none
/// to give).
pub(crate) fn thread_id() -> u64 {
    let epoch = forks();
    THREAD_ID.with(|cached| match cached.get() {
        Some((asked_in, tid)) if asked_in == epoch => tid,
        _ => {
            watch_forks();
            let tid = ask_thread_id();
            cached.set(Some((epoch, tid)));
            tid
        }
    })
}

fn ask_thread_id() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no arguments and cannot fail.
        (unsafe { libc::syscall(libc::SYS_gettid) }) as u64
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ids_are_the_system_s() {
        assert_eq!(pid(), std::process::id());
        assert_eq!(pid(), std::process::id(), "remembered");
        let here = thread_id();
        assert_eq!(thread_id(), here);
        #[cfg(target_os = "linux")]
        {
            assert_eq!(here, ask_thread_id());
            let there = std::thread::spawn(thread_id).join().expect("the thread");
            assert_ne!(here, there, "each thread its own");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_forked_child_has_ids_of_its_own() {
        let (parent, parent_thread) = (pid(), thread_id());
        // SAFETY: the child calls only getpid/gettid (through the caches,
        // which the fork handler cleared) and _exit.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork");
        if child == 0 {
            let own = pid() == unsafe { libc::getpid() } as u32
                && pid() != parent
                && thread_id() != parent_thread
                && thread_id() == ask_thread_id();
            // SAFETY: leaves the child without running the test harness's exit.
            unsafe { libc::_exit(if own { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just made.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(libc::WIFEXITED(status), "the child exited");
        assert_eq!(libc::WEXITSTATUS(status), 0, "the child's ids were its own");
        assert_eq!(pid(), parent);
    }
}
