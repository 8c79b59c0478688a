//! The `--config` TOML file: any text is a config or one error line naming a place inside the
//! text; a policy read from it prints in a canonical form that parses back to the same policy.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match smcrun_config::parse("f.toml", text) {
        Err(e) => {
            assert!(
                e.line >= 1 && e.line <= text.lines().count().max(1) + 1,
                "{e} in {text:?}"
            );
            assert!(e.column >= 1);
            assert!(!e.message.contains('\n'), "{e:?}");
        }
        Ok(c) => {
            if let Some(p) = c.policy {
                let canonical = p.to_string();
                assert_eq!(smcrun_policy::Policy::parse(&canonical), Ok(p));
            }
            for a in c.sysctl {
                assert_eq!(
                    smcrun_config::parse_assignment(&format!("{}={}", a.key, a.value)),
                    Ok(a)
                );
            }
        }
    }
});
