//! The text of `smcrun linkgroup`, `link`, `device` and `info`, in `smcr`'s columns (and
//! `smcd`'s where SMC-D has any).

use smcrun_kernel::reasons;
use smcrun_kernel::smc_genl::{
    self, Device, LinkGroup, LinkGroupSmcd, LoopbackEvidence, LoopbackIsm,
};

use super::json::{ifname, lgr_id, port_state, InfoView};
use super::Devices;
use crate::text::{Align, Table};

/// `-` for an empty string.
fn blank(s: &str) -> String {
    if s.is_empty() {
        "-".to_string()
    } else {
        s.to_string()
    }
}

/// `-` for no value.
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// `smcr linkgroup` columns.
pub fn groups_table(groups: &[LinkGroup]) -> Table {
    let mut t = Table::new(&[
        ("LG-ID", Align::Left),
        ("LG-Role", Align::Left),
        ("LG-Type", Align::Left),
        ("VLAN", Align::Right),
        ("#Conns", Align::Right),
        ("PNET-ID", Align::Left),
    ]);
    for g in groups {
        t.row(vec![
            lgr_id(g.id),
            reasons::role(g.role).into_owned(),
            reasons::lgr_type(g.lgr_type).into_owned(),
            g.vlan_id.to_string(),
            g.conns.to_string(),
            blank(&g.pnetid),
        ]);
    }
    t
}

/// `smcr -d linkgroup`: one block per group.
pub fn group_details(g: &LinkGroup) -> Vec<String> {
    let v2 = g.v2.as_ref();
    let yes_no = |b: bool| if b { "Yes" } else { "No" }.to_string();
    let bytes = |b: Option<u64>| b.map_or_else(|| "-".to_string(), |b| format!("{b} B"));
    let mut out: Vec<String> = [
        ("LG-ID", lgr_id(g.id)),
        ("LG-Role", reasons::role(g.role).into_owned()),
        ("LG-Type", reasons::lgr_type(g.lgr_type).into_owned()),
        ("VLAN", g.vlan_id.to_string()),
        ("PNET-ID", blank(&g.pnetid)),
        ("Version", opt(v2.map(|v| v.version))),
        ("Peer-Rel", opt(v2.map(|v| v.release))),
        ("Peer-Host", blank(v2.map_or("", |v| v.peer_host.as_str()))),
        ("Peer-OS", opt(v2.map(|v| reasons::peer_os(v.peer_os)))),
        ("Direct", g.direct.map_or_else(|| "-".to_string(), yes_no)),
        ("EID", blank(v2.map_or("", |v| v.negotiated_eid.as_str()))),
        ("Max-Conns", opt(g.max_conns)),
        ("Max-Links", opt(g.max_links)),
        ("Buf-Type", opt(g.buf_type.map(reasons::buf_type))),
        ("#Conns", g.conns.to_string()),
        ("Sndbuf", bytes(g.sndbuf_alloc)),
        ("RMB", bytes(g.rmb_alloc)),
    ]
    .into_iter()
    .map(|(k, v)| format!("{k:<10}: {v}"))
    .collect();
    for l in &g.links {
        out.push(format!(
            "  Link {}: {} {} port {} on {}, {} conns, GID {} peer {}",
            l.id,
            reasons::link_state(l.state),
            l.ib_dev,
            l.ib_port,
            ifname(l.net_dev),
            l.conn_count,
            l.gid,
            l.peer_gid
        ));
    }
    out
}

/// `smcd linkgroup` columns (SMC-D link groups).
pub fn smcd_table(groups: &[LinkGroupSmcd]) -> Table {
    let mut t = Table::new(&[
        ("LG-ID", Align::Left),
        ("Device", Align::Left),
        ("VLAN", Align::Right),
        ("#Conns", Align::Right),
        ("PNET-ID", Align::Left),
        ("Sndbuf", Align::Right),
        ("DMB", Align::Right),
    ]);
    for g in groups {
        t.row(vec![
            lgr_id(g.id),
            g.device(),
            g.vlan_id.to_string(),
            g.conns.to_string(),
            blank(&g.pnetid),
            opt(g.sndbuf_alloc),
            opt(g.dmb_alloc),
        ]);
    }
    t
}

