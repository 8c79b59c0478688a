//! A fallback or decline reason code as every view prints it: the code with its decoding.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use smcrun_kernel::reasons::{self, Category};
use smcrun_kernel::smc_genl::ReasonCount;

/// A reason code, decoded: `{code, hex, name, description, category}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonView {
    /// The kernel's code.
    pub code: u32,
    /// The code as the kernel's and smc-tools' messages write it (`0x03030000`).
    pub hex: String,
    /// Its name (`NOSMCDEV`).
    pub name: Cow<'static, str>,
    /// What it means for the operator.
    pub description: Cow<'static, str>,
    /// Its broad class.
    pub category: Category,
}

impl ReasonView {
    /// The decoding of `code`.
    pub fn new(code: u32) -> ReasonView {
        let r = reasons::describe(code);
        ReasonView {
            code,
            hex: format!("0x{code:08x}"),
            name: r.name,
            description: r.description,
            category: r.category,
        }
    }
}

/// A reason with how often the kernel counted it (GET_FBACK_STATS).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountedReason {
    /// The reason.
    #[serde(flatten)]
    pub reason: ReasonView,
    /// How often (the kernel counts in 16 bits, which wrap).
    pub count: u16,
}

/// The reasons with a count, most frequent first (ties by code).
pub fn most_frequent_first(list: &[ReasonCount]) -> Vec<CountedReason> {
    let mut sorted: Vec<&ReasonCount> = list.iter().filter(|r| r.count > 0).collect();
    sorted.sort_by_key(|r| (std::cmp::Reverse(r.count), r.code));
    sorted
        .into_iter()
        .map(|rc| CountedReason {
            reason: ReasonView::new(rc.code),
            count: rc.count,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_has_its_hex_code_and_decoding() {
        let r = ReasonView::new(0x0303_0000);
        assert_eq!(r.hex, "0x03030000");
        assert_eq!(r.name, "NOSMCDEV");
        assert_eq!(r.category, Category::Configuration);
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["category"], "configuration");
        assert_eq!(j["code"], 0x0303_0000);
    }

    #[test]
    fn counted_reasons_are_flat_and_most_frequent_first() {
        let list = [
            ReasonCount {
                code: 0x0301_0000,
                count: 1,
            },
            ReasonCount {
                code: 0x0303_0000,
                count: 4,
            },
            ReasonCount {
                code: 0x0500_0000,
                count: 0,
            },
            ReasonCount {
                code: 0x0300_0000,
                count: 1,
            },
        ];
        let s = most_frequent_first(&list);
        let codes: Vec<u32> = s.iter().map(|r| r.reason.code).collect();
        assert_eq!(codes, [0x0303_0000, 0x0300_0000, 0x0301_0000]);
        let j = serde_json::to_value(&s[0]).unwrap();
        assert_eq!(j["count"], 4);
        assert_eq!(j["name"], "NOSMCDEV");
        assert!(j.get("reason").is_none(), "{j}");
    }
}
