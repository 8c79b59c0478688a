//! One error type for every kernel conversation, shaped around what an operator does next:
//! load a module, get a capability, or report a kernel/ABI surprise.

use std::fmt;
use std::io;

use crate::features::{self, Feature};
use crate::kmod::{self, Availability};

/// Why a request to the kernel did not produce a usable answer.
#[derive(Debug)]
pub enum Error {
    /// The kernel has no such interface right now: the module providing it is not loaded, or
    /// not built, or the kernel cannot load modules at all; `availability` says which, so the
    /// message only says `modprobe` where that works.
    ModuleMissing {
        /// The request that found nothing to talk to.
        what: String,
        /// The kernel module that provides the interface.
        module: &'static str,
        /// What the running kernel can do about that module.
        availability: Availability,
    },
    /// The running kernel is older than the Linux version that added the interface: no module or
    /// setting can give it; the message names what is missing and the version that has it.
    KernelLacks {
        /// The missing interface and the version that added it.
        feature: Feature,
        /// The running kernel's release (`uname -r`).
        release: String,
    },
    /// The kernel refused with EPERM/EACCES: the operation needs CAP_NET_ADMIN.
    NotPermitted {
        /// The refused request.
        what: String,
    },
    /// The kernel answered with an error number the caller may want to interpret
    /// (EEXIST, ENOENT, ENODEV, ...).
    Kernel {
        /// The refused request.
        what: String,
        /// Positive errno value.
        errno: i32,
    },
    /// Talking to the netlink socket failed (timeout, short send, ...).
    Io {
        /// The request in progress.
        what: String,
        /// The underlying failure.
        source: io::Error,
    },
    /// A value was rejected before anything was sent (e.g. an invalid UEID or PNET ID); the text
    /// names the value and what is expected.
    InvalidInput(String),
    /// The kernel's reply did not have the shape the ABI promises.
    Malformed {
        /// Where in the reply the problem is.
        what: String,
        /// What was wrong.
        detail: String,
    },
}

impl Error {
    /// Build the error for a kernel errno, folding EPERM/EACCES into [`Error::NotPermitted`].
    pub fn from_errno(what: impl Into<String>, errno: i32) -> Error {
        let what = what.into();
        if errno == libc::EPERM || errno == libc::EACCES {
            Error::NotPermitted { what }
        } else {
            Error::Kernel { what, errno }
        }
    }

    /// The interface of `module` is missing: the error carries what this kernel can do about
    /// that module ([`kmod::availability`]).
    pub fn module_missing(what: impl Into<String>, module: &'static str) -> Error {
        Error::ModuleMissing {
            what: what.into(),
            module,
            availability: kmod::availability(module),
        }
    }

    /// `self` as [`Error::KernelLacks`] when the running kernel is older than `feature`'s version
    /// (whatever the kernel answered: a missing family, EOPNOTSUPP, ...); else `self`.
    pub fn unless_older_than(self, feature: Feature) -> Error {
        self.unless_older_in(feature, &features::kernel_release())
    }

    /// [`Error::unless_older_than`] for a kernel of `release`.
    pub fn unless_older_in(self, feature: Feature, release: &str) -> Error {
        match self {
            Error::InvalidInput(_) | Error::Malformed { .. } | Error::NotPermitted { .. } => self,
            _ if feature.missing_in(release) == Some(true) => Error::KernelLacks {
                feature,
                release: release.to_string(),
            },
            other => other,
        }
    }

    /// True for [`Error::KernelLacks`].
    pub fn is_kernel_lacking(&self) -> bool {
        matches!(self, Error::KernelLacks { .. })
    }

    /// True when the interface is not there (a missing module, or a kernel too old for it):
    /// nothing to report as a failure of the kernel, only as an absence.
    pub fn is_absent(&self) -> bool {
        self.is_module_missing() || self.is_kernel_lacking()
    }

    /// A malformed-reply error at `what`.
    pub fn malformed(what: impl Into<String>, detail: impl Into<String>) -> Error {
        Error::Malformed {
            what: what.into(),
            detail: detail.into(),
        }
    }