/// `smcr linkgroup link-show` columns: one row per link.
pub fn links_table(groups: &[LinkGroup]) -> Table {
    let mut t = Table::new(&[
        ("LG-ID", Align::Left),
        ("LG-Role", Align::Left),
        ("LG-Type", Align::Left),
        ("Net-Dev", Align::Left),
        ("Link-State", Align::Left),
        ("#Conns", Align::Right),
        ("Link-UID", Align::Left),
        ("Peer-UID", Align::Left),
        ("IB-Dev", Align::Left),
        ("IB-P", Align::Right),
        ("Local-GID", Align::Left),
        ("Peer-GID", Align::Left),
    ]);
    for g in groups {
        for l in &g.links {
            t.row(vec![
                lgr_id(g.id),
                reasons::role(g.role).into_owned(),
                reasons::lgr_type(g.lgr_type).into_owned(),
                ifname(l.net_dev),
                reasons::link_state(l.state).into_owned(),
                l.conn_count.to_string(),
                l.uid.clone(),
                l.peer_uid.clone(),
                l.ib_dev.clone(),
                l.ib_port.to_string(),
                l.gid.clone(),
                l.peer_gid.clone(),
            ]);
        }
    }
    t
}

/// `smcr device` columns: one row per usable port of each device (a port SMC marks invalid,
/// such as a second port the device does not have, is left out).
pub fn devices_table(devs: &[Device]) -> Table {
    let mut t = Table::new(&[
        ("Net-Dev", Align::Left),
        ("IB-Dev", Align::Left),
        ("IB-P", Align::Right),
        ("IB-State", Align::Left),
        ("Type", Align::Left),
        ("Crit", Align::Left),
        ("#Links", Align::Right),
        ("PNET-ID", Align::Left),
    ]);
    for d in devs {
        for (i, p) in d.ports.iter().enumerate().filter(|(_, p)| p.valid) {
            t.row(vec![
                ifname(p.netdev),
                d.ib_name.clone(),
                (i + 1).to_string(),
                port_state(p).to_string(),
                format!("0x{:x}", d.pci_device),
                if d.critical { "Yes" } else { "No" }.to_string(),
                p.link_count.to_string(),
                blank(&p.pnetid),
            ]);
        }
    }
    t
}

/// `smcd device` columns.
pub fn smcd_devices_table(devs: &[Device]) -> Table {
    let mut t = Table::new(&[
        ("FID", Align::Left),
        ("Type", Align::Left),
        ("PCI-ID", Align::Left),
        ("PCHID", Align::Left),
        ("InUse", Align::Left),
        ("#LGs", Align::Right),
        ("PNET-ID", Align::Left),
    ]);
    for d in devs {
        t.row(vec![
            format!("{:04x}", d.pci_fid),
            format!("0x{:x}", d.pci_device),
            blank(&d.pci_id),
            format!("{:04x}", d.pci_chid),
            if d.use_count > 0 { "Yes" } else { "No" }.to_string(),
            d.use_count.to_string(),
            blank(
                &d.ports
                    .first()
                    .map(|p| p.pnetid.clone())
                    .unwrap_or_default(),
            ),
        ]);
    }
    t
}

/// The lines about loopback-ism under `smcrun device`'s SMC-D devices: it is never in the
/// kernel's device dump, so the view says where it was seen instead.
pub fn loopback_lines(lo: &LoopbackIsm) -> Vec<String> {
    let seen = match lo.seen_from {
        LoopbackEvidence::LinkGroups => format!(
            "in use: {} SMC-D link group(s) with its CHID {:04x}, {} connection(s)",
            lo.link_groups,
            smc_genl::LOOPBACK_ISM_CHID,
            lo.conns
        ),
        LoopbackEvidence::SmcdV2WithoutIsm => {
            "idle: the kernel can do SMC-Dv2 and has no ISM device, which only loopback-ism gives"
                .to_string()
        }
    };
    vec![
        format!("{}: {seen}", smc_genl::LOOPBACK_ISM),
        "  (not in the kernel's SMC-D device dump: Linux leaves loopback-ism out of it; SMC-Dv2 over it needs a UEID where the SEID is disabled, e.g. x86)".to_string(),
    ]
}

/// The text of `smcrun device`: SMC-R's table, then SMC-D's devices and loopback-ism.
pub fn devices_text(d: &Devices) -> Vec<String> {
    let mut out = Vec::new();
    let r = devices_table(&d.smcr);
    if r.is_empty() {
        out.push("no SMC-R devices (add one with `smcrun setup soft-roce` on a host without RDMA hardware)".to_string());
    } else {
        out.extend(r.render());
    }
    if !d.smcd.is_empty() || d.loopback.is_some() {
        out.push(String::new());
        out.push("SMC-D devices".to_string());
        if !d.smcd.is_empty() {
            out.extend(smcd_devices_table(&d.smcd).render());
        }
        if let Some(lo) = &d.loopback {
            out.extend(loopback_lines(lo));
        }
    }
    out
}

