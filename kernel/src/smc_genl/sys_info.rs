//! `GET_SYS_INFO`: the SMC version and capabilities of this kernel, its host name and system EID.

use serde::Serialize;

use super::nests;
use crate::abi::smc::*;
use crate::error::Error;

/// `GET_SYS_INFO` reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SysInfo {
    /// SMC protocol version.
    pub version: u8,
    /// SMC release.
    pub release: u8,
    /// ISMv2 capable.
    pub ism_v2: bool,
    /// SMC-Rv2 capable (absent on old kernels: false).
    pub smcr_v2: bool,
    /// Host name sent in CLC messages.
    pub local_host: String,
    /// System EID.
    pub seid: String,
}

/// Parse a raw `GET_SYS_INFO` reply.
pub fn parse_sys_info(raw: &[u8]) -> Result<SysInfo, Error> {
    let what = "SMC GET_SYS_INFO reply";
    let mut info = None;
    for (_, attrs) in nests(raw, SMC_GEN_SYS_INFO, what)? {
        let mut s = SysInfo::default();
        for a in attrs {
            match a.kind {
                SMC_NLA_SYS_VER => s.version = a.u8(what)?,
                SMC_NLA_SYS_REL => s.release = a.u8(what)?,
                SMC_NLA_SYS_IS_ISM_V2 => s.ism_v2 = a.u8(what)? != 0,
                SMC_NLA_SYS_LOCAL_HOST => s.local_host = a.string().trim_end().to_string(),
                SMC_NLA_SYS_SEID => s.seid = a.string().trim_end().to_string(),
                SMC_NLA_SYS_IS_SMCR_V2 => s.smcr_v2 = a.u8(what)? != 0,
                _ => {}
            }
        }
        info = Some(s);
    }
    info.ok_or_else(|| Error::malformed(what, "no SMC_GEN_SYS_INFO attribute"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Writer;
    use crate::smc_genl::cmd;
    use crate::smc_genl::test_reply::{nest, reply};

    #[test]
    fn sys_info() {
        let si = Writer::new()
            .u8(SMC_NLA_SYS_VER, 2)
            .u8(SMC_NLA_SYS_REL, 1)
            .u8(SMC_NLA_SYS_IS_ISM_V2, 0)
            .string(SMC_NLA_SYS_LOCAL_HOST, "vm1     ")
            .string(SMC_NLA_SYS_SEID, "")
            .u8(SMC_NLA_SYS_IS_SMCR_V2, 1);
        let raw = reply(cmd::GET_SYS_INFO, &[nest(SMC_GEN_SYS_INFO, si).finish()]);
        let s = parse_sys_info(&raw).unwrap();
        assert_eq!(
            (s.version, s.release, s.ism_v2, s.smcr_v2),
            (2, 1, false, true)
        );
        assert_eq!(s.local_host, "vm1");
    }
}
