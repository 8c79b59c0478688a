//! The SMC generic netlink family's replies (system info, statistics, fallback statistics, link
//! groups, links, devices, SEID, UEIDs) and the PNET table: Ok or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smcrun_kernel::{pnet, smc_genl};

fuzz_target!(|data: &[u8]| {
    let _ = smc_genl::parse_sys_info(data);
    let _ = smc_genl::parse_stats(data);
    let _ = smc_genl::parse_fallback_stats(data);
    let _ = smc_genl::parse_link_groups(data);
    let _ = smc_genl::parse_devices(data);
    let _ = smc_genl::parse_devices_smcd(data);
    let _ = smc_genl::parse_link_groups_smcd(data);
    let _ = smc_genl::parse_seid(data);
    let _ = smc_genl::parse_ueids(data);
    let _ = pnet::parse(data);
});