/// The text of `smcrun info`, from the view its JSON prints.
pub fn info_text(v: &InfoView) -> Vec<String> {
    let dash = |x: &str| {
        if x.is_empty() {
            "-".to_string()
        } else {
            x.to_string()
        }
    };
    let yes = |b: bool| if b { "Yes" } else { "No" };
    vec![
        format!("SMC Version   : {}", v.smc_version),
        format!("SMC Hostname  : {}", dash(&v.host)),
        format!(
            "SMC-R         : v1 Yes, v2 {} ({} device(s))",
            yes(v.smcr_v2),
            v.smcr_devices
        ),
        format!(
            "SMC-D         : v1 Yes, v2 {} ({})",
            yes(v.smcd_v2),
            match &v.smcd_loopback {
                Some(lo) => format!("{}, {} ISM device(s)", lo.name, v.smcd_devices),
                None => format!("{} device(s)", v.smcd_devices),
            }
        ),
        format!(
            "SEID          : {}{}",
            dash(&v.seid),
            match v.seid_enabled {
                Some(false) => " (disabled)",
                _ => "",
            }
        ),
        format!(
            "UEIDs         : {}",
            match &v.ueids {
                None => "- (the kernel did not say)".to_string(),
                Some(u) if u.is_empty() => {
                    "- (SMC-Rv2 needs one, and SMC-Dv2 too where the SEID is disabled: smcrun ueid add NAME)".to_string()
                }
                Some(u) => u.join(", "),
            }
        ),
    ]
}

