//! tests/packages is the one list of what the tests need: every program a test asks for with
//! `need()` is in it, so a missing program always names its package.

mod common;

#[test]
fn every_program_a_test_needs_is_in_tests_packages() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let list = std::fs::read_to_string(dir.join("../../packages")).unwrap();
    let mut asked = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        // This file's own need() asks for a program that is nowhere, on purpose.
        if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("deps.rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            for part in text.split("need(\"").skip(1) {
                let name = part.split('"').next().unwrap();
                asked.push((name.to_string(), p.file_name().unwrap().to_owned()));
            }
        }
    }
    assert!(asked.len() >= 10, "too few need() calls found: {asked:?}");
    for (name, file) in &asked {
        assert!(
            common::package_of(&list, name).is_some(),
            "{file:?} needs {name}, which tests/packages does not list"
        );
    }
}

#[test]
fn a_missing_program_names_its_package() {
    let list = "# comment\nmemcached   memcached   # per_process\nredis-server a b redis-cli #x\n";
    assert_eq!(common::package_of(list, "memcached"), Some("memcached"));
    assert_eq!(common::package_of(list, "redis-cli"), Some("redis-server"));
    assert_eq!(common::package_of(list, "per_process"), None);
    let e = std::panic::catch_unwind(|| common::need("smcrun-no-such-program-xyz")).unwrap_err();
    let msg = e.downcast_ref::<String>().unwrap();
    assert!(msg.contains("tests/packages does not list it"), "{msg}");
}
