//! The recorder's own descriptors, moved out of the program's way: to
//! [`FIRST_OWN_FD`] or above and closed on `exec`, so that the program's
//! files get the numbers they would get without mtrace, and a program
//! that lists its few descriptors (or a child's) does not see them.

use std::fs::File;
use std::io;

/// The lowest descriptor number the recorder's own descriptors move to.
/// The kernel hands out the lowest free number, so a descriptor the
/// recorder holds at 3 would make each of the program's files one number
/// higher than without mtrace, and show among the few descriptors a
/// program (or a test of `close_fds`/`pass_fds`) lists in a child.
pub(crate) const FIRST_OWN_FD: libc::c_int = 512;

/// `fd` moved to the first free number from [`FIRST_OWN_FD`] on
/// (close-on-exec), leaving its low number free; `fd` itself where the
/// descriptor limit is too low for that or the move fails (nothing breaks:
/// the program only sees one more low descriptor).
pub(crate) fn move_fd_out_of_the_way(fd: libc::c_int) -> libc::c_int {
    if fd_limit().is_none_or(|limit| limit < 2 * FIRST_OWN_FD as libc::rlim_t) || fd >= FIRST_OWN_FD
    {
        return fd;
    }
    // SAFETY: duplicates a descriptor this process owns.
    let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, FIRST_OWN_FD) };
    if moved < 0 {
        return fd;
    }
    // SAFETY: `fd` is ours and, duplicated, no longer needed.
    unsafe { libc::close(fd) };
    moved
}

/// A descriptor of `file`'s own, at [`FIRST_OWN_FD`] or above where
/// [`move_fd_out_of_the_way`] would move it (one call rather than a
/// duplicate at a low number moved again).
pub(crate) fn clone_out_of_the_way(file: &File) -> io::Result<File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    if fd_limit().is_some_and(|limit| limit >= 2 * FIRST_OWN_FD as libc::rlim_t) {
        // SAFETY: duplicates a descriptor this process owns.
        let fd = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, FIRST_OWN_FD) };
        if fd >= 0 {
            // SAFETY: `fd` was just made and is owned by nobody else.
            return Ok(unsafe { File::from_raw_fd(fd) });
        }
    }
    file.try_clone().map(out_of_the_way)
}

/// The descriptor limit (`RLIMIT_NOFILE`'s soft limit), if known.
fn fd_limit() -> Option<libc::rlim_t> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit to fill.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit.rlim_cur)
}

/// [`move_fd_out_of_the_way`] for a file.
pub(crate) fn out_of_the_way(file: File) -> File {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let fd = move_fd_out_of_the_way(file.into_raw_fd());
    // SAFETY: `fd` is an open descriptor of the file, owned by nobody else.
    unsafe { File::from_raw_fd(fd) }
}