/// The text of `smcrun linkgroup` (`-d`: one block per group): SMC-R's groups of this network
/// namespace, then SMC-D's.
pub fn groups_text(groups: &[LinkGroup], smcd: &[LinkGroupSmcd], details: bool) -> Vec<String> {
    if groups.is_empty() && smcd.is_empty() {
        return vec!["no SMC link groups".to_string()];
    }
    let mut out = Vec::new();
    if details {
        for (i, g) in groups.iter().enumerate() {
            if i > 0 {
                out.push(String::new());
            }
            out.extend(group_details(g));
        }
    } else if !groups.is_empty() {
        out.extend(groups_table(groups).render());
    }
    if !smcd.is_empty() {
        out.push(String::new());
        out.push(
            "SMC-D link groups (all network namespaces: the kernel does not say whose)".to_string(),
        );
        out.extend(smcd_table(smcd).render());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linkgroup::Devices;
    use smcrun_kernel::smc_genl::{
        parse_devices, parse_devices_smcd, parse_link_groups, parse_link_groups_smcd,
        parse_sys_info,
    };

    fn fixture(name: &str) -> Vec<u8> {
        crate::fixtures::raw("smcr", name)
    }

    #[test]
    fn captured_link_groups_in_smcr_columns() {
        let groups = parse_link_groups(&fixture("smc_GET_LINK_SMCR")).unwrap();
        assert!(!groups.is_empty());
        // Both ends of the loopback connections are on this host: a client and a server group.
        let roles: Vec<String> = groups
            .iter()
            .map(|g| reasons::role(g.role).into())
            .collect();
        assert!(roles.contains(&"CLNT".to_string()) && roles.contains(&"SERV".to_string()));
        let lines = groups_table(&groups).render();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["LG-ID", "LG-Role", "LG-Type", "VLAN", "#Conns", "PNET-ID"]
        );
        assert_eq!(lines.len(), groups.len() + 1);
        let g = &groups[0];
        assert!(lines[1].starts_with(&format!("{:08x}", g.id)), "{lines:?}");
        let j = serde_json::to_value(crate::linkgroup::json::GroupView::new(g)).unwrap();
        assert_eq!(j["conns"], g.conns);
        assert_eq!(j["version"], 2);
        assert_eq!(j["eid"], "SMCRUN-TEST");
        assert_eq!(j["peer_os"], "LINUX");
        assert_eq!(j["links"][0]["ib_dev"], "rxe_lo");
        assert_eq!(j["links"][0]["state"], "ACTIVE");
        let d = group_details(g).join("\n");
        assert!(d.contains("EID       : SMCRUN-TEST"), "{d}");
        assert!(d.contains("Link 1: ACTIVE rxe_lo port 1"), "{d}");
        let links = links_table(&groups).render();
        assert!(
            links[1].contains("ACTIVE") && links[1].contains("rxe_lo"),
            "{links:?}"
        );
    }

    #[test]
    fn captured_device_and_info() {
        let devs = parse_devices(&fixture("smc_GET_DEV_SMCR")).unwrap();
        let lines = devices_table(&devs).render();
        assert!(lines[0].starts_with("Net-Dev  IB-Dev"), "{lines:?}");
        assert!(lines[1].starts_with("lo "), "{lines:?}");
        assert!(
            lines[1].contains("rxe_lo") && lines[1].contains("ACTIVE"),
            "{lines:?}"
        );
        let s = parse_sys_info(&fixture("smc_GET_SYS_INFO")).unwrap();
        let v = InfoView::new(
            &s,
            Some(true),
            Some(vec!["SMCRUN-TEST".into()]),
            [devs.len(), 0],
            None,
        );
        let text = info_text(&v).join("\n");
        assert!(
            text.contains("SMC-R         : v1 Yes, v2 Yes (1 device(s))"),
            "{text}"
        );
        assert!(text.contains("UEIDs         : SMCRUN-TEST"), "{text}");
        let mut none = v.clone();
        none.ueids = Some(vec![]);
        assert!(info_text(&none).join("\n").contains("SMC-Rv2 needs one"));
        none.ueids = None;
        assert!(info_text(&none)
            .join("\n")
            .contains("the kernel did not say"));
        assert!(text.starts_with("SMC Version   : 2."), "{text}");
    }

    #[test]
    fn captured_smcd_link_groups_devices_and_info() {
        // the SMC-D kernel with 2 SMC-D connections open (kernel/tests/fixtures/smcd)
        let f = |name| crate::fixtures::raw("smcd", name);
        let groups = parse_link_groups_smcd(&f("smc_GET_LGR_SMCD")).unwrap();
        let busy: Vec<&LinkGroupSmcd> = groups.iter().filter(|g| g.conns > 0).collect();
        assert!(!busy.is_empty(), "{groups:?}");
        let lines = smcd_table(&groups).render();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["LG-ID", "Device", "VLAN", "#Conns", "PNET-ID", "Sndbuf", "DMB"]
        );
        assert!(
            lines[1..].iter().all(|l| l.contains(" loopback-ism ")),
            "{lines:?}"
        );
        let j = serde_json::to_value(crate::linkgroup::json::SmcdGroupView::new(busy[0])).unwrap();
        assert_eq!(j["device"], "loopback-ism");
        assert_eq!(j["chid"], 0xffff);
        assert_eq!(j["version"], 2);
        assert_eq!(j["eid"], "SMCRUN-TEST");
        assert_eq!(j["gid"], j["peer_gid"]);

        // the device dump has no SMC-D device; loopback-ism is found from its link groups
        let sys = parse_sys_info(&f("smc_GET_SYS_INFO")).unwrap();
        let smcd = parse_devices_smcd(&f("smc_GET_DEV_SMCD")).unwrap();
        assert!(sys.ism_v2 && smcd.is_empty());
        let d = Devices {
            smcr: parse_devices(&f("smc_GET_DEV_SMCR")).unwrap(),
            loopback: smc_genl::loopback_ism(&sys, &smcd, &groups),
            smcd,
        };
        let text = devices_text(&d).join("\n");
        assert!(
            text.contains("\nSMC-D devices\nloopback-ism: in use: "),
            "{text}"
        );
        assert!(
            text.contains("not in the kernel's SMC-D device dump"),
            "{text}"
        );
        let info = InfoView::new(&sys, None, Some(vec![]), [1, 0], d.loopback.as_ref());
        let lo = serde_json::to_value(&info.smcd_loopback).unwrap();
        assert_eq!(lo["seen_from"], "link_groups");
        assert_eq!(lo["in_device_dump"], false);
        assert_eq!(
            lo["conns"],
            groups.iter().map(|g| u64::from(g.conns)).sum::<u64>()
        );
        let info = info_text(&info).join("\n");
        assert!(
            info.contains("SMC-D         : v1 Yes, v2 Yes (loopback-ism, 0 ISM device(s))"),
            "{info}"
        );
        assert!(
            info.contains("SMC-Dv2 too where the SEID is disabled"),
            "{info}"
        );

        // Debian's kernel (no loopback-ism, no SMC-Dv2): nothing about SMC-D
        let r = |name| crate::fixtures::raw("smcr", name);
        let sys = parse_sys_info(&r("smc_GET_SYS_INFO")).unwrap();
        assert_eq!(smc_genl::loopback_ism(&sys, &[], &[]), None);
        let d = Devices {
            smcr: parse_devices(&r("smc_GET_DEV_SMCR")).unwrap(),
            smcd: vec![],
            loopback: None,
        };
        assert!(!devices_text(&d).join("\n").contains("SMC-D"));
    }
}
