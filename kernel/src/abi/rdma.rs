//! `include/uapi/rdma/rdma_netlink.h`: the NLDEV client and the `enum rdma_nldev_attr` values
//! this crate reads or writes (the enum is ABI: "don't change the order or add anything
//! between"). Only these are listed; the numbers are the enum's positions.

// RDMA netlink clients (RDMA_NL_*): the client id sits in the high bits of nlmsg_type.
pub const RDMA_NL_NLDEV: u16 = 5;

// enum rdma_nldev_attr: device and port identity.
pub const RDMA_NLDEV_ATTR_PAD: u16 = 0;
pub const RDMA_NLDEV_ATTR_DEV_INDEX: u16 = 1;
pub const RDMA_NLDEV_ATTR_DEV_NAME: u16 = 2;
pub const RDMA_NLDEV_ATTR_PORT_INDEX: u16 = 3;
pub const RDMA_NLDEV_ATTR_NODE_GUID: u16 = 6;
pub const RDMA_NLDEV_ATTR_PORT_STATE: u16 = 12;
pub const RDMA_NLDEV_ATTR_PORT_PHYS_STATE: u16 = 13;
pub const RDMA_NLDEV_ATTR_DEV_NODE_TYPE: u16 = 14;

// enum rdma_nldev_attr: the resource summary (RES_GET).
pub const RDMA_NLDEV_ATTR_RES_SUMMARY: u16 = 15;
pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY: u16 = 16;
pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME: u16 = 17;
pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR: u16 = 18;

// enum rdma_nldev_attr: resource tables, entries and what every entry carries.
pub const RDMA_NLDEV_ATTR_RES_QP: u16 = 19;
pub const RDMA_NLDEV_ATTR_RES_QP_ENTRY: u16 = 20;
pub const RDMA_NLDEV_ATTR_RES_LQPN: u16 = 21;
pub const RDMA_NLDEV_ATTR_RES_TYPE: u16 = 26;
pub const RDMA_NLDEV_ATTR_RES_STATE: u16 = 27;
pub const RDMA_NLDEV_ATTR_RES_PID: u16 = 28;
pub const RDMA_NLDEV_ATTR_RES_KERN_NAME: u16 = 29;
pub const RDMA_NLDEV_ATTR_RES_CM_ID: u16 = 30;
pub const RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY: u16 = 31;
pub const RDMA_NLDEV_ATTR_RES_CQ: u16 = 35;
pub const RDMA_NLDEV_ATTR_RES_CQ_ENTRY: u16 = 36;
pub const RDMA_NLDEV_ATTR_RES_MR: u16 = 40;
pub const RDMA_NLDEV_ATTR_RES_MR_ENTRY: u16 = 41;
pub const RDMA_NLDEV_ATTR_RES_PD: u16 = 46;
pub const RDMA_NLDEV_ATTR_RES_PD_ENTRY: u16 = 47;

// enum rdma_nldev_attr: the netdev behind a port (RoCE, iWARP).
pub const RDMA_NLDEV_ATTR_NDEV_INDEX: u16 = 50;
pub const RDMA_NLDEV_ATTR_NDEV_NAME: u16 = 51;

// enum rdma_nldev_attr: object numbers (a QP's is RES_LQPN).
pub const RDMA_NLDEV_ATTR_RES_PDN: u16 = 60;
pub const RDMA_NLDEV_ATTR_RES_CQN: u16 = 61;
pub const RDMA_NLDEV_ATTR_RES_MRN: u16 = 62;
pub const RDMA_NLDEV_ATTR_RES_CM_IDN: u16 = 63;
pub const RDMA_NLDEV_ATTR_RES_CTXN: u16 = 64;

// enum rdma_nldev_attr: links and protocol.
pub const RDMA_NLDEV_ATTR_LINK_TYPE: u16 = 65;
pub const RDMA_NLDEV_ATTR_DEV_PROTOCOL: u16 = 67;

// enum rdma_nldev_attr: user contexts and shared receive queues.
pub const RDMA_NLDEV_ATTR_RES_CTX: u16 = 86;
pub const RDMA_NLDEV_ATTR_RES_CTX_ENTRY: u16 = 87;
pub const RDMA_NLDEV_ATTR_RES_SRQ: u16 = 88;
pub const RDMA_NLDEV_ATTR_RES_SRQ_ENTRY: u16 = 89;
pub const RDMA_NLDEV_ATTR_RES_SRQN: u16 = 90;
