//! Why a socket is TCP from the start, in the one byte the runtime's fd table keeps for it: the
//! runtime records it when the socket is made, and the classifier puts it into words.

/// Why a TCP socket is not an SMC socket, in one byte: the errno of the refused SMC `socket()`
/// (1 to 253), or one of the values below.
pub type Why = u8;
/// Accepted from a listener that was not made under smcrun (inherited, or socket activation).
pub const WHY_NOT_OURS: Why = 0;
/// On an fd beyond the runtime's fd table (`smcrun_runtime::fdtable::LIMIT`): TCP, the reason was
/// not recorded.
pub const WHY_UNRECORDED: Why = 254;
/// The policy keeps it on TCP.
pub const WHY_POLICY: Why = 255;

/// The errno of a refused SMC socket as a [`Why`].
pub fn why_errno(e: i32) -> Why {
    u8::try_from(e)
        .ok()
        .filter(|&e| (1..=253).contains(&e))
        .unwrap_or(WHY_UNRECORDED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_errno_fits_its_byte_or_is_unrecorded() {
        assert_eq!(why_errno(97), 97);
        assert_eq!(why_errno(0), WHY_UNRECORDED);
        assert_eq!(why_errno(4000), WHY_UNRECORDED);
    }
}