    /// The kernel errno behind this error, if it came from the kernel.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Kernel { errno, .. } => Some(*errno),
            Error::NotPermitted { .. } => Some(libc::EPERM),
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// Reinterpret a kernel `errno` as "module not loaded" for interfaces whose absence the
    /// kernel reports that way (ENOENT for a missing genl family or sock_diag handler).
    pub fn missing_on(self, errno: i32, module: &'static str) -> Error {
        match self {
            Error::Kernel { what, errno: e } if e == errno => Error::module_missing(what, module),
            other => other,
        }
    }

    /// True for [`Error::ModuleMissing`].
    pub fn is_module_missing(&self) -> bool {
        matches!(self, Error::ModuleMissing { .. })
    }

    /// True for [`Error::NotPermitted`].
    pub fn is_not_permitted(&self) -> bool {
        matches!(self, Error::NotPermitted { .. })
    }
}

/// The C library's text for an errno without Rust's "(os error N)" suffix, e.g. "File exists".
pub fn strerror(errno: i32) -> String {
    let text = io::Error::from_raw_os_error(errno).to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ModuleMissing {
                what,
                module,
                availability,
            } => write!(f, "{what}: {}", availability.advice(module)),
            Error::KernelLacks { feature, release } => f.write_str(&feature.lacking(release)),
            Error::NotPermitted { what } => write!(
                f,
                "{what}: not permitted; this needs CAP_NET_ADMIN (run as root)"
            ),
            Error::Kernel { what, errno } => {
                write!(f, "{what}: the kernel refused: {}", strerror(*errno))
            }
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::InvalidInput(text) => f.write_str(text),
            Error::Malformed { what, detail } => {
                write!(f, "{what}: malformed kernel reply: {detail}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eperm_and_eacces_become_not_permitted() {
        assert!(Error::from_errno("x", libc::EPERM).is_not_permitted());
        assert!(Error::from_errno("x", libc::EACCES).is_not_permitted());
        assert_eq!(
            Error::from_errno("x", libc::EEXIST).errno(),
            Some(libc::EEXIST)
        );
    }

    #[test]
    fn missing_on_only_maps_the_named_errno() {
        let e = Error::from_errno("dump", libc::ENOENT).missing_on(libc::ENOENT, "smc_diag");
        assert!(e.is_module_missing());
        // The sentence is the availability's, whatever this machine's kernel can do.
        let Error::ModuleMissing { availability, .. } = &e else {
            unreachable!()
        };
        assert_eq!(
            e.to_string(),
            format!("dump: {}", availability.advice("smc_diag"))
        );
        let e = Error::from_errno("dump", libc::EINVAL).missing_on(libc::ENOENT, "smc_diag");
        assert!(!e.is_module_missing());
    }

    #[test]
    fn kernel_error_text_is_the_plain_strerror() {
        assert_eq!(strerror(libc::EEXIST), "File exists");
        let e = Error::from_errno("ADD_UEID", libc::EEXIST);
        assert_eq!(e.to_string(), "ADD_UEID: the kernel refused: File exists");
    }

    #[test]
    fn an_older_kernel_lacks_what_a_later_one_added() {
        let missing = Error::from_errno("resolving SMC_GEN_NETLINK", libc::ENOENT)
            .unless_older_in(features::SMC_GENL, "5.10.0-46-amd64");
        assert!(missing.is_kernel_lacking() && missing.is_absent());
        assert_eq!(
            missing.to_string(),
            "this kernel (Linux 5.10.0-46-amd64) has no SMC generic netlink family \
             (SMC_GEN_NETLINK: system info, link groups, devices); Linux 5.11 added it"
        );
        // On a kernel new enough the kernel's own answer stands.
        let e = Error::from_errno("GET_STATS", libc::EOPNOTSUPP)
            .unless_older_in(features::SMC_STATS, "6.1.0-57-amd64");
        assert_eq!(e.errno(), Some(libc::EOPNOTSUPP));
        // A refusal for want of a capability is never blamed on the version.
        let e = Error::from_errno("ADD_UEID", libc::EPERM)
            .unless_older_in(features::SMC_EID, "5.10.0-46-amd64");
        assert!(e.is_not_permitted());
    }

    #[test]
    fn not_permitted_names_the_capability() {
        let e = Error::from_errno("ADD_UEID", libc::EPERM);
        assert!(e.to_string().contains("CAP_NET_ADMIN"), "{e}");
    }
}
