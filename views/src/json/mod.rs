//! What the views' JSON shares: a decoded fallback or decline reason ([`reason`]), and the golden
//! files the views' tests compare their JSON with. Each view keeps its own JSON in its folder:
//! [`crate::rdma::json`], [`crate::stats::json`], [`crate::linkgroup::json`] (`linkgroup`,
//! `link`, `device`, `info`), [`crate::ss::json`], [`crate::monitor::json`], [`crate::ps::json`]
//! (`ps`, `why`), [`crate::doctor::json`] and [`crate::bpf::json`] (`attach`, `detach`, `attach
//! --list`, `policy check --bpf`). The keys are the manual's (docs/src/guide/tools.md, "JSON of
//! the views"; every key in docs/src/reference/json.md, made from the golden files): snake_case
//! and stable (new ones may be added, none renamed), and a value the kernel does not report is
//! `null`.
//!
//! Where the text form of a view shows the same figure (a ratio, a summary, a decoded reason),
//! the text reads it from the struct, so the two never disagree.
//!
//! The tests compare each struct's JSON with what the views printed before they had these
//! structs (the files in `golden/`, written by the views' former `json!` code): for the kernel's
//! views from the real kernel's captures (`kernel/tests/fixtures/`), for BPF mode's from the
//! scopes and policies the tests construct.

pub mod reason;

#[cfg(test)]
pub(crate) mod golden {
    //! The golden files in `views/src/json/golden/`.

    use serde::de::DeserializeOwned;
    use serde::Serialize;
    use serde_json::Value;

    /// Golden file `name` (`golden/NAME.json`).
    pub fn read(name: &str) -> Value {
        let p = format!("{}/src/json/golden/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    /// `v` as the JSON value a reader of the printed text gets (through the text: a float is
    /// compared as printed).
    pub fn value(v: &impl Serialize) -> Value {
        serde_json::from_str(&serde_json::to_string(v).expect("serializes")).expect("parses")
    }

    /// Assert that `v` prints the same JSON value (keys, value types and values; key order
    /// aside) as golden file `name`.
    pub fn assert_same(name: &str, v: &impl Serialize) {
        let got = value(v);
        let want = read(name);
        assert!(
            got == want,
            "{name}: the JSON differs from golden/{name}.json\n--- got:\n{}\n--- want:\n{}",
            serde_json::to_string_pretty(&got).unwrap(),
            serde_json::to_string_pretty(&want).unwrap()
        );
    }

    /// Assert that golden file `name` reads back into a `T` that prints it again, as the VM's
    /// guest checks (`tests/vm/check`) read what smcrun printed.
    pub fn assert_reads_back<T: DeserializeOwned + Serialize>(name: &str) {
        let back: T = serde_json::from_value(read(name))
            .unwrap_or_else(|e| panic!("golden/{name}.json does not read back: {e}"));
        assert_same(name, &back);
    }

    /// Assert that `v`'s printed JSON reads back into its own type as the same JSON: the VM's
    /// guest checks (`tests/vm/check`) read it so.
    pub fn assert_round_trips<T: Serialize + DeserializeOwned>(name: &str, v: &T) {
        let text = serde_json::to_string(v).expect("serializes");
        let back: T = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{name}: does not read back ({e}):\n{text}"));
        assert_eq!(value(&back), value(v), "{name}: read back differently");
    }
}
