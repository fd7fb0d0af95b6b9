//! The host process's resident memory, as Linux reports it in `/proc/self/status`: its peak (`VmHWM`,
//! reset by writing `5` to `/proc/self/clear_refs`, proc(5)), which `run` and `bench build` print,
//! and its current figure (`VmRSS`). Elsewhere, or where `/proc` cannot be read, there is no figure:
//! callers print none rather than a guess. [`release_freed`] gives freed heap pages back, with glibc
//! only and only once the process holds 512 MiB.

/// The most bytes this process has held resident since it started or since [`reset_peak`].
pub fn peak_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// The bytes this process holds resident now.
pub fn resident_bytes() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// A figure of `/proc/self/status` given in kB (`VmHWM:  1234 kB`), in bytes.
fn status_bytes(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line
        .trim_start_matches(key)
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// Starts the peak over from what is resident now; false where the system does not allow it.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Hands the pages of freed heap blocks back to the system (glibc's `malloc_trim`) once the process
/// holds [`RELEASE_ABOVE`] or more. glibc keeps a freed block under its mapping threshold (which it
/// raises, up to 32 MiB, as large blocks are freed) in its heap, resident; so pages an earlier phase
/// of a build freed would stay resident under the later ones, and a device run would keep the code
/// images it moved into tile memory. Below the mark it does nothing, since giving pages back and
/// faulting them in again costs a small build more than it saves. Elsewhere than glibc it does
/// nothing.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if resident_bytes().is_some_and(|b| b >= RELEASE_ABOVE) {
        // SAFETY: a documented glibc call taking no pointers; it takes the allocator's own locks.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

/// The resident bytes above which [`release_freed`] gives freed pages back: 512 MiB.
pub const RELEASE_ABOVE: u64 = 512 << 20;

/// Bytes as mebibytes, to one decimal: the figure `run` and `bench build` print.
pub fn mebibytes(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / f64::from(1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Holding 64 MiB more raises the peak by at least that much; a reset brings it back below.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_peak_follows_what_the_process_holds() {
        let before = peak_bytes().expect("Linux reports VmHWM");
        let held = vec![1u8; 64 << 20];
        let during = peak_bytes().expect("read once already");
        assert!(during >= before.max(64 << 20), "{before} {during}");
        assert!(held.iter().all(|&b| b == 1));
        drop(held);
        assert!(reset_peak(), "Linux resets the peak");
        let after = peak_bytes().expect("read once already");
        assert!(after + (32 << 20) < during, "{after} {during}");
    }
}
