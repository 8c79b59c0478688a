//! `smcrun linkgroup [-d]`, `smcrun link`, `smcrun device` and `smcrun info`: the link groups,
//! links and devices SMC uses, and what this kernel's SMC can do, in `smcr`'s columns (and
//! `smcd`'s where SMC-D has any), or as JSON with the stable keys of docs/src/reference/json.md.
//!
//! The kernel's SMC-R link group list is global; the views keep the groups of this network
//! namespace (by its cookie) as smc-tools does not.

use clap::Args;
use smcrun_kernel::smc_genl::{self, LinkGroup, LinkGroupSmcd, SmcGenl};
use smcrun_kernel::Error;
use smcrun_views::linkgroup::json::{DevicesView, InfoView, LinkGroupsView, LinksView};
use smcrun_views::linkgroup::text::{devices_text, groups_text, info_text, links_table};
use smcrun_views::linkgroup::Devices;
use smcrun_views::this_netns;

use crate::cmd::format;
use crate::status::{Failure, Outcome};

/// `smcrun linkgroup` arguments.
#[derive(Args, Debug)]
pub struct LinkGroupArgs {
    /// One block per link group with the peer, the EID, buffer memory and the links.
    #[arg(short = 'd', long = "details")]
    details: bool,
    /// Print JSON: {"link_groups": [...], "smcd_link_groups": [...]}.
    #[arg(short = 'j', long)]
    json: bool,
}

/// Arguments of `smcrun link`, `smcrun device` and `smcrun info`.
#[derive(Args, Debug)]
pub struct JsonArgs {
    /// Print JSON (stable snake_case keys: the manual's JSON keys page).
    #[arg(short = 'j', long)]
    pub json: bool,
}

fn open() -> Result<SmcGenl, Error> {
    SmcGenl::open()
}

/// Run `smcrun linkgroup`.
pub fn linkgroup(a: &LinkGroupArgs) -> Outcome {
    let read = || -> Result<(Vec<LinkGroup>, Vec<LinkGroupSmcd>), Error> {
        let c = open()?;
        Ok((
            this_netns::local_groups(c.link_groups()?, this_netns::cookie()),
            c.link_groups_smcd()?,
        ))
    };
    let (groups, smcd) = match read() {
        Ok(v) => v,
        Err(e) => return Err(Failure::refused(&e)),
    };
    if a.json {
        return format::print_json(&LinkGroupsView::new(&groups, &smcd));
    }
    format::print_lines(groups_text(&groups, &smcd, a.details))
}

/// Run `smcrun link`.
pub fn link(a: &JsonArgs) -> Outcome {
    let groups = match open().and_then(|c| c.link_groups()) {
        Ok(g) => this_netns::local_groups(g, this_netns::cookie()),
        Err(e) => return Err(Failure::refused(&e)),
    };
    if a.json {
        return format::print_json(&LinksView::new(&groups));
    }
    let t = links_table(&groups);
    if t.is_empty() {
        format::print_lines(["no SMC-R links"])
    } else {
        format::print_table(&t)
    }
}

fn read_devices(c: &SmcGenl) -> Result<(Devices, smc_genl::SysInfo), Error> {
    let sys = c.sys_info()?;
    let smcd = c.devices_smcd()?;
    let loopback = smc_genl::loopback_ism(&sys, &smcd, &c.link_groups_smcd()?);
    Ok((
        Devices {
            smcr: c.devices_smcr()?,
            smcd,
            loopback,
        },
        sys,
    ))
}

/// Run `smcrun device`.
pub fn device(a: &JsonArgs) -> Outcome {
    let d = match open().and_then(|c| read_devices(&c)) {
        Ok((d, _)) => d,
        Err(e) => return Err(Failure::refused(&e)),
    };
    if a.json {
        return format::print_json(&DevicesView::new(&d.smcr, &d.smcd, d.loopback.as_ref()));
    }
    format::print_lines(devices_text(&d))
}

/// Run `smcrun info`.
pub fn info(a: &JsonArgs) -> Outcome {
    let read = || -> Result<InfoView, Error> {
        let c = open()?;
        let (d, s) = read_devices(&c)?;
        let seid = c.seid().ok();
        // null (not an empty list) when the kernel would not say
        let ueids = c.ueid_dump().ok();
        Ok(InfoView::new(
            &s,
            seid.map(|x| x.enabled),
            ueids,
            [d.smcr.len(), d.smcd.len()],
            d.loopback.as_ref(),
        ))
    };
    let v = match read() {
        Ok(v) => v,
        Err(e) => return Err(Failure::refused(&e)),
    };
    if a.json {
        return format::print_json(&v);
    }
    format::print_lines(info_text(&v))
}
